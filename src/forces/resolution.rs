//! Whether float32 resolves the job's particles in its frame (see [`crate::sfc::Frame`]): a
//! coordinate there keeps 2⁻²⁴ of its magnitude, the particle's distance m from the frame's
//! centre, so two particles at separation s with softening ε are resolved to about 2⁻²⁴ m / λ
//! of their scale λ = max(s, ε); and the frame's exponent range holds the inverse powers of
//! separations down to 2⁻⁴⁰ of the cube's side L. The pair of the largest
//! max(m, 2⁻¹⁸ L) / λ along every rank's tree curve ([`crate::tree::close`]) decides: the job
//! fails before any step where that ratio exceeds [`MAX_RANGE`] = 2²² (a precision of λ / 4,
//! or L / λ beyond 2⁴⁰), and warns where m / λ exceeds [`WARN_RANGE`] = 2¹⁸.
//!
//! Measured (`scripts/float32_edges.py`, docs/performance.md: two Plummer spheres of 2000
//! particles, ε = 0.01, at a distance d, the frame centred in one of them; errors against
//! float64 direct summation): m / λ = 10⁵ gives p99 1.0e-3 (4.7e-4 at d = 100), 10⁶ p99
//! 0.9 %, 3·10⁶ p99 2.3 %, 10⁷ (refused) 10 %, 3·10⁷ 44 %.

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::tree::close::{Closeness, NEAR};
use crate::tree::ClosePair;
use glam::DVec3;

/// The ratio m / λ beyond which the job warns: float32 keeps coordinates to 1/64 of λ there.
pub const WARN_RANGE: f64 = (1u64 << 18) as f64;

/// The ratio max(m, 2⁻¹⁸ L) / λ beyond which the job fails: float32 keeps coordinates only to
/// 1/4 of λ, or the frame's exponent range ends, and the forces between the closest
/// particles would be tens of percent off, or overflow.
pub const MAX_RANGE: f64 = (1u64 << 22) as f64;

/// The most particles at distinct positions in one of the tree's deepest cells beyond which
/// the job warns: they are summed pairwise, and a walk of K of them costs K² interactions.
pub const CROWDED_LIMIT: u32 = 1024;

/// The warning for `crowded` particles at distinct positions sharing one of the deepest cells
/// ([`crate::tree::close::crowded`]) of a tree whose cube has side `side` (length units);
/// `None` within [`CROWDED_LIMIT`].
pub fn crowding(crowded: u32, side: f64) -> Option<String> {
    (crowded > CROWDED_LIMIT).then(|| {
        format!(
            "{crowded} particles at distinct positions share one of the tree's deepest cells \
             (side {}: 2^-21 of the cube around all particles, side {}): the tree cannot \
             separate them, so the walk sums their forces pairwise, {} interactions per \
             evaluation; far-away particles stretch the cube, keep them out of this job",
            number(side * 2f64.powi(-21)),
            number(side),
            number((crowded as f64).powi(2))
        )
    })
}

/// What a job's float32 frame makes of the pair it serves worst.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    /// The pair of the largest max(m, 2⁻¹⁸ L) / λ of all ranks.
    pub pair: ClosePair,
    /// The rank holding it.
    pub rank: usize,
    /// The side L of the job's cube (length units).
    pub side: f64,
    /// The softening length ε (length units).
    pub eps: f64,
    /// The particle that stretches the cube, where the cube's side is what fails
    /// ([`Resolution::stretched`], found by [`farthest`]).
    pub far: Option<FarParticle>,
}

/// The particle of a job farthest from its frame's centre (the bulk of its particles), which
/// sets the side of the job's cube.
#[derive(Clone, Debug, PartialEq)]
pub struct FarParticle {
    /// Its position (length units).
    pub at: DVec3,
    /// Its distance from the frame's centre (length units).
    pub d: f64,
    /// Its index on its rank.
    pub index: usize,
    /// Its id, where the ranks hold ids.
    pub id: Option<u64>,
    /// The rank holding it.
    pub rank: usize,
}

