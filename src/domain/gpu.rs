//! The domain decomposition of particles that live on the device (`cuda/domain.cu`): their keys
//! computed there, a strided sample of keys and costs brought down for the splitters, each
//! particle's owner found there, the staying particles compacted there into fresh arrays, and
//! only the leaving ones packed, brought down and sent; the arrivals go up and are appended.
//! The same keys, samples and owners as the host backend's (`crate::backend::cpu`), and the
//! same particles in the same order on every rank afterwards.

use super::migrate::Migration;
use super::Domains;
use crate::comm::Comm;
use crate::error::Result;
use crate::gpu::args::{
    DomainKeepArgs, DomainKeysArgs, DomainLeavingArgs, DomainOwnersArgs, DomainSamplesArgs,
    PackArgs, UnpackArgs,
};
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::particles_gpu::{DeviceParticles, Held, ParticleArrays};
use crate::sfc::{GridBox, GRID};

/// Doubles per particle record of a migration: position, velocity, mass, id; with the
/// integrator's state also its bin, acceleration, potential and cost (STATE_RECORD_WORDS in
/// cuda/particles.cu).
fn record_words(held: Held) -> usize {
    if held.state {
        14
    } else {
        8
    }
}

/// What a particle's weight in the decomposition is.
#[derive(Clone, Copy, Debug)]
pub enum Weights {
    /// 1.
    Count,
    /// Its interactions in the last evaluation, from the (p2p, m2p) counts at this device
    /// address (p2p with the particle itself).
    Counts(u64),
    /// Its cost, the double at this device address.
    Costs(u64),
}

/// The device arrays of the decomposition, kept across decompositions.
pub struct DomainArrays<R: KernelRunner> {
    keys: R::Array<u64>,
    sample_keys: R::Array<u64>,
    sample_weights: R::Array<f64>,
    splitters: R::Array<u64>,
    /// The splitters `splitters` holds (uploaded only when they change).
    uploaded: Vec<u64>,
    dest: R::Array<u32>,
    /// Per particle and one more: 1 when it leaves, then the exclusive scan.
    leave: R::Array<u32>,
    /// The leaving particles' indices, then their destinations (one copy down).
    leaving: R::Array<u32>,
    /// The leaving particles in send order, their packed records, and the arrivals'.
    order: R::Array<u32>,
    records: R::Array<f64>,
    /// The arrays the staying particles are compacted into, swapped with the particles'.
    kept: ParticleArrays<R>,
    /// The splitters that `dest` and the scanned `leave` hold the owners under, the particles
    /// they are of and how many of them leave: set by [`DomainArrays::strays`] for the
    /// migration that follows it, forgotten when the keys or the particles change.
    owners_of: Option<(Vec<u64>, usize, usize)>,
}

