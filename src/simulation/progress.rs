//! A run's progress on rank 0: an indicatif bar when stderr is a terminal, otherwise one
//! `tracing` line every few seconds (steps, simulated time, wall-clock time per step, estimated
//! time left, |ΔE/E|; a comoving run: the scale factor and redshift, its progress measured in
//! ln a, no |ΔE/E|), so that a batch job's log grows by a line per interval, not per step.
//! [`LogWriter`] keeps `tracing` lines from tearing the bar.
//!
//! Log lines and the bar share stderr: [`LogWriter`] writes each line with the bar cleared and
//! redraws it afterwards, so the bar always stays the last line of the terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bar being shown, if any; [`LogWriter`] suspends it around every log line.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Seconds between two progress lines when stderr is not a terminal, unless a run asks for
/// another interval (`hinoki run --progress-every`).
pub const DEFAULT_LINE_SECONDS: f64 = 60.0;

/// Checks an interval between progress lines: `seconds` must be finite and > 0.
pub fn check_line_seconds(seconds: f64) -> Result<f64, String> {
    match seconds.is_finite() && seconds > 0.0 {
        true => Ok(seconds),
        false => Err(format!(
            "the progress interval must be finite and > 0 seconds (got {seconds})"
        )),
    }
}

/// Where a run is, as [`Progress::set`] receives it after every step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Position {
    /// Simulated time (time units), or a comoving run's scale factor.
    pub time: f64,
    /// Steps taken since t = 0.
    pub step: u64,
    /// |ΔE/E| at the last diagnostics step (not shown for a comoving run).
    pub energy_error: f64,
}

/// What a run covers: from `start` to `end` (time units, or scale factors of a comoving run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// Where the run starts.
    pub start: f64,
    /// Where it ends.
    pub end: f64,
    /// A comoving run: the times are scale factors, and progress goes in ln a.
    pub comoving: bool,
}

impl Span {
    /// How much of the run lies behind `at`: 0 at the start, 1 at the end (in ln a for a
    /// comoving run).
    fn fraction(&self, at: f64) -> f64 {
        match self.comoving {
            true => (at / self.start).ln() / (self.end / self.start).ln(),
            false => (at - self.start) / (self.end - self.start),
        }
    }

    /// The position `at` in a few words: "t = 2.0000", or "a = 0.5000 (z = 1.000)".
    fn describe(&self, at: f64) -> String {
        match self.comoving {
            true => format!("a = {at:.4} (z = {:.3})", 1.0 / at - 1.0),
            false => format!("t = {at:.4}"),
        }
    }
}

/// A run's progress in simulated time: a bar on a terminal, periodic lines otherwise, nothing
/// on ranks other than 0.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: Option<Lines>,
    span: Span,
}

/// The state of the periodic progress lines.
struct Lines {
    /// Wall-clock time between two lines.
    every: Duration,
    /// When this process started the run, and the simulated time then.
    start: (Instant, f64),
    /// When the last line was written (or the run started), and the step then.
    last: (Instant, u64),
    /// What the run covers.
    span: Span,
}

impl Progress {
    /// The progress of a run over `span`, from `at`, shown when `show` (rank 0): a bar when
    /// stderr is a terminal, else a line every `line_seconds` seconds of wall-clock time (see
    /// [`check_line_seconds`]; an interval it refuses writes a line every step).
    pub fn new(show: bool, at: Position, span: Span, line_seconds: f64) -> Self {
        if !show {
            return Self {
                bar: None,
                lines: None,
                span,
            };
        }
        if !std::io::stderr().is_terminal() {
            let now = Instant::now();
            let lines = Lines {
                every: Duration::try_from_secs_f64(line_seconds).unwrap_or_default(),
                start: (now, at.time),
                last: (now, at.step),
                span,
            };
            return Self {
                bar: None,
                lines: Some(lines),
                span,
            };
        }
        let bar = ProgressBar::new(Self::units(1.0));
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {msg} ({percent}%, eta {eta})",
        )
        .expect("the bar template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
        let p = Self {
            bar: Some(bar),
            lines: None,
            span,
        };
        p.draw(at);
        p
    }

