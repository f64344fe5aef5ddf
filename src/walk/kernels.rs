//! The interaction formulas, one point at a time: particle–particle (p2p) and particle–cell
//! (m2p, monopole or quadrupole), Plummer-softened, with G = 1 (the caller scales by G).
//!
//! With d = x_j − x_i, r² = |d|² + ε²:
//! - p2p: a = m d / r³, φ = −m / r; a source at zero distance (the target itself) adds nothing.
//! - m2p: a = M d / r³ − Q d / r⁵ + (5/2)(dᵀQd − T ε²) d / r⁷, φ = −M / r − (1/2)(dᵀQd − T ε²) / r⁵,
//!   with Q the traceless quadrupole about the centre of mass and T = Σ m |y|² its dropped trace:
//!   the exact second-order term of the Plummer-softened potential (the `T ε²` part vanishes
//!   without softening; leaving it out, as codes that soften the point-mass formula do, costs
//!   accuracy exactly where cells are accepted within a few ε, e.g. in a dense cusp).
//!
//! The walks call these inside fixed-width loops over targets, which the compiler vectorises.

/// Acceleration (x, y, z) and potential on a target at `x` from the point mass `src`
/// (position, mass) with squared softening `eps2`. Zero for a source at the target's position.
#[inline(always)]
pub fn p2p(x: [f32; 3], src: [f32; 4], eps2: f32) -> [f32; 4] {
    let dx = src[0] - x[0];
    let dy = src[1] - x[1];
    let dz = src[2] - x[2];
    let d2 = dx * dx + dy * dy + dz * dz;
    let rinv = 1.0 / (d2 + eps2).sqrt();
    let rinv = if d2 > 0.0 { rinv } else { 0.0 };
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

    /// Far from a cell, the quadrupole expansion matches the exact sum of its particles much
    /// better than the monopole.
    #[test]
    fn quadrupole_improves_far_field() {
        let pts = [
            [0.3f64, 0.0, 0.0, 1.0],
            [-0.1, 0.2, 0.0, 2.0],
            [0.0, -0.25, 0.15, 1.5],
        ];
        let m: f64 = pts.iter().map(|p| p[3]).sum();
        let com: Vec<f64> = (0..3)
            .map(|k| pts.iter().map(|p| p[k] * p[3]).sum::<f64>() / m)
            .collect();
        let mut q = [0.0f64; 6];
        for p in &pts {
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
        }
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

    #[test]
    fn self_interaction_is_zero() {
        let f = p2p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 5.0], 0.0);
        assert_eq!(f, [0.0; 4]);
    }
}
