//! The tree built on the device (`cuda/build.cu`) from the particles that live there: keys, a
//! stable radix sort, the topology level by level, the preorder and the upward pass; and the
//! refit of the last tree to moved particles, on the device too.
//!
//! The launch sequence is written once, over [`KernelRunner`], so that it runs on a GPU or on
//! the CPU kernel emulator; both give the tree [`Tree::build`] gives on the same float32
//! particles, bit for bit, and the refit [`Tree::refit`] gives (tested on the emulator in CI and
//! on the GPU in `tests/gpu.rs`).

use crate::diag::PhaseTimes;
use crate::error::Result;
use crate::gpu::args::{
    CellOrderArgs, CellParentsArgs, ClosestPairArgs, CrowdedLeavesArgs, FrameMap,
    GatherParticlesArgs, KernelArgs, PairRecordArgs, RadixDigitCountsArgs, RadixPassArgs,
    RefitCellsArgs, RefitParticlesArgs, SamplePositionsArgs, SplitLevelArgs, StoreCellsArgs,
    ToFrameArgs, TreeArrays, TreeKeysArgs, TreeRootArgs, UpwardArgs,
};
use crate::gpu::launch::{grow, with_headroom, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::sfc::{Frame, Order, GRID};
use crate::tree::close::Closeness;
use crate::tree::TreeTopology;
use crate::tree::{close, ClosePair, DeviceCells, Tree, TreeParams, MAX_LEVEL};
use crate::walk::mac::Mac;
use bfs::bfs_layout;
use glam::DVec3;

/// Keys per block of a radix pass (RADIX_TILE in cuda/build.cu).
const TILE: usize = 2048;
/// Float64 words of one cell's moments (MOMENT_WORDS).
const MOMENT_WORDS: usize = 11;
/// Levels of fewer cells than this sum their moments a warp a cell (`cell_moments_warp`), the
/// others a thread a cell (`cell_moments`): the upper levels' latency against the lower
/// levels' leaves (docs/performance.md, "The moments' upper levels a warp a cell").
const WARP_LEVEL_CELLS: usize = 4096;

/// The moments' kernel for a level of `cells` cells, with its threads per cell.
fn moments_kernel(cells: usize) -> (&'static str, usize) {
    match cells < WARP_LEVEL_CELLS {
        true => ("cell_moments_warp", 32),
        false => ("cell_moments", 1),
    }
}

/// `name` with a thread a cell on every level (for [`TreeBuilder::per_level`]).
fn a_thread_a_cell(name: &'static str) -> impl Fn(usize) -> (&'static str, usize) {
    move |_| (name, 1)
}

/// Tiles of `split_level` over the octants of `splits` splitting cells.
fn split_tiles(splits: usize) -> usize {
    (8 * splits).div_ceil(SPLIT_TILE).max(1)
}

/// Float64 words of the record of a tree's closeness (`pair_record` in cuda/build.cu).
const CLOSENESS_WORDS: usize = 11;

/// Words per part of the level record (LEVEL_SLOTS in cuda/build.cu): a word for each level and
/// the end.
const LEVEL_SLOTS: usize = MAX_LEVEL as usize + 3;
/// Words of the level record (LEVEL_RECORD_WORDS): where the levels start, their splitting
/// cells, the splitting cells in and above each, and what the arrays were short of.
const LEVEL_RECORD_WORDS: usize = 3 * LEVEL_SLOTS + 2;
/// Octants per tile of `split_level` (SPLIT_TILE).
const SPLIT_TILE: usize = 256;
/// Most blocks of a `split_level` launch, which take its tiles in turn.
const SPLIT_GRID: usize = 1024;
/// Levels split before the host first reads the level record back where no tree was built
/// before (after one, one more level than the last tree needed).
const FIRST_LEVELS: usize = 8;
/// Levels split between later reads of the level record (a tree deeper than the last).
const MORE_LEVELS: usize = 4;

/// What a build's arrays were too small for: the cells so far, or one level's splitting cells.
enum Short {
    Cells(usize),
    Splits(usize),
}

/// Where the particles a tree is built from lie on the device: `n` positions (3 doubles each,
/// length units) and masses (doubles, mass units).
#[derive(Clone, Copy, Debug)]
pub struct Positions {
    /// Device address of the positions.
    pub pos: u64,
    /// Device address of the masses.
    pub mass: u64,
    /// Particles.
    pub n: usize,
}

/// A tree held on the device by its [`TreeBuilder`] until the next build or refit.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTree {
    /// Its particles.
    pub particles: usize,
    /// Its cells.
    pub cells: usize,
    /// The frame it was built in (cube and centre), which its values are in.
    pub frame: Frame,
    /// Its arrays.
    pub arrays: TreeArrays,
    /// Device address of the tree's order: for each sorted particle, its index in the
    /// particle arrays (u32).
    pub order: u64,
    /// Device address of room for 4 floats per particle that the tree no longer needs once
    /// built (the build's unsorted float32 particles): the walk's targets go there, and after
    /// the walk its results in the particles' order ([`TreeBuilder::spare_rooms`]).
    pub spare: u64,
}

/// The device arrays over particles (grown with N).
struct ParticleArrays<R: KernelRunner> {
    capacity: usize,
    /// The sort's scratch was released ([`TreeBuilder::release`]): the next build makes the
    /// arrays anew.
    released: bool,
    pos_mass: R::Array<f32>,
    sorted: R::Array<f32>,
    keys: [R::Array<u64>; 2],
    index: [R::Array<u32>; 2],
    /// Per tile of a radix pass and digit value, its published state (`radix_onesweep`).
    tile_states: R::Array<u64>,
}

/// The device arrays over cells (grown with the tree), breadth-first and in preorder.
struct BuildCells<R: KernelRunner> {
    capacity: usize,
    /// The build's lists were released ([`TreeBuilder::release`]): the next build makes the
    /// arrays anew.
    released: bool,
    bfs_first: R::Array<u32>,
    bfs_count: R::Array<u32>,
    bfs_level: R::Array<u8>,
    bfs_child: R::Array<u32>,
    bfs_nchild: R::Array<u8>,
    bfs_subtree: R::Array<u32>,
    preorder: R::Array<u32>,
    /// Per cell that splits: its slot in the builder's moments.
    bfs_inner: R::Array<u32>,
    /// Per cell, the bounds of its particles (6 floats): a refit's, allocated at the first.
    bounds: Option<R::Array<f32>>,
}

