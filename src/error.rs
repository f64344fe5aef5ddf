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

    /// The error for a name `given` that is none of `names` (a model, a criterion, …, named
    /// `what`): the valid names, and the closest of them where one is near ([`closest`]).
    pub fn unknown_name(what: &str, given: &str, names: &[&str]) -> Self {
        Self::input(format!(
            "unknown {what} '{given}' (expected one of: {}){}",
            names.join(", "),
            closest(given, names.iter().copied())
                .map_or(String::new(), |c| format!("; did you mean '{c}'?"))
        ))
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

/// The one of `names` nearest to `given` where it is near enough to be a typo of it: at most
/// one edit (an insertion, a deletion, a substitution or two neighbours swapped) for every
/// three characters of `given`, and at least one, ignoring case; the first of equals.
pub fn closest<'a>(given: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.to_lowercase();
    let most = (given.chars().count() / 3).max(1);
    names
        .map(|n| (edits(&given, &n.to_lowercase()), n))
        .filter(|&(d, _)| d <= most)
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

/// The optimal-string-alignment distance between `a` and `b` (insertions, deletions,
/// substitutions and swaps of two neighbours, each 1).
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let w = b.len() + 1;
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = match (i, j) {
                (0, j) => j,
                (i, 0) => i,
                _ => {
                    let cost = usize::from(a[i - 1] != b[j - 1]);
                    let mut best = (d[(i - 1) * w + j] + 1)
                        .min(d[i * w + j - 1] + 1)
                        .min(d[(i - 1) * w + j - 1] + cost);
                    if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                        best = best.min(d[(i - 2) * w + j - 2] + 1);
                    }
                    best
                }
            };
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_name_and_strangers_none() {
        let keys = ["theta", "mac", "alpha", "t_end", "dt", "G", "model"];
        for (typo, want) in [
            ("thta", Some("theta")),
            ("tehta", Some("theta")),
            ("tend", Some("t_end")),
            ("dtt", Some("dt")),
            ("g", Some("G")),
            ("modle", Some("model")),
            ("steps", None),
            ("xyz", None),
        ] {
            assert_eq!(closest(typo, keys.iter().copied()), want, "{typo}");
        }
        let e = Error::unknown_name("model", "plumer", &["plummer", "nfw"]);
        assert_eq!(
            e.message,
            "unknown model 'plumer' (expected one of: plummer, nfw); did you mean 'plummer'?"
        );
        let e = Error::unknown_name("model", "xyz", &["plummer", "nfw"]);
        assert_eq!(
            e.message,
            "unknown model 'xyz' (expected one of: plummer, nfw)"
        );
    }
}