/// The particle of the job farthest from `centre` (length units), of this rank's positions
/// `pos` with their `ids` where the ranks hold them. Collective on several ranks (an allreduce,
/// then the holder's particle shared by sums); ties go to the lowest rank and index.
pub fn farthest(comm: &dyn Comm, pos: &[DVec3], ids: Option<&[u64]>, centre: DVec3) -> FarParticle {
    let mine = pos
        .iter()
        .enumerate()
        .map(|(i, x)| (x.distance(centre), i))
        .fold(None, |best: Option<(f64, usize)>, (d, i)| match best {
            Some((b, _)) if b >= d => best,
            _ => Some((d, i)),
        });
    let mut most = [mine.map_or(-1.0, |m| m.0)];
    if comm.size() > 1 {
        comm.allreduce_max_f64(&mut most);
    }
    let holds = mine.filter(|m| m.0 == most[0]);
    let rank = lowest_rank_with(comm, holds.is_some());
    let (mut x, mut w) = ([0.0; 3], [0u64; 2]);
    if let Some((_, i)) = holds.filter(|_| comm.rank() == rank) {
        x = pos[i].to_array();
        w = [i as u64, ids.map_or(0, |ids| ids[i])];
    }
    if comm.size() > 1 {
        comm.allreduce_sum_f64(&mut x);
        comm.allreduce_sum_u64(&mut w);
    }
    FarParticle {
        at: DVec3::from_array(x),
        d: most[0],
        index: w[0] as usize,
        id: ids.map(|_| w[1]),
        rank,
    }
}

/// A particle for a message: by `id` where the ranks hold ids, else by its `index` on `rank`.
fn particle_name(id: Option<u64>, index: usize, rank: usize) -> String {
    match id {
        Some(id) => format!("id {id}"),
        None => format!("{index} of rank {rank}"),
    }
}

/// A position for a message (length units), ten digits each.
fn position(x: DVec3) -> String {
    format!("({:.9e}, {:.9e}, {:.9e})", x.x, x.y, x.z)
}

/// The lowest rank of `comm` where `has` is true (the rank count where it is nowhere).
/// Collective on several ranks (one allreduce).
fn lowest_rank_with(comm: &dyn Comm, has: bool) -> usize {
    let mut rank = [if has {
        comm.rank() as f64
    } else {
        f64::INFINITY
    }];
    if comm.size() > 1 {
        comm.allreduce_min_f64(&mut rank);
    }
    rank[0].min(comm.size() as f64) as usize
}

/// `x` for a message: four digits, or "more than 1.8e308" where float64 overflowed.
fn number(x: f64) -> String {
    match x.is_finite() {
        true => format!("{x:.3e}"),
        false => "more than 1.8e308".to_string(),
    }
}

impl Resolution {
    /// Whether the cube's side, not the frame's precision at the pair, is what fails: a
    /// particle far from the others ([`FarParticle`]) has stretched the cube beyond float32's
    /// exponent range for the pair's separation.
    pub fn stretched(&self) -> bool {
        self.pair.worst(self.side, self.eps) > MAX_RANGE && self.pair.m < NEAR * self.side
    }

    /// The scale the pair needs resolved, λ = max(s, ε) (length units).
    pub fn scale(&self) -> f64 {
        self.pair.s.max(self.eps)
    }

    /// What float32 keeps of the pair's coordinates: 2⁻²⁴ m (length units).
    pub fn step(&self) -> f64 {
        self.pair.m * 2f64.powi(-24)
    }

    /// The pair, by id where the rank holds ids and by index on its rank otherwise, with
    /// positions, separation, softening and where it is in the frame.
    fn describe(&self) -> String {
        let p = &self.pair;
        let name = |j: usize| particle_name(p.id.map(|id| id[j]), p.index[j], self.rank);
        format!(
            "particles {} at {} and {} at {}, {} apart with softening {}, {} from the centre \
             of the job's float32 frame (the cube around all particles has side {})",
            name(0),
            position(p.at[0]),
            name(1),
            position(p.at[1]),
            number(p.s),
            number(self.eps),
            number(p.m),
            number(self.side)
        )
    }

    /// How float32 keeps the pair's coordinates there: to 2⁻²⁴ of their distance from the
    /// centre, a fraction of λ.
    fn precision(&self) -> String {
        format!(
            "their distance from the centre is {} times max(separation, softening), and float32 \
             keeps their coordinates to {} (2^-24 of that distance)",
            number(self.pair.range(self.eps)),
            number(self.step())
        )
    }