/// The tree's cells in preorder as the walk reads them, with their parents and the boxes of
/// the last rebuild (grown with the tree, made once a build has counted its cells).
struct StoredCells<R: KernelRunner> {
    capacity: usize,
    /// The rebuild's boxes were released ([`TreeBuilder::release`]): the next build makes the
    /// arrays anew.
    released: bool,
    /// The cells in preorder, as the walk reads them.
    cells: DeviceCells<R>,
    /// The boxes of the last rebuild, which a refit starts from.
    built: R::Array<f32>,
    parent: R::Array<u32>,
}

/// The device arrays over the cells of one level that split (grown with the widest such
/// level): the build visits only those.
struct SplitLists<R: KernelRunner> {
    /// Splitting cells of one level the arrays hold.
    capacity: usize,
    /// The splitting cells of the level being split and of the next one.
    split: [R::Array<u32>; 2],
    /// Per tile of a level's octants (8 per splitting cell), the published states of its new
    /// cells and of its new splitting cells (two arrays one after the other, zero between
    /// launches), and `split_level`'s two counters (zero between launches).
    tile_states: R::Array<u64>,
    counters: R::Array<u32>,
}

/// Builds and refits trees with the kernels of `cuda/build.cu` on one device, keeping its
/// arrays across builds.
pub struct TreeBuilder<R: KernelRunner> {
    particles: Option<ParticleArrays<R>>,
    cells: Option<BuildCells<R>>,
    stored: Option<StoredCells<R>>,
    splits: Option<SplitLists<R>>,
    /// Digit counts of the eight radix passes.
    digit_counts: R::Array<u32>,
    /// The next tile a radix pass hands out (zero between passes), and the last pass's number
    /// (its tile states carry it).
    sort_counter: R::Array<u32>,
    sort_epoch: u32,
    /// The level record of the build (`split_level`), and the levels the last build split
    /// (`None` before the first).
    level_record: R::Array<u32>,
    split_levels: Option<usize>,
    /// The closest pair along the curve's key, the most particles at distinct positions in
    /// one deepest leaf, then the record of both.
    pair_key: R::Array<u64>,
    crowded: R::Array<u32>,
    pair_record: R::Array<f64>,
    /// A sample of the positions (3 doubles each).
    samples: R::Array<f64>,
    /// The float64 moments (MOMENT_WORDS) of the last tree's cells that split, in the order of
    /// their slots (`bfs_inner`): a refit's upward pass starts from them.
    moments: R::Array<f64>,
    /// The last tree, and where each of its levels starts in the breadth-first arrays (then
    /// their number of cells): what a refit needs.
    last: Option<(DeviceTree, Vec<usize>)>,
    /// The last tree's breadth-first arrays, boxes and float64 moments were released
    /// ([`TreeBuilder::release`]): it can be walked but not refitted or saved.
    walk_only: bool,
}

