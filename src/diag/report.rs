//! The force-evaluation report of `hinoki forces`: one JSON object (the contract every benchmark
//! script reads) or the same content as a readable table.

use super::error_stats::{relative_acc_errors, relative_pot_errors, ErrorStats};
use super::timers::PhaseTimes;
use crate::comm::Comm;
use crate::domain::gather_all;
use crate::error::Result;
use crate::forces::{ForceParams, ForceResult};
use crate::hash::mix;
use crate::particles::Particles;
use crate::walk::direct::{direct_forces, periodic_direct_forces};
use serde_json::{json, Value};
use std::time::Instant;

/// Accuracy of a force evaluation against float64 direct summation on a sample of particles.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Number of particles compared.
    pub sampled: usize,
    /// Relative acceleration error statistics.
    pub acc: ErrorStats,
    /// Relative potential error statistics.
    pub pot: ErrorStats,
    /// Seconds spent on the reference summation.
    pub seconds: f64,
}

/// Compares `result` (forces on this rank's particles `p`) with float64 direct summation over
/// every particle of the job on about `k` particles chosen by a hash of their id and `seed`
/// (all when `k ≥ N`): the same particles whatever the rank count. Uses the softening, G and
/// periodic box of `params` (in a box, the periodic float64 sum of
/// [`periodic_direct_forces`]). Collective: every rank gets the job's statistics.
pub fn check_against_direct(
    comm: &dyn Comm,
    p: &Particles,
    params: &ForceParams,
    result: &ForceResult,
    k: usize,
    seed: u64,
) -> Result<Check> {
    let t0 = Instant::now();
    let (pos, mass, mine) = gather_all(comm, p)?;
    let n = pos.len();
    // The sample is chosen by particle id (a hash of the id and the seed under k/n), so that
    // the same particles are checked whatever the rank count and order: about k of them.
    let pick =
        |id: u64| ((mix(id ^ mix(seed)) >> 11) as f64 * 2f64.powi(-53) * n as f64) < k as f64;
    let idx: Vec<usize> = (0..p.len())
        .filter(|&i| k >= n || pick(p.id[i]))
        .map(|i| mine.start + i)
        .collect();
    let (acc_ref, pot_ref) = match params.periodic() {
        true => periodic_direct_forces(&pos, &mass, params.eps, params.box_size, &idx),
        false => direct_forces(&pos, &mass, params.eps, &idx),
    };
    let acc_ref: Vec<_> = acc_ref.into_iter().map(|a| a * params.g).collect();
    let pot_ref: Vec<_> = pot_ref.into_iter().map(|v| v * params.g).collect();
    let acc: Vec<_> = idx.iter().map(|&i| result.acc[i - mine.start]).collect();
    let pot: Vec<_> = idx.iter().map(|&i| result.pot[i - mine.start]).collect();
    let acc_err = comm.allgatherv_f64(&relative_acc_errors(&acc, &acc_ref))?;
    let pot_err = comm.allgatherv_f64(&relative_pot_errors(&pot, &pot_ref))?;
    Ok(Check {
        sampled: acc_err.len(),
        acc: ErrorStats::of(&acc_err),
        pot: ErrorStats::of(&pot_err),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Mean interactions per particle `(p2p, m2p)`.
pub fn interactions_per_particle(r: &ForceResult) -> (f64, f64) {
    let n = r.p2p.len().max(1) as f64;
    let sum = |v: &[u32]| v.iter().map(|&x| x as f64).sum::<f64>() / n;
    (sum(&r.p2p), sum(&r.m2p))
}

/// The report as one JSON object.
pub fn forces_json(
    n: usize,
    params: &ForceParams,
    result: &ForceResult,
    check: Option<&Check>,
) -> Value {
    let (pp, pc) = interactions_per_particle(result);
    let total = (pp + pc) * n as f64;
    let walk = result.times.get("walk");
    json!({
        "n": n,
        "method": params.method.name(),
        "backend": params.backend.name(),
        "device": result.device,
        "theta": params.theta,
        "mac": params.mac.name(),
        "alpha": params.alpha,
        "multipole": params.multipole,
        "ncrit": params.ncrit,
        "group": params.group,
        "vg": params.vg.to_string(),
        "kernel": params.kernel.to_string(),
        "tree_build": params.tree_build.name(),
        "gpu_memory": params.gpu_memory.name(),
        "order": params.order.name(),
        "walk": params.walk.name(),
        "eps": params.eps,
        "G": params.g,
        "threads": rayon::current_num_threads(),
        "time": result.times.to_json(),
        "interactions": {
            "p2p_per_particle": pp,
            "m2p_per_particle": pc,
            "total": total,
            "per_second": if walk > 0.0 { total / walk } else { 0.0 },
        },
        "bus_bytes": { "up": result.bus_bytes.0, "down": result.bus_bytes.1 },
        "check": check.map(|c| c.sampled),
        "error": check.map(|c| serde_json::to_value(c.acc).unwrap_or(Value::Null)),
        "potential_error": check.map(|c| json!({"p50": c.pot.p50, "p99": c.pot.p99})),
        "check_time": check.map(|c| c.seconds),
    })
}

/// The report as a readable table.
pub fn forces_table(
    n: usize,
    params: &ForceParams,
    result: &ForceResult,
    check: Option<&Check>,
) -> String {
    use std::fmt::Write;
    let (pp, pc) = interactions_per_particle(result);
    let walk = result.times.get("walk");
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hinoki forces: N = {n}, {} on {}",
        params.method, result.device
    );
    let _ = writeln!(
        s,
        "  theta {}  mac {}  multipole {}  ncrit {}  group {}  order {}  walk {}  eps {}  G {}",
        params.theta,
        params.mac,
        params.multipole,
        params.ncrit,
        params.group,
        params.order,
        params.walk,
        params.eps,
        params.g
    );
    let _ = writeln!(s, "  time per phase [s]:");
    write_times(&mut s, &result.times);
    let _ = writeln!(
        s,
        "  interactions per particle: p2p {pp:.1}  m2p {pc:.1}  ({:.3e} interactions/s in the walk)",
        if walk > 0.0 { (pp + pc) * n as f64 / walk } else { 0.0 }
    );
    if let Some(c) = check {
        let e = &c.acc;
        let _ = writeln!(
            s,
            "  |a - a_direct|/|a_direct| over {} particles: p50 {:.3e}  p90 {:.3e}  p99 {:.3e}  max {:.3e}  mean {:.3e}",
            c.sampled, e.p50, e.p90, e.p99, e.max, e.mean
        );
        let _ = writeln!(
            s,
            "  |phi - phi_direct|/|phi_direct|: p50 {:.3e}  p99 {:.3e}",
            c.pot.p50, c.pot.p99
        );
    }
    s
}

fn write_times(s: &mut String, t: &PhaseTimes) {
    use std::fmt::Write;
    for (name, secs) in t.iter() {
        let _ = writeln!(s, "    {name:<10} {secs:>10.4}");
    }
}