    /// The error for a job beyond [`MAX_RANGE`], or with two particles at one point and no
    /// softening; `None` within it.
    pub fn error(&self) -> Option<Error> {
        if self.scale() == 0.0 {
            return Some(Error::input(format!(
                "{}: their force is infinite without softening; soften (eps > 0) or remove \
                 the duplicates",
                self.describe()
                    .replacen("particles", "particles coincide:", 1)
            )));
        }
        if self.pair.worst(self.side, self.eps) <= MAX_RANGE {
            return None;
        }
        let why = match self.pair.m >= NEAR * self.side {
            true => format!(
                "{}, beyond the limit 2^22 = {} (their forces would be wrong)",
                self.precision(),
                number(MAX_RANGE)
            ),
            false => format!(
                "the cube's side is {} times max(separation, softening), beyond the limit \
                 2^40 = {} of float32's exponent range (their forces would overflow){}",
                number(self.side / self.scale()),
                number(MAX_RANGE / NEAR),
                self.far.as_ref().map_or(String::new(), |f| {
                    format!(
                        "; particle {} at {}, {} from the bulk of the particles, stretches \
                         the cube",
                        particle_name(f.id, f.index, f.rank),
                        position(f.at),
                        number(f.d)
                    )
                })
            ),
        };
        Some(Error::input(format!(
            "float32 cannot resolve {}: {why}; keep far-away particles out of this job, or soften \
             more",
            self.describe()
        )))
    }

    /// The warning for a job beyond [`WARN_RANGE`] (in m / λ); `None` within it.
    pub fn warning(&self) -> Option<String> {
        (self.pair.range(self.eps) > WARN_RANGE).then(|| {
            format!(
                "{}: {}, beyond 2^18 = {}, so forces between particles this close carry errors \
                 up to about {:.1e} of theirs",
                self.describe(),
                self.precision(),
                number(WARN_RANGE),
                self.step() / self.scale()
            )
        })
    }
}

/// The job's closeness from this rank's `close` ([`crate::backend::Backend::closeness`]), the
/// side of its cube `side` (`None` without a tree; the cube is the same on every rank that has
/// one) and the softening `eps`: its [`Resolution`] where its pair is beyond [`WARN_RANGE`] in
/// max(m, 2⁻¹⁸ L) / λ (`None` otherwise, or without a pair), and the most crowded of the
/// ranks' deepest cells ([`crowding`]). Collective on several ranks (one allreduce, and three
/// more when the range is exceeded).
pub fn of_job(
    comm: &dyn Comm,
    close: Closeness,
    side: Option<f64>,
    eps: f64,
) -> Result<(Option<Resolution>, u32)> {
    // The largest range, side and crowding over the ranks.
    let local = close.pair;
    let side = side.unwrap_or(0.0);
    let range = local.map_or(0.0, |p| p.worst(side, eps));
    let mut v = [range, side, close.crowded as f64];
    if comm.size() > 1 {
        comm.allreduce_max_f64(&mut v);
    }
    let (worst, side, crowded) = (v[0], v[1], v[2] as u32);
    if worst <= WARN_RANGE {
        return Ok((None, crowded));
    }
    // The lowest rank holding a pair that bad describes it to all.
    let mine = local.filter(|_| range == worst);
    let rank = lowest_rank_with(comm, mine.is_some());
    let pair = share(comm, mine.filter(|_| comm.rank() == rank));
    let resolution = Resolution {
        pair,
        rank,
        side,
        eps,
        far: None,
    };
    Ok((Some(resolution), crowded))
}