impl<R: KernelRunner> TreeBuilder<R> {
    /// A builder launching on the stage program `s`.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            digit_counts: r.alloc(8 * 256)?,
            sort_counter: r.alloc(1)?,
            sort_epoch: 0,
            level_record: r.alloc(LEVEL_RECORD_WORDS)?,
            split_levels: None,
            pair_key: r.alloc(1)?,
            pair_record: r.alloc(CLOSENESS_WORDS)?,
            crowded: r.alloc(1)?,
            samples: r.alloc(3)?,
            moments: r.alloc(1)?,
            particles: None,
            cells: None,
            stored: None,
            splits: None,
            last: None,
            walk_only: false,
        })
    }

    /// Releases the device arrays the last tree's walks do not need (its walk's cells, sorted
    /// particles and order, and the spare rooms, stay): the sort's scratch
    /// ([`TreeBuilder::release_sort`]), the breadth-first levels and subtree sizes, and, unless
    /// `refits` (the tree may still be refitted or saved), the other breadth-first lists, the
    /// preorder map, the rebuild's boxes and the float64 moments. The next build makes them
    /// anew. So that a stage's transient arrays take no room in the next stage (the walk's),
    /// when memory is short.
    pub fn release(&mut self, s: &Stages<R>, refits: bool) -> Result<()> {
        let r = s.runner();
        self.release_sort(s)?;
        if let Some(c) = self.cells.as_mut() {
            c.released = true;
            c.bfs_level = r.alloc(1)?;
            c.bfs_subtree = r.alloc(1)?;
            if !refits {
                c.bfs_first = r.alloc(1)?;
                c.bfs_count = r.alloc(1)?;
                c.bfs_child = r.alloc(1)?;
                c.bfs_nchild = r.alloc(1)?;
                c.bfs_inner = r.alloc(1)?;
                c.preorder = r.alloc(1)?;
                c.bounds = None;
                self.moments = r.alloc(1)?;
                self.walk_only = true;
            }
        }
        if let (false, Some(t)) = (refits, self.stored.as_mut()) {
            t.released = true;
            t.built = r.alloc(1)?;
        }
        Ok(())
    }

    /// Releases what the build no longer needs once its cells are counted: the radix sort's
    /// first key buffer (the sorted keys) and second index buffer, its tile counts, and the
    /// octant lists of the splitting cells. The next build makes them anew.
    fn release_sort(&mut self, s: &Stages<R>) -> Result<()> {
        let r = s.runner();
        self.splits = None;
        // A lean build released them already: nothing to make again.
        if let Some(a) = self.particles.as_mut().filter(|a| !a.released) {
            a.released = true;
            a.keys[0] = r.alloc(1)?;
            a.index[1] = r.alloc(1)?;
            a.tile_states = r.alloc(1)?;
        }
        Ok(())
    }

    /// The last tree built or refitted, while it is valid (it is until the next build).
    pub fn tree(&self) -> Option<DeviceTree> {
        self.last.as_ref().map(|l| l.0)
    }

    /// The rooms the last tree no longer needs until the next build, 4 floats and one u64 per
    /// particle (the build's unsorted float32 particles, [`DeviceTree::spare`], and the radix
    /// sort's second key buffer), for a walk: its targets, then its results in the particles'
    /// order, in the first; its counts in walk order in the second. `None` before a build.
    #[allow(clippy::type_complexity)]
    pub fn spare_rooms(&self) -> Option<(&R::Array<f32>, &R::Array<u64>)> {
        self.particles.as_ref().map(|a| (&a.pos_mass, &a.keys[1]))
    }

    /// Device address of the last tree's boxes at its rebuild (4 floats a cell), from which
    /// its cells' key cells follow (`cell_key` of `cuda/lets.cu`): the rebuild's boxes, or,
    /// where those were released (the tree is not refitted), the cells' own.
    pub fn built_boxes(&self) -> Option<u64> {
        let t = self.stored.as_ref()?;
        Some(match t.released {
            false => t.built.ptr(),
            true => t.cells.boxes.ptr(),
        })
    }

    /// Forgets the last tree (its particles are gone): the next refit is an error.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// The device bytes the builder holds per particle: the float32 frame, the keys and
    /// indices with their sort's second buffers and tile states, the gathered particles.
    pub fn particle_bytes(&self) -> usize {
        self.particles.as_ref().map_or(0, |a| {
            4 * (a.pos_mass.len() + a.sorted.len())
                + 8 * (a.keys[0].len() + a.keys[1].len() + a.tile_states.len())
                + 4 * (a.index[0].len() + a.index[1].len())
        })
    }

    /// The device bytes the builder holds over cells: the cells, their boxes, the float64
    /// moments of the cells that split, the breadth-first lists of the build and its lists of
    /// one level's splitting cells with their tiles' states, and a refit's bounds.
    pub fn cell_bytes(&self) -> usize {
        let splits = self.splits.as_ref().map_or(0, |l| {
            4 * (l.split[0].len() + l.split[1].len() + l.counters.len()) + 8 * l.tile_states.len()
        });
        let stored = self.stored.as_ref().map_or(0, |t| {
            t.cells.bytes() + 4 * (t.parent.len() + t.built.len())
        });
        splits
            + stored
            + self.cells.as_ref().map_or(0, |c| {
                4 * (c.bfs_first.len()
                    + c.bfs_count.len()
                    + c.bfs_child.len()
                    + c.bfs_subtree.len()
                    + c.preorder.len()
                    + c.bounds.as_ref().map_or(0, |b| b.len()))
                    + 4 * c.bfs_inner.len()
                    + 8 * self.moments.len()
                    + c.bfs_level.len()
                    + c.bfs_nchild.len()
            })
    }

    /// The tree over the `src.n` particles on the device (positions taken to the float32 frame
    /// `frame`, whose cube holds them, first), built there and kept there: the tree
    /// [`Tree::build_in`] builds. Times `sort` (the rounding, keys, sort and gather), `build`
    /// (topology, preorder) and `moments`. `src.n` must be at least 1 and the positions finite.
    /// `lean`: the sort's scratch is released once the cells are counted
    /// ([`TreeBuilder::release_sort`]), before the cells the walk reads are made, so that the
    /// build's peak is the larger of its two halves, not their sum.
    pub fn build(
        &mut self,
        s: &Stages<R>,
        src: Positions,
        frame: &Frame,
        p: &TreeParams,
        lean: bool,
        times: &mut PhaseTimes,
    ) -> Result<DeviceTree> {
        self.last = None;
        self.walk_only = false;
        let n = src.n;
        let frame = *frame;
        times.time("sort", || self.sort(s, src, &frame, p.order))?;
        let (levels, inner) = times.time("build", || self.cell_levels(s, n, p.ncrit))?;
        if lean {
            self.release_sort(s)?;
        }
        times.time("moments", || {
            self.reserve_stored(s, levels[levels.len() - 1])?;
            grow(s.runner(), &mut self.moments, MOMENT_WORDS * inner.max(1))?;
            self.moments(s, &levels, &frame, p)
        })?;
        let tree = self.device_tree(n, levels[levels.len() - 1], frame);
        self.last = Some((tree, levels));
        Ok(tree)
    }

    /// The last tree refitted to the particles at `src` (the same particles, in the same
    /// order, as at its build, moved): gathered in the tree's order again, moments and boxes
    /// recomputed (see [`Tree::refit`], which it equals bit for bit). Times `refit`.
    pub fn refit(
        &mut self,
        s: &Stages<R>,
        src: Positions,
        p: &TreeParams,
        times: &mut PhaseTimes,
    ) -> Result<DeviceTree> {
        let (tree, levels) = self
            .last
            .as_ref()
            .filter(|l| l.0.particles == src.n && !self.walk_only)
            .ok_or_else(|| crate::Error::device("a refit without the tree of these particles"))?;
        let (tree, levels) = (*tree, levels.clone());
        times.time("refit", || -> Result<()> {
            let bounds = self.refit_bounds(s)?;
            let a = self.particles.as_ref().expect("built");
            let c = self.cells.as_ref().expect("built");
            let t = self.stored.as_ref().expect("built");
            // SAFETY (every launch below): the arrays were sized for this tree by its build
            // (or restore), the particle arrays for `src.n` particles.
            unsafe {
                s.launch(
                    "refit_particles",
                    blocks(src.n),
                    &RefitParticlesArgs {
                        pos: src.pos,
                        mass: src.mass,
                        index: a.index[0].ptr(),
                        n: int(src.n)?,
                        frame: frame_map(&tree.frame),
                        sorted: a.sorted.ptr(),
                    },
                )?;
                let upward = self.upward(bounds);
                self.per_level(s, moments_kernel, &levels, true, &upward)?;
                self.per_level(s, a_thread_a_cell("cell_bounds"), &levels, true, &upward)?;
                s.launch(
                    "refit_cells",
                    blocks(tree.cells),
                    &RefitCellsArgs {
                        ncells: int(tree.cells)?,
                        preorder: c.preorder.ptr(),
                        inner: c.bfs_inner.ptr(),
                        mom: self.moments.ptr(),
                        bounds,
                        built: t.built.ptr(),
                        mac: (p.mac != Mac::BarnesHut) as i32,
                        theta: p.theta,
                        tree: tree.arrays,
                    },
                )?;
            }
            s.synchronize()
        })?;
        Ok(tree)
    }

    /// What the last tree finds of the particles at `src` (those of the tree, in the same
    /// order) close together ([`close`], which it equals): the pair near each other along its
    /// curve that the frame of its cube resolves worst with softening `eps` (length units),
    /// with ids at device address `id` (u64 each) where the rank holds them, and the most
    /// particles at distinct positions sharing one of its deepest leaves. Both come down in
    /// one copy. Nothing without a tree of them.
    pub fn closeness(
        &mut self,
        s: &Stages<R>,
        src: Positions,
        id: Option<u64>,
        eps: f64,
    ) -> Result<Closeness> {
        let Some(tree) = self.tree().filter(|t| t.particles == src.n) else {
            return Ok(Closeness::default());
        };
        s.runner().fill(&mut self.pair_key, 1, u64::MAX)?;
        s.runner().fill(&mut self.crowded, 1, 0)?;
        let c = tree.frame.centre;
        // SAFETY: the tree's order holds src.n indices of particles at src, its cell arrays
        // tree.cells cells; the record holds CLOSENESS_WORDS doubles.
        unsafe {
            s.launch(
                "closest_pair",
                blocks(src.n).min(1024),
                &ClosestPairArgs {
                    n: int(src.n)?,
                    index: tree.order,
                    pos: src.pos,
                    cx: c.x,
                    cy: c.y,
                    cz: c.z,
                    near: close::NEAR * tree.frame.side(),
                    eps2: eps * eps,
                    best: self.pair_key.ptr(),
                },
            )?;
            s.launch(
                "crowded_leaves",
                blocks(tree.cells).min(1024),
                &CrowdedLeavesArgs {
                    nc: int(tree.cells)?,
                    tree: tree.arrays,
                    index: tree.order,
                    pos: src.pos,
                    most: self.crowded.ptr(),
                },
            )?;
            s.launch(
                "pair_record",
                1,
                &PairRecordArgs {
                    best: self.pair_key.ptr(),
                    most: self.crowded.ptr(),
                    index: tree.order,
                    pos: src.pos,
                    id: id.unwrap_or(0),
                    has_id: id.is_some() as i32,
                    rec: self.pair_record.ptr(),
                },
            )?;
        }
        let r = s.fetch(&self.pair_record, CLOSENESS_WORDS)?;
        let at = |j: usize| DVec3::new(r[2 + 3 * j], r[3 + 3 * j], r[4 + 3 * j]);
        Ok(Closeness {
            pair: (r[0] >= 0.0).then(|| {
                ClosePair::of(
                    [at(0), at(1)],
                    [r[0] as usize, r[1] as usize],
                    &tree.frame,
                    id.map(|_| [r[8].to_bits(), r[9].to_bits()]),
                )
            }),
            crowded: r[10] as u32,
        })
    }

    /// `count` of the positions at `src` at even strides, copied down: the sample
    /// [`crate::sfc::frame::strided`] takes.
    pub fn samples(&mut self, s: &Stages<R>, src: Positions, count: usize) -> Result<Vec<DVec3>> {
        let stride = src.n.div_ceil(count.max(1)).max(1);
        let m = src.n.div_ceil(stride);
        if m == 0 {
            return Ok(Vec::new());
        }
        grow(s.runner(), &mut self.samples, 3 * m)?;
        // SAFETY: the positions hold src.n particles, the samples 3 doubles for each of m.
        unsafe {
            s.launch(
                "sample_positions",
                blocks(m),
                &SamplePositionsArgs {
                    n: int(src.n)?,
                    pos: src.pos,
                    stride: int(stride)?,
                    out: self.samples.ptr(),
                },
            )?;
        }
        s.fetch_as(&self.samples, m)
    }

    /// Device address of room for a refit's bounds of the particles of every cell (6 floats
    /// each), allocated at the first refit of the cell arrays (a run that never refits never
    /// holds them).
    fn refit_bounds(&mut self, s: &Stages<R>) -> Result<u64> {
        let c = self.cells.as_mut().expect("built");
        if c.bounds.is_none() {
            c.bounds = Some(s.runner().alloc(6 * c.capacity)?);
        }
        Ok(c.bounds.as_ref().expect("allocated above").ptr())
    }

    /// The block of `cell_moments` and `cell_bounds` for the breadth-first cells `lo..hi`: the
    /// moments into the moment words, the bounds to device address `bounds` (a refit's; 0 for
    /// `cell_moments` alone).
    fn upward(&self, bounds: u64) -> impl Fn(i32, i32) -> UpwardArgs {
        let a = self.particles.as_ref().expect("sorted");
        let c = self.cells.as_ref().expect("reserved");
        let block = UpwardArgs {
            lo: 0,
            hi: 0,
            particles: a.sorted.ptr(),
            first: c.bfs_first.ptr(),
            count: c.bfs_count.ptr(),
            child: c.bfs_child.ptr(),
            nchild: c.bfs_nchild.ptr(),
            inner: c.bfs_inner.ptr(),
            mom: self.moments.ptr(),
            bounds,
        };
        move |lo, hi| UpwardArgs { lo, hi, ..block }
    }

    /// The view of the arrays of a tree of `n` particles and `cells` cells in `frame`.
    fn device_tree(&self, n: usize, cells: usize, frame: Frame) -> DeviceTree {
        let a = self.particles.as_ref().expect("built");
        DeviceTree {
            particles: n,
            cells,
            frame,
            arrays: self.tree_arrays(),
            order: a.index[0].ptr(),
            spare: a.pos_mass.ptr(),
        }
    }

    /// The builder's tree as kernels take it: the sorted particles, the cells in preorder and
    /// their parents.
    fn tree_arrays(&self) -> TreeArrays {
        let a = self.particles.as_ref().expect("reserved");
        let t = self.stored.as_ref().expect("reserved");
        t.cells.arrays(a.sorted.ptr(), t.parent.ptr())
    }

    /// Grows the particle arrays to hold `n` particles.
    fn reserve_particles(&mut self, s: &Stages<R>, n: usize) -> Result<()> {
        // No headroom for arrays made anew after a release: their size is not growing.
        let regrow = self.particles.as_ref().is_some_and(|a| !a.released);
        let r = s.runner();
        let arrays = |cap: usize| -> Result<ParticleArrays<R>> {
            Ok(ParticleArrays {
                capacity: cap,
                released: false,
                pos_mass: r.alloc(4 * cap)?,
                sorted: r.alloc(4 * cap)?,
                keys: [r.alloc(cap)?, r.alloc(cap)?],
                index: [r.alloc(cap)?, r.alloc(cap)?],
                tile_states: r.alloc(256 * cap.div_ceil(TILE))?,
            })
        };
        reserve(
            &mut self.particles,
            (n, n + 1),
            regrow,
            |a| if a.released { 0 } else { a.capacity },
            arrays,
        )
    }

    /// Grows the lists of a level's splitting cells to hold `splits` of them, with headroom
    /// once they have had to grow ([`with_headroom`]).
    fn reserve_splits(&mut self, s: &Stages<R>, splits: usize) -> Result<()> {
        let regrow = self.splits.is_some();
        let r = s.runner();
        let arrays = |cap: usize| -> Result<SplitLists<R>> {
            Ok(SplitLists {
                capacity: cap,
                split: [r.alloc(cap)?, r.alloc(cap)?],
                tile_states: r.alloc(2 * split_tiles(cap))?,
                counters: r.alloc(2)?,
            })
        };
        let len = (splits, splits.max(1));
        reserve(&mut self.splits, len, regrow, |l| l.capacity, arrays)
    }

    /// Grows the cell arrays to hold `cells` cells, with headroom when `regrow`
    /// ([`with_headroom`]).
    fn reserve_cells(&mut self, s: &Stages<R>, cells: usize, regrow: bool) -> Result<()> {
        let r = s.runner();
        let arrays = |cap: usize| -> Result<BuildCells<R>> {
            Ok(BuildCells {
                capacity: cap,
                released: false,
                bfs_first: r.alloc(cap)?,
                bfs_count: r.alloc(cap)?,
                bfs_level: r.alloc(cap)?,
                bfs_child: r.alloc(cap)?,
                bfs_nchild: r.alloc(cap)?,
                bfs_subtree: r.alloc(cap)?,
                preorder: r.alloc(cap)?,
                bfs_inner: r.alloc(cap)?,
                bounds: None,
            })
        };
        reserve(
            &mut self.cells,
            (cells, cells + 1),
            regrow,
            |a| if a.released { 0 } else { a.capacity },
            arrays,
        )
    }

    /// Grows the cells the walk reads, their parents and boxes to hold `cells` cells, with
    /// headroom once they have had to grow ([`with_headroom`]; not when made anew after a
    /// release).
    fn reserve_stored(&mut self, s: &Stages<R>, cells: usize) -> Result<()> {
        let regrow = self.stored.as_ref().is_some_and(|t| !t.released);
        let r = s.runner();
        let arrays = |cap: usize| -> Result<StoredCells<R>> {
            Ok(StoredCells {
                capacity: cap,
                released: false,
                cells: DeviceCells::alloc(r, cap)?,
                built: r.alloc(4 * cap)?,
                parent: r.alloc(cap)?,
            })
        };
        reserve(
            &mut self.stored,
            (cells, cells),
            regrow,
            |t| if t.released { 0 } else { t.capacity },
            arrays,
        )
    }

    /// Takes the particles at `src` to the float32 `frame`, computes their keys (in its
    /// [`Frame::key_grid`]) on the curve `order`, sorts (key, index) pairs and gathers the particles in key order. The
    /// sorted keys and order end in `keys[0]`, `index[0]`, the particles in `sorted`.
    fn sort(&mut self, s: &Stages<R>, src: Positions, frame: &Frame, order: Order) -> Result<()> {
        let n = src.n;
        self.reserve_particles(s, n)?;
        s.runner().fill(&mut self.digit_counts, 8 * 256, 0)?;
        let a = self.particles.as_ref().expect("reserved");
        let o = frame.key_grid().origin;
        // SAFETY (every launch below): the particle arrays hold at least n particles, the
        // tile states 256 per tile, the digit counts 8 * 256.
        unsafe {
            s.launch(
                "to_frame",
                blocks(n),
                &ToFrameArgs {
                    pos: src.pos,
                    mass: src.mass,
                    n: int(n)?,
                    frame: frame_map(frame),
                    pos_mass: a.pos_mass.ptr(),
                },
            )?;
            s.launch(
                "tree_keys",
                blocks(n),
                &TreeKeysArgs {
                    pos_mass: a.pos_mass.ptr(),
                    n: int(n)?,
                    ox: o.x,
                    oy: o.y,
                    oz: o.z,
                    scale: GRID as f64,
                    hilbert: (order == Order::Hilbert) as i32,
                    keys: a.keys[0].ptr(),
                    index: a.index[0].ptr(),
                },
            )?;
            s.launch(
                "radix_digit_counts",
                blocks(n).min(1024),
                &RadixDigitCountsArgs {
                    keys: a.keys[0].ptr(),
                    n: int(n)?,
                    counts: self.digit_counts.ptr(),
                },
            )?;
        }
        let counts = s.fetch(&self.digit_counts, 8 * 256)?;
        let tiles = n.div_ceil(TILE);
        let (keys, index, states) = (
            [a.keys[0].ptr(), a.keys[1].ptr()],
            [a.index[0].ptr(), a.index[1].ptr()],
            a.tile_states.ptr(),
        );
        let mut from = 0;
        for digit in 0..8 {
            // A pass whose digit is the same for every key moves nothing.
            if counts[256 * digit..256 * (digit + 1)].contains(&(n as u32)) {
                continue;
            }
            // Each pass's states carry its number; when the numbers run out, the states are
            // zeroed and they start again.
            self.sort_epoch += 1;
            if self.sort_epoch >= 1 << 30 {
                let a = self.particles.as_mut().expect("reserved");
                let len = a.tile_states.len();
                s.runner().fill(&mut a.tile_states, len, 0)?;
                self.sort_epoch = 1;
            }
            let pass = RadixPassArgs {
                keys_in: keys[from],
                index_in: index[from],
                n: int(n)?,
                shift: 8 * digit as i32,
                ntiles: int(tiles)?,
                digit_counts: self.digit_counts.ptr() + (4 * 256 * digit) as u64,
                states,
                counter: self.sort_counter.ptr(),
                epoch: self.sort_epoch,
                keys_out: keys[1 - from],
                index_out: index[1 - from],
            };
            // SAFETY: as above.
            unsafe { s.launch("radix_onesweep", tiles as u32, &pass) }?;
            from = 1 - from;
        }
        let a = self.particles.as_mut().expect("reserved");
        if from == 1 {
            a.keys.swap(0, 1);
            a.index.swap(0, 1);
        }
        let a = self.particles.as_ref().expect("reserved");
        // SAFETY: as above.
        unsafe {
            s.launch(
                "gather_particles",
                blocks(n),
                &GatherParticlesArgs {
                    pos_mass: a.pos_mass.ptr(),
                    index: a.index[0].ptr(),
                    n: int(n)?,
                    sorted: a.sorted.ptr(),
                },
            )
        }
    }

    /// The topology over the `n` sorted keys, leaves of at most `ncrit` particles: cells level
    /// by level in breadth-first order, then their subtree sizes and preorder positions.
    /// Returns the start of every level's cells and, last, the number of cells.
    fn cell_levels(
        &mut self,
        s: &Stages<R>,
        n: usize,
        ncrit: usize,
    ) -> Result<(Vec<usize>, usize)> {
        // Enough for every tree of usual leaves (a level's splitting cells: about an eighth of
        // the next level's); a deeper one grows the arrays and starts over.
        let mut guess = n.div_ceil(ncrit.max(1)) + 64;
        let mut splits = guess / 2;
        loop {
            // Headroom once the cells have had to grow, this build's retries included (without
            // it the doubled guesses of a uniform cube of 10^6 took 60 % more cell bytes).
            let regrow = self.cells.as_ref().is_some_and(|c| !c.released);
            self.reserve_cells(s, guess, regrow)?;
            self.reserve_splits(s, splits)?;
            match self.levels(s, n, ncrit)? {
                Ok((levels, inner)) => {
                    self.order_cells(s, &levels)?;
                    return Ok((levels, inner));
                }
                Err(Short::Cells(need)) => guess = need.max(2 * guess),
                Err(Short::Splits(need)) => splits = need,
            }
        }
    }

    /// The breadth-first cells, level by level (only the cells that split visited), and how
    /// many of them split; `Err` with what did not fit. The levels follow one another on the
    /// device (`split_level` reads and writes the level record): the host launches one more
    /// level than the last tree needed before it reads the record back, then a few at a time.
    fn levels(
        &mut self,
        s: &Stages<R>,
        n: usize,
        ncrit: usize,
    ) -> Result<std::result::Result<(Vec<usize>, usize), Short>> {
        let c = self.cells.as_ref().expect("reserved");
        let l = self.splits.as_ref().expect("reserved");
        let a = self.particles.as_ref().expect("sorted");
        let (cap, scap) = (c.capacity, l.capacity);
        // SAFETY (every launch below): the cell arrays hold `cap` cells, the lists of splitting
        // cells `scap` and the tiles' states those of `scap` splitting cells; split_level writes
        // none beyond, and no level after one whose arrays were short.
        unsafe {
            s.launch(
                "tree_root",
                1,
                &TreeRootArgs {
                    n: int(n)?,
                    ncrit: int(ncrit)?,
                    first: c.bfs_first.ptr(),
                    count: c.bfs_count.ptr(),
                    level: c.bfs_level.ptr(),
                    nchild: c.bfs_nchild.ptr(),
                    split: l.split[0].ptr(),
                    inner: c.bfs_inner.ptr(),
                    record: self.level_record.ptr(),
                },
            )?;
        }
        // Levels 0 ..= MAX_LEVEL - 1 may split (cells at MAX_LEVEL never do).
        let most = MAX_LEVEL as usize;
        let first = self.split_levels.map_or(FIRST_LEVELS, |d| d + 1);
        let (mut launched, mut batch) = (0, first.min(most));
        loop {
            let upto = (launched + batch).min(most);
            for level in launched..upto {
                let (list, next_list) = (&l.split[level % 2], &l.split[1 - level % 2]);
                // Splitting cells a level can hold: 8^level, and the lists' room.
                let bound = 1usize
                    .checked_shl(3 * level as u32)
                    .map_or(scap, |b| b.min(scap));
                let grid = split_tiles(bound).min(SPLIT_GRID) as u32;
                // SAFETY: as above.
                unsafe {
                    s.launch(
                        "split_level",
                        grid,
                        &SplitLevelArgs {
                            keys: a.keys[0].ptr(),
                            level: int(level)?,
                            ncrit: int(ncrit)?,
                            capacity: int(cap)?,
                            split_capacity: int(scap)?,
                            split: list.ptr(),
                            next_split: next_list.ptr(),
                            first: c.bfs_first.ptr(),
                            count: c.bfs_count.ptr(),
                            levels: c.bfs_level.ptr(),
                            child: c.bfs_child.ptr(),
                            nchild: c.bfs_nchild.ptr(),
                            inner: c.bfs_inner.ptr(),
                            record: self.level_record.ptr(),
                            tile_states: l.tile_states.ptr(),
                            tiles: int(split_tiles(scap))?,
                            counters: l.counters.ptr(),
                        },
                    )?;
                }
            }
            launched = upto;
            let record = s.fetch(&self.level_record, LEVEL_RECORD_WORDS)?;
            let (start, nsplit) = (&record[..LEVEL_SLOTS], &record[LEVEL_SLOTS..]);
            let (inner, short) = (&record[2 * LEVEL_SLOTS..], &record[3 * LEVEL_SLOTS..]);
            if short[0] > 0 {
                return Ok(Err(Short::Cells(short[0] as usize)));
            }
            if short[1] > 0 {
                return Ok(Err(Short::Splits(short[1] as usize)));
            }
            // The first level without splitting cells is the deepest (nsplit[level + 1] is
            // known once `level` was split).
            if let Some(deepest) = (0..=launched).find(|&k| nsplit[k] == 0) {
                self.split_levels = Some(deepest);
                let levels = start[..deepest + 2].iter().map(|&v| v as usize).collect();
                return Ok(Ok((levels, inner[deepest] as usize)));
            }
            if launched == most {
                unreachable!("cells at MAX_LEVEL never split")
            }
            batch = MORE_LEVELS;
        }
    }

    /// Launches a kernel once per tree level (`levels`: where each level's cells start, then
    /// their number), deepest level first when `upward`, with the argument block `args(lo, hi)`
    /// of the level's cells `lo..hi`: `kernel(cells)` names it for a level of `cells` cells,
    /// with its threads per cell.
    ///
    /// # Safety
    /// As [`Stages::launch`], for every level's cells.
    unsafe fn per_level<A: KernelArgs>(
        &self,
        s: &Stages<R>,
        kernel: impl Fn(usize) -> (&'static str, usize),
        levels: &[usize],
        upward: bool,
        args: impl Fn(i32, i32) -> A,
    ) -> Result<()> {
        let depth = levels.len() - 1;
        let mut order: Vec<usize> = (0..depth).collect();
        if upward {
            order.reverse();
        }
        for l in order {
            let (lo, hi) = (levels[l], levels[l + 1]);
            let block = args(int(lo)?, int(hi)?);
            let (name, threads) = kernel(hi - lo);
            // SAFETY: passed on with the caller's guarantee.
            unsafe { s.launch(name, blocks(threads * (hi - lo)), &block) }?;
        }
        Ok(())
    }

    /// Subtree sizes (deepest level first) and preorder positions (root first).
    fn order_cells(&mut self, s: &Stages<R>, levels: &[usize]) -> Result<()> {
        let c = self.cells.as_mut().expect("reserved");
        s.runner().fill(&mut c.preorder, 1, 0)?;
        let order = CellOrderArgs {
            lo: 0,
            hi: 0,
            child: c.bfs_child.ptr(),
            nchild: c.bfs_nchild.ptr(),
            subtree: c.bfs_subtree.ptr(),
            preorder: c.preorder.ptr(),
        };
        let level = |lo, hi| CellOrderArgs { lo, hi, ..order };
        // SAFETY: the breadth-first arrays hold every level's cells.
        unsafe {
            self.per_level(s, a_thread_a_cell("subtree_sizes"), levels, true, level)?;
            self.per_level(
                s,
                a_thread_a_cell("preorder_children"),
                levels,
                false,
                level,
            )
        }
    }

    /// The upward pass (deepest level first), then every cell stored at its preorder position
    /// with its box (in `frame`'s [`Frame::key_grid`]) and S_eff.
    fn moments(
        &mut self,
        s: &Stages<R>,
        levels: &[usize],
        frame: &Frame,
        p: &TreeParams,
    ) -> Result<()> {
        let c = self.cells.as_ref().expect("reserved");
        let depth = levels.len() - 1;
        let ncells = levels[depth];
        let o = frame.key_grid().origin;
        // SAFETY: the cell arrays hold every cell, the particle arrays every particle.
        unsafe {
            self.per_level(s, moments_kernel, levels, true, self.upward(0))?;
            s.launch(
                "store_cells",
                blocks(ncells),
                &StoreCellsArgs {
                    ncells: int(ncells)?,
                    preorder: c.preorder.ptr(),
                    bfs_first: c.bfs_first.ptr(),
                    bfs_count: c.bfs_count.ptr(),
                    bfs_level: c.bfs_level.ptr(),
                    bfs_nchild: c.bfs_nchild.ptr(),
                    bfs_subtree: c.bfs_subtree.ptr(),
                    bfs_inner: c.bfs_inner.ptr(),
                    mom: self.moments.ptr(),
                    ox: o.x,
                    oy: o.y,
                    oz: o.z,
                    side: 1.0,
                    mac: (p.mac != Mac::BarnesHut) as i32,
                    theta: p.theta,
                    tree: self.tree_arrays(),
                    built: self.stored.as_ref().expect("reserved").built.ptr(),
                },
            )
        }?;
        self.parents(s, ncells)
    }

    /// Every cell's parent, from the preorder arrays.
    fn parents(&self, s: &Stages<R>, ncells: usize) -> Result<()> {
        // SAFETY: the cell arrays hold `ncells` cells in preorder.
        unsafe {
            s.launch(
                "cell_parents",
                blocks(ncells),
                &CellParentsArgs {
                    ncells: int(ncells)?,
                    tree: self.tree_arrays(),
                },
            )
        }
    }

    /// The last tree copied down: its particles, their indices in the particle arrays and its
    /// cells. `None` without a tree.
    pub fn download(&self, s: &Stages<R>) -> Result<Option<Tree>> {
        let Some(tree) = self.tree() else {
            return Ok(None);
        };
        let (n, ncells) = (tree.particles, tree.cells);
        let a = self.particles.as_ref().expect("built");
        let t = self.stored.as_ref().expect("built");
        let cells = t.cells.download(s.runner(), ncells)?;
        Ok(Some(Tree {
            frame: tree.frame,
            particles: s.fetch_as(&a.sorted, n)?,
            index: s.fetch(&a.index[0], n)?,
            cells,
        }))
    }

    /// The first `n` records (4 floats) of the tree's spare room, copied down (for tests of
    /// what other stages write there).
    #[cfg(test)]
    pub(crate) fn fetch_spare(&self, s: &Stages<R>, n: usize) -> Result<Vec<[f32; 4]>> {
        s.fetch_as(&self.particles.as_ref().expect("built").pos_mass, n)
    }

    /// What a refit needs of the last tree, copied down (for a checkpoint): its order, cells
    /// and the boxes of its rebuild. `None` without a tree.
    pub fn topology(&self, s: &Stages<R>) -> Result<Option<TreeTopology>> {
        let Some(tree) = self.tree() else {
            return Ok(None);
        };
        if self.walk_only {
            return Err(crate::Error::device(
                "the tree's topology was released after its build",
            ));
        }
        let (n, ncells) = (tree.particles, tree.cells);
        let a = self.particles.as_ref().expect("built");
        let c = self.stored.as_ref().expect("built");
        Ok(Some(TreeTopology {
            frame: tree.frame,
            index: s.fetch(&a.index[0], n)?,
            first: s.fetch(&c.cells.first, ncells)?,
            count: s.fetch(&c.cells.count, ncells)?,
            level: s.fetch(&c.cells.level, ncells)?,
            nchild: s.fetch(&c.cells.nchild, ncells)?,
            subtree: s.fetch(&c.cells.subtree, ncells)?,
            boxes: s.fetch_as(&c.built, ncells)?,
        }))
    }

    /// Takes `t` (a checked topology, see [`TreeTopology::check`]) as the last tree, so that
    /// the next [`TreeBuilder::refit`] refits it: its breadth-first arrays are laid out on the
    /// host and copied up with its preorder arrays, order and rebuild boxes.
    pub fn restore(&mut self, s: &Stages<R>, t: &TreeTopology) -> Result<()> {
        self.restore_with(s, t, |r, cells| {
            r.upload(&t.first, &mut cells.first)?;
            r.upload(&t.count, &mut cells.count)?;
            r.upload(&t.level, &mut cells.level)?;
            r.upload(&t.nchild, &mut cells.nchild)?;
            r.upload(&t.subtree, &mut cells.subtree)
        })
    }

    /// [`TreeBuilder::restore`] with the preorder cells filled by `upload_cells` (at least
    /// their topology: first, count, level, nchild, subtree).
    fn restore_with(
        &mut self,
        s: &Stages<R>,
        t: &TreeTopology,
        upload_cells: impl FnOnce(&R, &mut DeviceCells<R>) -> Result<()>,
    ) -> Result<()> {
        self.last = None;
        self.walk_only = false;
        let (n, ncells) = (t.index.len(), t.first.len());
        self.reserve_particles(s, n)?;
        let regrow = self.cells.as_ref().is_some_and(|c| !c.released);
        self.reserve_cells(s, ncells, regrow)?;
        self.reserve_stored(s, ncells)?;
        let bfs = bfs_layout(t);
        let r = s.runner();
        let inner = bfs.nchild.iter().filter(|&&k| k > 0).count();
        grow(r, &mut self.moments, MOMENT_WORDS * inner.max(1))?;
        let a = self.particles.as_mut().expect("reserved");
        r.upload(&t.index, &mut a.index[0])?;
        let c = self.cells.as_mut().expect("reserved");
        r.upload(&bfs.first, &mut c.bfs_first)?;
        r.upload(&bfs.count, &mut c.bfs_count)?;
        r.upload(&bfs.level, &mut c.bfs_level)?;
        r.upload(&bfs.child, &mut c.bfs_child)?;
        r.upload(&bfs.nchild, &mut c.bfs_nchild)?;
        r.upload(&bfs.preorder, &mut c.preorder)?;
        r.upload(&bfs.inner, &mut c.bfs_inner)?;
        let stored = self.stored.as_mut().expect("reserved");
        upload_cells(r, &mut stored.cells)?;
        r.upload(bytemuck::cast_slice(&t.boxes), &mut stored.built)?;
        self.parents(s, ncells)?;
        let tree = self.device_tree(n, ncells, t.frame);
        self.last = Some((tree, bfs.levels));
        Ok(())
    }

    /// Takes `tree`, built on the host ([`Tree::build`]), as the last tree: copied up with its
    /// particles, order and cells, its boxes as the rebuild's, so that the stages after the
    /// build (and refits) run on it as on a tree built here.
    pub fn upload(&mut self, s: &Stages<R>, tree: &Tree) -> Result<DeviceTree> {
        let cells = &tree.cells;
        let topology = TreeTopology {
            frame: tree.frame,
            index: tree.index.clone(),
            first: cells.first.clone(),
            count: cells.count.clone(),
            level: cells.level.clone(),
            nchild: cells.nchild.clone(),
            subtree: cells.subtree.clone(),
            boxes: cells.boxes.clone(),
        };
        self.restore_with(s, &topology, |r, device| device.upload(r, cells))?;
        let r = s.runner();
        let a = self.particles.as_mut().expect("restored");
        r.upload(bytemuck::cast_slice(&tree.particles), &mut a.sorted)?;
        Ok(self.tree().expect("restored"))
    }
}

/// Keeps the arrays in `slot` where they hold `need` elements (`have` of them), else frees
/// them and makes arrays for `len` ([`with_headroom`]: with headroom when `regrow`).
fn reserve<A>(
    slot: &mut Option<A>,
    (need, len): (usize, usize),
    regrow: bool,
    have: impl Fn(&A) -> usize,
    alloc: impl Fn(usize) -> Result<A>,
) -> Result<()> {
    if slot.as_ref().is_some_and(|a| have(a) >= need) {
        return Ok(());
    }
    *slot = None; // free before allocating the larger ones
    *slot = Some(with_headroom(len, regrow, alloc)?);
    Ok(())
}

/// The map of float64 positions to the float32 `frame` ([`Frame::to_frame`]) that kernels
/// take: its centre, the inverse of its cube's side and whether it folds (periodic).
pub(crate) fn frame_map(frame: &Frame) -> FrameMap {
    let c = frame.centre;
    FrameMap {
        cx: c.x,
        cy: c.y,
        cz: c.z,
        scale: 1.0 / frame.side(),
        periodic: frame.periodic as i64,
    }
}

mod bfs;
#[cfg(all(test, hinoki_emulator))]
pub(crate) mod tests;
