//! Pictures: `hinoki render` (a snapshot's projected surface density, [`map`]) and
//! `hinoki plot` (a run's energy error and time per phase, [`diagnostics`]; `hinoki plot power`,
//! a cosmological snapshot's power spectrum against linear theory, [`power`]).
//!
//! Drawing goes through plotters into memory with the embedded DejaVu Sans (`font.rs`), so the
//! pictures look the same on every machine; files are written atomically (`picture.rs`).

pub mod density;
pub mod diagnostics;
mod font;
pub mod map;
mod picture;
pub mod power;
pub mod select;

pub use density::Axis;
pub use diagnostics::plot_diagnostics;
pub use map::{render, render_snapshot, RenderOptions};
pub use power::{plot_power, PowerOptions};
