//! Splitting the Peano–Hilbert curve into one key range per rank, from weighted key samples.
//!
//! Each rank summarises its particles by a few keys that each stand for an equal share of its
//! weight (its particle count, or its measured cost); every rank then sees all samples and cuts
//! the curve where the cumulative sampled weight crosses k·W/P. Rank r owns the keys in
//! `[splitters[r-1], splitters[r])`, so particles with equal keys (coincident particles) always
//! share one owner.

use rayon::prelude::*;

/// One sampled key and the weight it stands for.
pub type Sample = (u64, f64);

/// Particles looked at per sample: above `OVERSAMPLING · count` particles, the samples are
/// taken from an evenly strided subset of that many (the particles' order is unrelated to
/// their keys, so the subset is a fair draw), which keeps the cost O(count) instead of a sort
/// of every key.
const OVERSAMPLING: usize = 32;

/// The particles a sample of `count` looks at among `n`: `m = min(n, OVERSAMPLING · count)`,
/// evenly strided; the `j`-th is particle [`sample_index`]`(j, n, m)`.
pub fn looked_at(n: usize, count: usize) -> usize {
    n.min(OVERSAMPLING * count)
}

/// The `j`-th of the `m` particles a sample looks at among `n`: particle `j n / m`.
pub fn sample_index(j: usize, n: usize, m: usize) -> usize {
    (j as u128 * n as u128 / m as u128) as usize
}

/// At most `count` samples of the (key, weight) pairs, each standing for an equal share of the
/// total weight: the key at which the cumulative weight (in key order) crosses the middle of
/// each share. Zero weights count as a tiny weight so that a set of idle particles still
/// spreads out. Returns no samples for no particles.
pub fn sample_keys(keys: &[u64], weights: Option<&[f64]>, count: usize) -> Vec<Sample> {
    if keys.is_empty() || count == 0 {
        return Vec::new();
    }
    let n = keys.len();
    let m = looked_at(n, count);
    let pairs: Vec<(u64, f64)> = (0..m)
        .into_par_iter()
        .map(|j| {
            let i = sample_index(j, n, m);
            (keys[i], weights.map_or(1.0, |w| w[i]))
        })
        .collect();
    shares(pairs, n, count)
}

/// The samples of [`sample_keys`] from the (key, weight) pairs of the particles it looks at
/// among `n` ([`looked_at`], [`sample_index`]), wherever those were gathered.
pub fn shares(mut pairs: Vec<(u64, f64)>, n: usize, count: usize) -> Vec<Sample> {
    if pairs.is_empty() || count == 0 {
        return Vec::new();
    }
    // Each looked-at particle stands for n/m particles.
    let stretch = n as f64 / pairs.len() as f64;
    pairs
        .par_iter_mut()
        .for_each(|p| p.1 = stretch * p.1.max(1e-9));
    pairs.par_sort_unstable_by_key(|p| p.0);
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    let count = count.min(pairs.len());
    let share = total / count as f64;
    let mut out = Vec::with_capacity(count);
    let mut cum = 0.0;
    let mut next = 0.5 * share;
    for &(k, wi) in &pairs {
        cum += wi;
        while out.len() < count && cum >= next {
            out.push((k, share));
            next += share;
        }
    }
    // Rounding may leave the last share unplaced.
    while out.len() < count {
        out.push((pairs[pairs.len() - 1].0, share));
    }
    out
}

/// The `parts − 1` splitters that cut the samples of all ranks into `parts` ranges of about
/// equal weight; `u64::MAX` for a range that gets nothing.
pub fn splitters(samples: &mut [Sample], parts: usize) -> Vec<u64> {
    samples.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let total: f64 = samples.iter().map(|s| s.1).sum();
    let mut out = Vec::with_capacity(parts.saturating_sub(1));
    let mut cum = 0.0;
    let mut i = 0;
    for k in 1..parts {
        let target = total * k as f64 / parts as f64;
        while i < samples.len() && cum + 0.5 * samples[i].1 < target {
            cum += samples[i].1;
            i += 1;
        }
        out.push(samples.get(i).map_or(u64::MAX, |s| s.0));
    }
    out
}

/// The rank that owns `key` under `splitters`.
#[inline]
pub fn owner(splitters: &[u64], key: u64) -> usize {
    splitters.partition_point(|&s| s <= key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_counts_split_evenly() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| i * 7919 % 100_003).collect();
        let mut s = sample_keys(&keys, None, 1000);
        assert_eq!(s.len(), 1000);
        let sp = splitters(&mut s, 4);
        assert_eq!(sp.len(), 3);
        let mut per = [0usize; 4];
        for &k in &keys {
            per[owner(&sp, k)] += 1;
        }
        for c in per {
            assert!((c as i64 - 2500).abs() < 40, "{per:?}");
        }
    }

    #[test]
    fn weights_move_the_cut() {
        // The first half of the keys costs 3x as much: the cut at half the weight moves left.
        let keys: Vec<u64> = (0..8000u64).collect();
        let w: Vec<f64> = (0..8000)
            .map(|i| if i < 4000 { 3.0 } else { 1.0 })
            .collect();
        let mut s = sample_keys(&keys, Some(&w), 800);
        let sp = splitters(&mut s, 2);
        // Half of the total weight 16000 is reached at key 8000/3 ≈ 2667.
        assert!((sp[0] as i64 - 2667).abs() < 20, "{sp:?}");
    }

    #[test]
    fn equal_keys_share_one_owner_and_empty_ranks_get_max() {
        let keys = vec![42u64; 1000];
        let mut s = sample_keys(&keys, None, 100);
        let sp = splitters(&mut s, 4);
        let owners: std::collections::BTreeSet<usize> =
            keys.iter().map(|&k| owner(&sp, k)).collect();
        assert_eq!(owners.len(), 1);
        assert!(sample_keys(&[], None, 10).is_empty());
        assert_eq!(splitters(&mut [], 3), vec![u64::MAX, u64::MAX]);
        assert_eq!(owner(&[u64::MAX, u64::MAX], 5), 0);
    }
}
