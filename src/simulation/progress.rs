//! The progress bar of a run (indicatif), shown only when stderr is a terminal and only on
//! rank 0, and the log writer that keeps `tracing` lines from tearing it.
//!
//! Log lines and the bar share stderr: [`LogWriter`] writes each line with the bar cleared and
//! redraws it afterwards, so the bar always stays the last line of the terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// The bar being shown, if any; [`LogWriter`] suspends it around every log line.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// A run's progress in simulated time: a bar on a terminal, nothing otherwise.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar from 0 to `t_end` (time units), drawn when `show` (rank 0) and stderr is a
    /// terminal; `t` is where the run starts (0, or the restart time).
    pub fn new(show: bool, t: f64, t_end: f64) -> Self {
        if !(show && std::io::stderr().is_terminal()) {
            return Self { bar: None };
        }
        let bar = ProgressBar::new(Self::units(t_end));
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] t = {msg} ({percent}%, eta {eta})",
        )
        .expect("the bar template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_position(Self::units(t));
        bar.set_message(format!("{t:.4}"));
        *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
        Self { bar: Some(bar) }
    }

    /// Moves the bar to time `t` (time units).
    pub fn set(&self, t: f64) {
        if let Some(bar) = &self.bar {
            bar.set_position(Self::units(t));
            bar.set_message(format!("{t:.4}"));
        }
    }

    /// Bar positions are integers: millionths of a time unit.
    fn units(t: f64) -> u64 {
        (t * 1e6).round() as u64
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// stderr for `tracing` (`with_writer(|| LogWriter)`): each write happens with the progress
/// bar, if one is shown, cleared and redrawn after it.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = SHOWN.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
