//! The one error type of hinoki: a kind and a one-line message that names the problem.
//!
//! Every failure a user can cause (bad input, bad configuration, unreadable files, a missing
//! device) becomes an [`Error`] that the binary prints on one line before exiting non-zero.

use std::fmt;

/// What went wrong, in broad classes that decide nothing but the wording and the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The particles, a command-line value or a configuration value are not acceptable.
    Input,
    /// A file could not be read or written.
    Io,
    /// The requested device or library is missing or failed.
    Device,
    /// Communication between ranks failed.
    Comm,
}

/// A failure with a one-line, human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The broad class of the failure.
    pub kind: ErrorKind,
    /// The message, one line, naming the offending value or file.
    pub message: String,
    /// Whether every rank of the job holds this same error (see [`Error::is_shared`]).
    shared: bool,
}

impl Error {
    /// A bad-input error (particles, options, configuration).
    pub fn input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Input, message)
    }

    /// A file-system error; `path` is named in the message.
    pub fn io(path: impl AsRef<std::path::Path>, err: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::Io,
            format!("{}: {}", path.as_ref().display(), err),
        )
    }

    /// A device error (no GPU, driver failure, too little memory).
    pub fn device(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Device, message)
    }

    /// A communication error between ranks.
    pub fn comm(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Comm, message)
    }

    /// This error, marked as held by every rank of the job alike.
    pub fn shared(self) -> Self {
        Self {
            shared: true,
            ..self
        }
    }

    /// True when every rank of the job returns this same error (it went through
    /// [`crate::comm::agree`] or [`crate::comm::Comm::first_error`]): one rank reports it and
    /// every rank ends normally. False for an error of this rank alone, which the other ranks
    /// may not know about (they may be waiting for it in a collective).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// An error of the given kind; the message is made one line.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message: String = message.into();
        // Keep it on one line whatever the source said.
        let message = message.replace('\n', " ").trim().to_string();
        Self {
            kind,
            message,
            shared: false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Result with hinoki's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