impl<R: KernelRunner> DomainArrays<R> {
    /// Empty arrays on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            keys: r.alloc(1)?,
            sample_keys: r.alloc(1)?,
            sample_weights: r.alloc(1)?,
            splitters: r.alloc(1)?,
            uploaded: Vec::new(),
            dest: r.alloc(1)?,
            leave: r.alloc(1)?,
            leaving: r.alloc(1)?,
            order: r.alloc(1)?,
            records: r.alloc(1)?,
            kept: ParticleArrays::new(r)?,
            owners_of: None,
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        8 * (self.keys.len()
            + self.sample_keys.len()
            + self.sample_weights.len()
            + self.splitters.len()
            + self.records.len())
            + 4 * (self.dest.len() + self.leave.len() + self.leaving.len() + self.order.len())
            + self.kept.bytes()
    }

    /// The Peano–Hilbert keys of `p` in `grid`, kept for the owners, and `m` of them, evenly
    /// strided, each with its weight (per particle, in `p`'s order). See
    /// [`super::sample_keys`].
    pub fn sample(
        &mut self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
        grid: &GridBox,
        weights: Weights,
        m: usize,
    ) -> Result<(Vec<u64>, Vec<f64>)> {
        let r = s.runner();
        let n = p.n;
        grow(r, &mut self.sample_keys, m)?;
        grow(r, &mut self.sample_weights, m)?;
        self.keys(s, p, grid)?;
        // SAFETY: the samples hold m entries; the counts (when given) n pairs.
        unsafe {
            if m > 0 {
                let (use_cost, counts, values) = match weights {
                    Weights::Count => (0, 0, 0),
                    Weights::Counts(c) => (1, c, 0),
                    Weights::Costs(c) => (2, 0, c),
                };
                s.launch(
                    "domain_samples",
                    blocks(m),
                    &DomainSamplesArgs {
                        keys: self.keys.ptr(),
                        counts,
                        values,
                        use_cost,
                        n: int(n)?,
                        m: int(m)?,
                        sample_keys: self.sample_keys.ptr(),
                        weights: self.sample_weights.ptr(),
                    },
                )?;
            }
        }
        Ok((
            s.fetch(&self.sample_keys, m)?,
            s.fetch(&self.sample_weights, m)?,
        ))
    }

    /// How many of the particles `p` of rank `me` lie outside its domain of `domains` (see
    /// [`crate::domain::Domains::strays`]): their keys and owners found here, only the count
    /// brought down; the owners are kept for a [`DomainArrays::migrate`] of the same particles
    /// under the same splitters (until [`DomainArrays::forget_owners`]).
    pub fn strays(
        &mut self,
        s: &Stages<R>,
        p: &DeviceParticles<R>,
        domains: &Domains,
        me: usize,
    ) -> Result<u64> {
        self.keys(s, p, &domains.grid)?;
        self.owners(s, p.n, &domains.splitters, me)?;
        let leaving = s.scan_total(self.leave.ptr(), p.n)?;
        self.owners_of = Some((domains.splitters.clone(), p.n, leaving));
        Ok(leaving as u64)
    }

    /// Forgets the owners [`DomainArrays::strays`] kept: the particles have changed.
    pub fn forget_owners(&mut self) {
        self.owners_of = None;
    }

    /// The Peano–Hilbert keys of `p` in `grid`, into `keys`.
    fn keys(&mut self, s: &Stages<R>, p: &DeviceParticles<R>, grid: &GridBox) -> Result<()> {
        let n = p.n;
        self.owners_of = None;
        grow(s.runner(), &mut self.keys, n)?;
        let o = grid.origin;
        // SAFETY: keys holds n keys; pos n positions.
        unsafe {
            s.launch(
                "domain_keys",
                blocks(n),
                &DomainKeysArgs {
                    pos: p.arrays.pos.ptr(),
                    n: int(n)?,
                    ox: o.x,
                    oy: o.y,
                    oz: o.z,
                    scale: GRID as f64 / grid.side,
                    keys: self.keys.ptr(),
                },
            )
        }
    }

    /// The owner of each of the `n` keys in `keys` under `splitters` into `dest`, and in
    /// `leave` a 1 for each owned by another rank than `me` (and a 0 after the last).
    fn owners(&mut self, s: &Stages<R>, n: usize, splitters: &[u64], me: usize) -> Result<()> {
        let r = s.runner();
        if self.uploaded != splitters {
            grow(r, &mut self.splitters, splitters.len())?;
            r.upload(splitters, &mut self.splitters)?;
            self.uploaded = splitters.to_vec();
        }
        grow(r, &mut self.dest, n)?;
        grow(r, &mut self.leave, n + 1)?;
        // SAFETY: keys holds n keys, dest n entries, leave n + 1.
        unsafe {
            s.launch(
                "domain_owners",
                blocks(n + 1),
                &DomainOwnersArgs {
                    keys: self.keys.ptr(),
                    n: int(n)?,
                    splitters: self.splitters.ptr(),
                    nsplit: int(splitters.len())?,
                    me: int(me)?,
                    dest: self.dest.ptr(),
                    leave: self.leave.ptr(),
                },
            )
        }
    }

    /// Moves the particles `p` (with their velocities and ids, and their integrator state
    /// where they have one) to the owners of their keys
    /// (those of the last [`DomainArrays::sample`] or [`DomainArrays::strays`]) under
    /// `splitters`: the staying ones
    /// compacted in order, then the arrivals appended by source rank, as
    /// [`Migration::move_particles`] leaves them. Collective. Returns the particles that left.
    pub fn migrate(
        &mut self,
        s: &Stages<R>,
        comm: &dyn Comm,
        p: &mut DeviceParticles<R>,
        splitters: &[u64],
    ) -> Result<usize> {
        let r = s.runner();
        let n = p.n;
        let leaving = match self.owners_of.take() {
            Some((of, m, leaving)) if of == splitters && m == n => leaving,
            _ => {
                self.owners(s, n, splitters, comm.rank())?;
                s.scan_total(self.leave.ptr(), n)?
            }
        };
        let kept = n - leaving;
        grow(r, &mut self.leaving, 2 * leaving)?;
        // SAFETY: the leaving lists hold `leaving` entries, the scan's total.
        unsafe {
            s.launch(
                "domain_leaving",
                blocks(n),
                &DomainLeavingArgs {
                    n: int(n)?,
                    dest: self.dest.ptr(),
                    before: self.leave.ptr(),
                    leaving: self.leaving.ptr(),
                    leaving_dest: self.leaving.ptr() + 4 * leaving as u64,
                },
            )?;
        }
        // The send order (grouped by destination, each group in order) is made on the host
        // from the few leaving particles, as the host's migration makes it.
        let mut index = s.fetch(&self.leaving, 2 * leaving)?;
        let dest = index.split_off(leaving);
        let plan = Migration::from_leaving(index, &dest, comm.size(), n);
        let words = record_words(p.held);
        grow(r, &mut self.order, leaving)?;
        r.upload(&plan.order, &mut self.order)?;
        grow(r, &mut self.records, words * leaving)?;
        let a = &p.arrays;
        // SAFETY: order lists `leaving` particles of the arrays; records holds as many.
        unsafe {
            s.launch(
                "pack_particles",
                blocks(leaving),
                &PackArgs {
                    order: self.order.ptr(),
                    count: int(leaving)?,
                    words: int(words)?,
                    from: a.set(),
                    records: self.records.ptr(),
                },
            )?;
        }
        let send = s.fetch(&self.records, words * leaving)?;
        let counts: Vec<usize> = plan.counts.iter().map(|c| words * c).collect();
        let got = comm.alltoallv_f64(&send, &counts)?.data;
        let arrived = got.len() / words;
        let total = kept + arrived;
        self.kept.reserve(r, total, p.held)?;
        let k = &self.kept;
        // SAFETY: the kept arrays hold `total` particles, of which the staying ones take the
        // first `kept`.
        unsafe {
            s.launch(
                "domain_keep",
                blocks(n),
                &DomainKeepArgs {
                    n: int(n)?,
                    with_state: p.held.state as i32,
                    before: self.leave.ptr(),
                    from: a.set(),
                    to: k.set(),
                },
            )?;
        }
        if arrived > 0 {
            grow(r, &mut self.records, got.len())?;
            r.upload(&got, &mut self.records)?;
            let k = &self.kept;
            // SAFETY: the kept arrays hold `total` particles; records `arrived` records.
            unsafe {
                s.launch(
                    "unpack_particles",
                    blocks(arrived),
                    &UnpackArgs {
                        records: self.records.ptr(),
                        count: int(arrived)?,
                        words: int(words)?,
                        at: int(kept)?,
                        to: k.set(),
                    },
                )?;
            }
        }
        std::mem::swap(&mut p.arrays, &mut self.kept);
        p.n = total;
        Ok(leaving)
    }
}

