//! Diagnostics: per-phase timers, force-error statistics, and conserved quantities.

pub mod conservation;
pub mod error_stats;
pub mod ranks;
pub mod report;
pub mod step_costs;
pub mod timers;
pub mod virtual_ranks;

pub use error_stats::ErrorStats;
pub use timers::PhaseTimes;
