//! Building a model from several particle sets (galaxies, disk + bulge + halo, target +
//! intruder): how many particles each component gets, which random seed it draws from, moving a
//! component to its place, and joining the components into one set.
//!
//! Composite models use equal-mass particles: component `c` of mass `M_c` gets about
//! `N·M_c/M` of the `N` particles (largest remainder), every particle weighing `M/N`.

use crate::hash::splitmix64;
use crate::Particles;
use glam::DVec3;

/// Splits `n` particles among components in proportion to `weights` (non-negative, not all
/// zero): each gets the integer part of its share, and the particles left over go to the
/// largest fractional parts (ties to the earlier component). The counts add up to `n`.
pub(super) fn split_count(n: usize, weights: &[f64]) -> Vec<usize> {
    let total: f64 = weights.iter().sum();
    let shares: Vec<f64> = weights.iter().map(|w| n as f64 * w / total).collect();
    let mut counts: Vec<usize> = shares.iter().map(|s| s.floor() as usize).collect();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        (shares[b] - shares[b].floor()).total_cmp(&(shares[a] - shares[a].floor()))
    });
    let left = n - counts.iter().sum::<usize>();
    for &c in order.iter().cycle().take(left) {
        counts[c] += 1;
    }
    counts
}

/// The random seed of component `component` of a model generated from `seed`: a SplitMix64
/// scramble of both, so that components draw from unrelated streams.
pub(super) fn component_seed(seed: u64, component: usize) -> u64 {
    splitmix64(seed ^ splitmix64(!(component as u64)))
}

/// Moves a particle set by `offset` (length units) and gives it the bulk velocity `velocity`
/// (added to every particle's velocity, velocity units).
pub(super) fn displace(p: &mut Particles, offset: DVec3, velocity: DVec3) {
    p.pos.iter_mut().for_each(|x| *x += offset);
    p.vel.iter_mut().for_each(|v| *v += velocity);
}

/// Joins particle sets in order into one, with ids renumbered `0..n` in the joined order.
pub(super) fn concatenate(parts: Vec<Particles>) -> Particles {
    let n = parts.iter().map(Particles::len).sum();
    let mut all = Particles::with_capacity(n);
    for p in parts {
        all.pos.extend(p.pos);
        all.vel.extend(p.vel);
        all.mass.extend(p.mass);
    }
    all.id = (0..n as u64).collect();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_weights_and_add_up() {
        assert_eq!(split_count(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        assert_eq!(split_count(7, &[3.0, 1.0]), vec![5, 2]);
        assert_eq!(split_count(1, &[0.2, 0.5, 0.3]), vec![0, 1, 0]);
        assert_eq!(split_count(0, &[1.0, 2.0]), vec![0, 0]);
        let c = split_count(100_001, &[81.1, 3.24, 3.66]);
        assert_eq!(c.iter().sum::<usize>(), 100_001);
        assert_eq!(c, vec![92_160, 3_682, 4_159]);
    }

    #[test]
    fn components_get_distinct_seeds() {
        let s: Vec<u64> = (0..4).map(|c| component_seed(1, c)).collect();
        assert!(s
            .iter()
            .enumerate()
            .all(|(i, a)| s[..i].iter().all(|b| a != b)));
        assert_ne!(component_seed(1, 0), component_seed(2, 0));
    }

    #[test]
    fn concatenation_renumbers_ids() {
        let mut a = Particles::default();
        a.push(DVec3::X, DVec3::ZERO, 1.0, 7);
        let mut b = Particles::default();
        b.push(DVec3::Y, DVec3::ZERO, 2.0, 7);
        b.push(DVec3::Z, DVec3::ZERO, 3.0, 9);
        displace(&mut b, DVec3::X, DVec3::Y);
        let p = concatenate(vec![a, b]);
        assert_eq!(p.id, vec![0, 1, 2]);
        assert_eq!(p.mass, vec![1.0, 2.0, 3.0]);
        assert_eq!(p.pos[2], DVec3::new(1.0, 0.0, 1.0));
        assert_eq!(p.vel, vec![DVec3::ZERO, DVec3::Y, DVec3::Y]);
    }
}