/// The pair `mine` of the one rank that passes it, on every rank (allreduces of sums to which
/// the others add zeros).
fn share(comm: &dyn Comm, mine: Option<ClosePair>) -> ClosePair {
    let mut x = [0.0; 8];
    let mut w = [0u64; 5];
    if let Some(p) = mine {
        x[0] = p.s;
        x[1] = p.m;
        x[2..5].copy_from_slice(&p.at[0].to_array());
        x[5..8].copy_from_slice(&p.at[1].to_array());
        let id = p.id.unwrap_or([0; 2]);
        w = [
            p.index[0] as u64,
            p.index[1] as u64,
            id[0],
            id[1],
            p.id.is_some() as u64,
        ];
    }
    comm.allreduce_sum_f64(&mut x);
    comm.allreduce_sum_u64(&mut w);
    ClosePair {
        s: x[0],
        m: x[1],
        at: [DVec3::new(x[2], x[3], x[4]), DVec3::new(x[5], x[6], x[7])],
        index: [w[0] as usize, w[1] as usize],
        id: (w[4] == 1).then_some([w[2], w[3]]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    /// The one-rank job's resolution of `pair` in a cube of side `side` softened by `eps`.
    fn job(pair: Option<ClosePair>, side: Option<f64>, eps: f64) -> Result<Option<Resolution>> {
        let close = Closeness { pair, crowded: 7 };
        let (resolution, crowded) = of_job(&SingleProcess, close, side, eps)?;
        assert_eq!(crowded, 7);
        Ok(resolution)
    }

    fn pair(s: f64) -> ClosePair {
        ClosePair {
            s,
            m: 0.5,
            at: [DVec3::splat(0.5), DVec3::new(0.5 + s, 0.5, 0.5)],
            index: [3, 7],
            id: Some([30, 70]),
        }
    }

    /// The farthest particle from the centre is found (the first of equals), by id where
    /// ids are given, and a stretched cube's error names it.
    #[test]
    fn the_farthest_particle_is_named_where_it_stretches_the_cube() {
        let pos = [
            DVec3::ZERO,
            DVec3::new(0.0, -3.0, 0.0),
            DVec3::new(3.0, 0.0, 0.0),
        ];
        let f = farthest(&SingleProcess, &pos, Some(&[5, 6, 7]), DVec3::ZERO);
        assert_eq!((f.index, f.id, f.rank, f.d), (1, Some(6), 0, 3.0));
        assert_eq!(f.at, pos[1]);
        let f = farthest(&SingleProcess, &pos, None, DVec3::new(-1.0, 0.0, 0.0));
        assert_eq!((f.index, f.id), (2, None));
        let near = ClosePair {
            m: 1e-9,
            ..pair(1e-13)
        };
        let mut r = job(Some(near), Some(1.0), 0.0).unwrap().unwrap();
        assert!(r.stretched());
        r.far = Some(f);
        let e = r.error().unwrap().message;
        assert!(e.contains("particle 2 of rank 0 at (3.000000000e0"), "{e}");
        assert!(
            e.contains("4.000e0 from the bulk") && !e.contains('\n'),
            "{e}"
        );
        // A pair the frame's precision fails is no stretched cube.
        let failed = job(Some(pair(1e-9)), Some(1.0), 1e-8).unwrap().unwrap();
        assert!(!failed.stretched());
    }

    #[test]
    fn the_range_decides_between_nothing_a_warning_and_an_error() {
        let of = |s: f64, eps: f64| job(Some(pair(s)), Some(1.0), eps);
        // Resolved: nothing to say.
        assert_eq!(of(1e-4, 0.0).unwrap(), None);
        // Softening makes a close pair resolved.
        assert_eq!(of(1e-12, 1e-3).unwrap(), None);
        let warned = of(1e-6, 0.0).unwrap().unwrap();
        assert!(warned.error().is_none());
        let w = warned.warning().unwrap();
        assert!(w.contains("id 30") && w.contains("id 70"), "{w}");
        assert!(w.contains("is 5.000e5 times"), "{w}");
        let failed = of(1e-9, 1e-8).unwrap().unwrap();
        let e = failed.error().unwrap().message;
        assert!(
            e.starts_with("float32 cannot resolve particles id 30"),
            "{e}"
        );
        assert!(
            e.contains("is 5.000e7 times") && e.contains("limit 2^22"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert_eq!(job(None, Some(1.0), 0.0).unwrap(), None);
        // Near the centre the exponent range ends first: 2^-40 of the side.
        let near = |s: f64| ClosePair { m: 1e-9, ..pair(s) };
        let r = job(Some(near(1e-11)), Some(1.0), 0.0).unwrap().unwrap();
        assert!(r.error().is_none() && r.warning().is_none());
        let r = job(Some(near(1e-13)), Some(1.0), 0.0).unwrap().unwrap();
        let e = r.error().unwrap().message;
        assert!(
            e.contains("exponent range") && e.contains("1.000e13 times"),
            "{e}"
        );
    }
}