#[cfg(all(test, hinoki_emulator))]
mod tests {
    use super::*;
    use crate::domain::{sample_keys, splitters};
    use crate::ics::{generate, Model};
    use crate::sfc::{keys, Order};
    use crate::tree::build_gpu::tests::{on_device, stages};

    /// The device counts the particles outside a rank's domain as the host does, for every
    /// rank of a decomposition made before the particles moved.
    #[test]
    fn emulated_strays_equal_the_hosts() {
        let s = stages();
        let mut p = generate(Model::Plummer, 6000, 5).unwrap();
        let grid = GridBox::of_points(&p.pos);
        let mut samples = sample_keys(&keys(Order::Hilbert, &grid, &p.pos), None, 3000);
        let domains = Domains {
            grid,
            splitters: splitters(&mut samples, 4),
        };
        for (i, x) in p.pos.iter_mut().enumerate() {
            *x += x.normalize() * 0.05 * (i % 3) as f64;
        }
        let mut arrays = DomainArrays::new(&s).unwrap();
        let device = on_device(&s, &p.pos, &p.mass);
        let moved = keys(Order::Hilbert, &domains.grid, &p.pos);
        let mut total = 0;
        for me in 0..4 {
            let host = domains.strays(&moved, me);
            assert_eq!(arrays.strays(&s, &device, &domains, me).unwrap(), host);
            total += host;
        }
        // Each particle lies in one domain: the other three count it.
        assert_eq!(total, 3 * p.len() as u64);
    }
}
