//! The interaction formulas, one point at a time: particle–particle (p2p) and particle–cell
//! (m2p, monopole or quadrupole), Plummer-softened, with G = 1 (the caller scales by G).
//!
//! With d = x_j − x_i, r² = |d|² + ε²:
//! - p2p: a = m d / r³, φ = −m / r; a source at r = 0 (coincident without softening, where φ is
//!   not defined) adds nothing. The walks leave the target itself out by its index.
//! - m2p: a = M d / r³ − Q d / r⁵ + (5/2)(dᵀQd − T ε²) d / r⁷, φ = −M / r − (1/2)(dᵀQd − T ε²) / r⁵,
//!   with Q the traceless quadrupole about the centre of mass and T = Σ m |y|² its dropped trace:
//!   the exact second-order term of the Plummer-softened potential (the `T ε²` part vanishes
//!   without softening; leaving it out, as codes that soften the point-mass formula do, costs
//!   accuracy exactly where cells are accepted within a few ε, e.g. in a dense cusp).
//!
//! The walks call these inside fixed-width loops over targets, which the compiler vectorises.

/// Acceleration (x, y, z) and potential on a target at `x` from the point mass `src`
/// (position, mass) with squared softening `eps2`: at the target's position, −m/ε (zero
/// without softening). The caller leaves the target itself out.
#[inline(always)]
pub fn p2p(x: [f32; 3], src: [f32; 4], eps2: f32) -> [f32; 4] {
    let dx = src[0] - x[0];
    let dy = src[1] - x[1];
    let dz = src[2] - x[2];
    let r2 = dx * dx + dy * dy + dz * dz + eps2;
    let rinv = if r2 > 0.0 { 1.0 / r2.sqrt() } else { 0.0 };
    let mr = src[3] * rinv;
    let mr3 = mr * rinv * rinv;
    [dx * mr3, dy * mr3, dz * mr3, -mr]
}

