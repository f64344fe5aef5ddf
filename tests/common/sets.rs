//! Particle sets at the edges of what float32 resolves, shared by the accuracy, GPU and
//! multi-rank tests.

use glam::DVec3;
use hinoki::ics::{generate, Model};
use hinoki::Particles;

/// 10⁴ particles at one point (total mass 1), and 5000 pairs of coincident particles spread
/// over a cube: with ε > 0 every particle feels the softened potential of the others at its own
/// position (−99.99 at the point for ε = 0.01).
pub fn coincident() -> [Particles; 2] {
    let mut one_point = Particles::default();
    for i in 0..10_000 {
        one_point.push(DVec3::new(0.3, -0.2, 0.1), DVec3::ZERO, 1e-4, i);
    }
    let mut pairs = Particles::default();
    let spread = generate(Model::UniformCube, 5000, 4).unwrap();
    for (k, &x) in spread.pos.iter().enumerate() {
        for j in 0..2 {
            pairs.push(x, DVec3::ZERO, 1e-4, 2 * k as u64 + j);
        }
    }
    [one_point, pairs]
}

/// A Plummer sphere of 2000 particles (ids 0..2000) and one more particle (id 2000, of the
/// same mass) at distance `d` on the x axis.
pub fn far_particle(d: f64) -> Particles {
    let mut p = generate(Model::Plummer, 2000, 1).unwrap();
    let m = p.mass[0];
    p.push(DVec3::new(d, 0.0, 0.0), DVec3::ZERO, m, 2000);
    p
}

/// Two Plummer spheres of `n` particles each scaled to a size of 10⁻¹² (their half-mass
/// radii), 10⁻⁸ apart.
pub fn tight_clusters(n: usize) -> Particles {
    let mut p = Particles::default();
    for (c, centre) in [DVec3::ZERO, DVec3::new(1e-8, 0.0, 0.0)]
        .into_iter()
        .enumerate()
    {
        let q = generate(Model::Plummer, n, 5 + c as u64).unwrap();
        for i in 0..n {
            let id = (c * n + i) as u64;
            p.push(centre + q.pos[i] * 1e-12, DVec3::ZERO, q.mass[i], id);
        }
    }
    p
}

/// Coincident particles (one leaf at the deepest level), a hierarchy of clusters each 2^-1.5
/// the size of the last (a tree as deep as the keys allow), and a pair far from the rest.
pub fn nested_clusters() -> Particles {
    let mut p = Particles::default();
    let mut id = 0;
    let mut add = |p: &mut Particles, x: DVec3| {
        p.push(x, DVec3::ZERO, 1.0, id);
        id += 1;
    };
    for _ in 0..3000 {
        add(&mut p, DVec3::new(0.25, 0.25, 0.25));
    }
    for level in 0..20 {
        let s = 0.5f64.powi(3 * level / 2);
        for k in 0..64 {
            let t = k as f64 * 0.7;
            add(&mut p, DVec3::new(t.sin(), t.cos(), (1.3 * t).sin()) * s);
        }
    }
    add(&mut p, DVec3::new(1e3, 0.0, 0.0));
    add(&mut p, DVec3::new(1e3, 1e-3, 0.0));
    p
}

/// The float64 direct-summation potentials of every particle of `p` with softening 0.01, G = 1.
pub fn exact_potentials(p: &Particles) -> Vec<f64> {
    let all: Vec<usize> = (0..p.len()).collect();
    hinoki::walk::direct::direct_forces(&p.pos, &p.mass, 0.01, &all).1
}

/// The largest relative difference |got − exact| / |exact| over the particles.
pub fn worst_relative(got: &[f64], exact: &[f64]) -> f64 {
    got.iter()
        .zip(exact)
        .map(|(a, b)| (a - b).abs() / b.abs())
        .fold(0.0, f64::max)
}
