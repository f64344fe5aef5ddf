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