/// Acceleration and potential on a target at `x` from a cell with centre of mass and mass
/// `com_mass`, traceless quadrupole `quad` (xx, yy, zz, xy, xz, yz) and trace `trace`
/// (Σ m |y|²); the quadrupole terms are added when `quadrupole` is true.
#[inline(always)]
pub fn m2p(
    x: [f32; 3],
    com_mass: [f32; 4],
    quad: &[f32; 6],
    trace: f32,
    eps2: f32,
    quadrupole: bool,
) -> [f32; 4] {
    let dx = com_mass[0] - x[0];
    let dy = com_mass[1] - x[1];
    let dz = com_mass[2] - x[2];
    let r2 = dx * dx + dy * dy + dz * dz + eps2;
    let rinv = 1.0 / r2.sqrt();
    let rinv2 = rinv * rinv;
    let mr = com_mass[3] * rinv;
    let mr3 = mr * rinv2;
    if !quadrupole {
        return [dx * mr3, dy * mr3, dz * mr3, -mr];
    }
    let [qxx, qyy, qzz, qxy, qxz, qyz] = *quad;
    let qx = qxx * dx + qxy * dy + qxz * dz;
    let qy = qxy * dx + qyy * dy + qyz * dz;
    let qz = qxz * dx + qyz * dy + qzz * dz;
    // dᵀQd − T ε²: the softened second-order term.
    let dqd = dx * qx + dy * qy + dz * qz - trace * eps2;
    let rinv5 = rinv2 * rinv2 * rinv;
    let radial = mr3 + 2.5 * dqd * rinv5 * rinv2;
    [
        dx * radial - qx * rinv5,
        dy * radial - qy * rinv5,
        dz * radial - qz * rinv5,
        -mr - 0.5 * dqd * rinv5,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mass, centre of mass, traceless quadrupole and trace of point masses (x, y, z, m), in
    /// float64: the reference the expansions are checked against.
    fn reference_moments(pts: &[[f64; 4]]) -> (f64, [f64; 3], [f64; 6], f64) {
        let m: f64 = pts.iter().map(|p| p[3]).sum();
        let com = [0, 1, 2].map(|k| pts.iter().map(|p| p[k] * p[3]).sum::<f64>() / m);
        let (mut q, mut trace) = ([0.0f64; 6], 0.0);
        for p in pts {
            let y = [p[0] - com[0], p[1] - com[1], p[2] - com[2]];
            let r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
            let t = [
                3.0 * y[0] * y[0] - r2,
                3.0 * y[1] * y[1] - r2,
                3.0 * y[2] * y[2] - r2,
                3.0 * y[0] * y[1],
                3.0 * y[0] * y[2],
                3.0 * y[1] * y[2],
            ];
            (0..6).for_each(|k| q[k] += p[3] * t[k]);
            trace += p[3] * r2;
        }
        (m, com, q, trace)
    }

    /// Far from a cell, the quadrupole expansion matches the exact sum of its particles much
    /// better than the monopole.
    #[test]
    fn quadrupole_improves_far_field() {
        let pts = [
            [0.3f64, 0.0, 0.0, 1.0],
            [-0.1, 0.2, 0.0, 2.0],
            [0.0, -0.25, 0.15, 1.5],
        ];
        let (m, com, q, _) = reference_moments(&pts);
        let target = [8.0f32, 4.4, -2.8];
        let mut exact = [0.0f32; 4];
        for p in &pts {
            let f = p2p(
                target,
                [p[0] as f32, p[1] as f32, p[2] as f32, p[3] as f32],
                0.0,
            );
            (0..4).for_each(|k| exact[k] += f[k]);
        }
        let cm = [com[0] as f32, com[1] as f32, com[2] as f32, m as f32];
        let qf = q.map(|v| v as f32);
        let err = |f: [f32; 4]| {
            let d: f32 = (0..3).map(|k| (f[k] - exact[k]).powi(2)).sum();
            let a: f32 = (0..3).map(|k| exact[k].powi(2)).sum();
            (d / a).sqrt()
        };
        let mono = err(m2p(target, cm, &qf, 0.0, 0.0, false));
        let quad = err(m2p(target, cm, &qf, 0.0, 0.0, true));
        assert!(quad < 0.4 * mono, "monopole {mono}, quadrupole {quad}");
        let quad_pot = m2p(target, cm, &qf, 0.0, 0.0, true)[3];
        assert!((quad_pot - exact[3]).abs() < 1e-3 * exact[3].abs());
    }

    /// With softening, the trace term makes the quadrupole the second-order expansion of the
    /// softened sum: at a distance of a few ε it is much closer than the point-mass formula.
    #[test]
    fn softened_quadrupole_needs_the_trace_term() {
        // A cell of size ~0.002 seen from 2 ε = 0.02: octupole terms ~(l/d)³ are small, the
        // trace term ~(l/d)² ε²/(d² + ε²) is not.
        let pts = [
            [0.002f64, 0.0, 0.0, 1.0],
            [-0.0008, 0.0012, 0.0, 2.0],
            [0.0, -0.001, 0.0006, 1.5],
        ];
        let eps2 = 0.01f64 * 0.01;
        let (m, com, q, trace) = reference_moments(&pts);
        // A target two ε away; the exact softened sum in float64.
        let x = [0.018f64, 0.008, -0.003];
        let mut exact = [0.0f64; 4];
        for p in &pts {
            let d = [p[0] - x[0], p[1] - x[1], p[2] - x[2]];
            let rinv = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2).sqrt();
            (0..3).for_each(|k| exact[k] += p[3] * d[k] * rinv * rinv * rinv);
            exact[3] -= p[3] * rinv;
        }
        let err = |f: [f32; 4]| {
            let d: f64 = (0..3).map(|k| (f[k] as f64 - exact[k]).powi(2)).sum();
            let a: f64 = (0..3).map(|k| exact[k].powi(2)).sum();
            (d / a).sqrt()
        };
        let xf = x.map(|v| v as f32);
        let cm = [com[0] as f32, com[1] as f32, com[2] as f32, m as f32];
        let qf = q.map(|v| v as f32);
        let with = err(m2p(xf, cm, &qf, trace as f32, eps2 as f32, true));
        let without = err(m2p(xf, cm, &qf, 0.0, eps2 as f32, true));
        assert!(with < 0.5 * without, "with trace {with}, without {without}");
    }

    #[test]
    fn a_source_at_the_targets_position_adds_its_softened_potential() {
        let f = p2p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 5.0], 0.0);
        assert_eq!(f, [0.0; 4]);
        let f = p2p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 5.0], 0.25);
        assert_eq!(f, [0.0, 0.0, 0.0, -10.0]);
    }
}