    /// Reports the run at `at`: moves the bar, or writes a line when the interval has passed
    /// since the last one.
    pub fn set(&mut self, at: Position) {
        self.draw(at);
        let Some(l) = self.lines.as_mut() else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(l.last.0) < l.every {
            return;
        }
        tracing::info!("{}", l.line(at, now));
        l.last = (now, at.step);
    }

    /// Moves the bar to `at`, if one is shown.
    fn draw(&self, at: Position) {
        if let Some(bar) = &self.bar {
            bar.set_position(Self::units(self.span.fraction(at.time)));
            bar.set_message(match self.span.comoving {
                true => self.span.describe(at.time),
                false => format!("t = {:.4}, |dE/E| = {:.2e}", at.time, at.energy_error),
            });
        }
    }

    /// Bar positions are integers: millionths of the run.
    fn units(fraction: f64) -> u64 {
        (fraction.clamp(0.0, 1.0) * 1e6).round() as u64
    }
}

impl Lines {
    /// The progress line at `at`, written at wall-clock time `now`: the time per step since
    /// the last line, and the time left at the pace since the start.
    fn line(&self, at: Position, now: Instant) -> String {
        let steps = at.step.saturating_sub(self.last.1).max(1);
        let per_step = now.duration_since(self.last.0).as_secs_f64() / steps as f64;
        let (f, f0) = (
            self.span.fraction(at.time),
            self.span.fraction(self.start.1),
        );
        let done = f - f0;
        let left = match done > 0.0 {
            true => clock((1.0 - f) / done * (now - self.start.0).as_secs_f64()),
            false => "unknown".to_string(),
        };
        let energy = match self.span.comoving {
            true => String::new(),
            false => format!(", |dE/E| = {:.2e}", at.energy_error),
        };
        format!(
            "progress: step {}, {} of {} ({:.1} %), {per_step:.3} s per step, {left} left{energy}",
            at.step,
            self.span.describe(at.time),
            self.span.end,
            100.0 * f,
        )
    }
}

/// `seconds` as h:mm:ss.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_names_steps_time_pace_time_left_and_energy_error() {
        let t0 = Instant::now();
        let lines = Lines {
            every: Duration::from_secs(1),
            start: (t0, 1.0),
            last: (t0 + Duration::from_secs(10), 100),
            span: Span {
                start: 0.0,
                end: 5.0,
                comoving: false,
            },
        };
        let at = Position {
            time: 2.0,
            step: 120,
            energy_error: 3.25e-5,
        };
        // 20 steps in the 10 s since the last line; 1 time unit in 20 s, 3 left: 60 s.
        let line = lines.line(at, t0 + Duration::from_secs(20));
        assert_eq!(
            line,
            "progress: step 120, t = 2.0000 of 5 (40.0 %), 0.500 s per step, 0:01:00 left, |dE/E| = 3.25e-5"
        );
        assert_eq!(clock(3723.4), "1:02:03");
        let at_start = Position { time: 1.0, ..at };
        assert!(lines.line(at_start, t0).contains("unknown left"));
    }

    #[test]
    fn comoving_lines_go_in_ln_a_from_the_origin() {
        let t0 = Instant::now();
        let lines = Lines {
            every: Duration::from_secs(1),
            start: (t0, 0.1),
            last: (t0, 0),
            span: Span {
                start: 0.01,
                end: 1.0,
                comoving: true,
            },
        };
        let at = Position {
            time: 0.1,
            step: 10,
            energy_error: 0.5,
        };
        // Half way in ln a from 0.01 to 1; restarted at a = 0.1, then 10 s to a = 1.
        let line = lines.line(
            Position {
                time: 0.1f64.sqrt(),
                ..at
            },
            t0 + Duration::from_secs(10),
        );
        assert!(
            line.contains("a = 0.3162 (z = 2.162) of 1 (75.0 %)"),
            "{line}"
        );
        assert!(line.contains("0:00:10 left"), "{line}");
        assert!(!line.contains("dE/E"), "{line}");
    }
}
