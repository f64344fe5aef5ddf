//! The tree build on the device (`cuda/build.cu`): keys, a stable radix sort, the topology level
//! by level, the preorder and the upward pass, then the tree copied down to the host.
//!
//! The launch sequence is written once, over [`KernelRunner`], so that it runs on a GPU or on
//! the CPU kernel emulator; both give the tree [`Tree::build`] gives on the same float32
//! particles, bit for bit (tested on the emulator in CI and on the GPU in `tests/gpu.rs`).

use super::buffers::TreeArrays;
use super::launch::{grow, with_headroom, Arg, DeviceArray, Element, KernelRunner};
use crate::diag::PhaseTimes;
use crate::error::{Error, Result};
use crate::sfc::{GridBox, Order, GRID};
use crate::tree::{Cells, Tree, TreeParams, MAX_LEVEL};
use crate::walk::mac::Mac;
use glam::DVec3;
use std::sync::{Mutex, PoisonError};

/// Threads per block of every build kernel (BUILD_BLOCK in cuda/build.cu).
const BLOCK: u32 = 256;
/// Keys per block of a radix pass, elements per block of a scan (RADIX_TILE, SCAN_TILE).
const TILE: usize = 2048;
/// Float64 words of one cell's moments (MOMENT_WORDS).
const MOMENT_WORDS: usize = 11;
/// Largest grid of the grid-stride kernels.
const MAX_GRID: usize = 1 << 16;

/// The device arrays over particles (grown with N).
struct ParticleArrays<R: KernelRunner> {
    capacity: usize,
    pos_mass: R::Array<[f32; 4]>,
    sorted: R::Array<f32>,
    keys: [R::Array<u64>; 2],
    index: [R::Array<u32>; 2],
    tile_counts: R::Array<u32>,
}

/// The device arrays over cells (grown with the tree), breadth-first and in preorder.
struct CellArrays<R: KernelRunner> {
    capacity: usize,
    bfs_first: R::Array<u32>,
    bfs_count: R::Array<u32>,
    bfs_level: R::Array<u8>,
    bfs_child: R::Array<u32>,
    bfs_nchild: R::Array<u8>,
    bfs_subtree: R::Array<u32>,
    preorder: R::Array<u32>,
    moments: R::Array<f64>,
    oct_start: R::Array<u32>,
    oct_count: R::Array<u32>,
    oct_slot: R::Array<u32>,
    first: R::Array<u32>,
    count: R::Array<u32>,
    level: R::Array<u8>,
    nchild: R::Array<u8>,
    subtree: R::Array<u32>,
    boxes: R::Array<f32>,
    com_mass: R::Array<f32>,
    quad: R::Array<f32>,
    trace: R::Array<f32>,
    s_eff: R::Array<f32>,
}

/// A tree built on the device and held there by its [`TreeBuilder`] until the next build.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTree {
    /// Its particles.
    pub particles: usize,
    /// Its cells.
    pub cells: usize,
    /// The cube its keys were computed in.
    pub grid: GridBox,
}

/// Builds trees with the kernels of `cuda/build.cu` on one device, keeping its arrays across
/// builds.
pub struct TreeBuilder<R: KernelRunner> {
    runner: R,
    particles: Option<ParticleArrays<R>>,
    cells: Option<CellArrays<R>>,
    /// Partial sums of the scans, one array per recursion depth.
    scan_sums: Vec<R::Array<u32>>,
    /// Digit counts of the eight radix passes, and the size of the next tree level.
    digit_counts: R::Array<u32>,
    next_total: R::Array<u32>,
    /// The arrays of the target groups and targets formed on the device (build/groups.rs).
    group_arrays: Option<groups::GroupArrays<R>>,
}

fn ptr<A: DeviceArray>(a: &A) -> Arg {
    Arg::Ptr(a.ptr())
}

fn int(v: usize) -> Result<Arg> {
    i32::try_from(v).map(Arg::I32).map_err(|_| {
        Error::input(format!(
            "{v} elements are too many for one device tree build"
        ))
    })
}

/// Blocks of a grid-stride kernel over `items` items.
fn blocks(items: usize) -> u32 {
    items.div_ceil(BLOCK as usize).clamp(1, MAX_GRID) as u32
}

impl<R: KernelRunner> TreeBuilder<R> {
    /// A builder launching on `runner`, which must have compiled `cuda/build.cu`.
    pub fn new(runner: R) -> Result<Self> {
        Ok(Self {
            digit_counts: runner.alloc(8 * 256)?,
            next_total: runner.alloc(1)?,
            runner,
            particles: None,
            cells: None,
            scan_sums: Vec::new(),
            group_arrays: None,
        })
    }

    /// Where the last tree built is on the device (valid until the next build).
    pub(super) fn tree_arrays(&self) -> Option<TreeArrays> {
        let (a, c) = (self.particles.as_ref()?, self.cells.as_ref()?);
        Some(TreeArrays {
            particles: a.sorted.ptr(),
            com_mass: c.com_mass.ptr(),
            s_eff: c.s_eff.ptr(),
            boxes: c.boxes.ptr(),
            subtree: c.subtree.ptr(),
            first: c.first.ptr(),
            count: c.count.ptr(),
            nchild: c.nchild.ptr(),
            quad: c.quad.ptr(),
            trace: c.trace.ptr(),
        })
    }

    /// Where the last tree's order (the input index of each sorted particle) is on the device.
    pub(super) fn order_array(&self) -> Option<u64> {
        Some(self.particles.as_ref()?.index[0].ptr())
    }

    /// Waits until every launch and copy issued so far is done.
    pub fn synchronize(&self) -> Result<()> {
        self.runner.synchronize()
    }

    /// The device bytes the builder holds.
    pub fn device_bytes(&self) -> usize {
        let p = self.particles.as_ref().map_or(0, |a| {
            16 * a.pos_mass.len()
                + 4 * (a.sorted.len() + a.tile_counts.len())
                + 8 * (a.keys[0].len() + a.keys[1].len())
                + 4 * (a.index[0].len() + a.index[1].len())
        });
        let c = self.cells.as_ref().map_or(0, |c| {
            4 * (c.bfs_first.len()
                + c.bfs_count.len()
                + c.bfs_child.len()
                + c.bfs_subtree.len()
                + c.preorder.len()
                + c.oct_start.len()
                + c.oct_count.len()
                + c.oct_slot.len()
                + c.first.len()
                + c.count.len()
                + c.subtree.len()
                + c.boxes.len()
                + c.com_mass.len()
                + c.quad.len()
                + c.trace.len()
                + c.s_eff.len())
                + 8 * c.moments.len()
                + c.bfs_level.len()
                + c.bfs_nchild.len()
                + c.level.len()
                + c.nchild.len()
        });
        p + c
            + self
                .group_arrays
                .as_ref()
                .map_or(0, groups::GroupArrays::bytes)
    }

    /// The tree over particles at `pos` (length units) with masses `mass` (mass units), both
    /// rounded to float32 first, built on the device and copied down. Times `sort` (upload,
    /// rounding and bounding cube on the way, keys, sort, gather), `build` (topology, preorder)
    /// and `moments` (upward pass, cells stored and copied down with the particles). `pos` must
    /// be non-empty and finite.
    pub fn build(
        &mut self,
        pos: &[DVec3],
        mass: &[f64],
        p: &TreeParams,
        times: &mut PhaseTimes,
    ) -> Result<Tree> {
        let tree = self.build_on_device(pos, mass, p, times)?;
        times.time("moments", || self.download(&tree))
    }

    /// [`TreeBuilder::build`] without the copy down: the tree stays on the device (see
    /// [`TreeBuilder::tree_arrays`]) until the next build.
    pub fn build_on_device(
        &mut self,
        pos: &[DVec3],
        mass: &[f64],
        p: &TreeParams,
        times: &mut PhaseTimes,
    ) -> Result<DeviceTree> {
        let n = pos.len();
        let grid = times.time("sort", || self.sort(pos, mass, p.order))?;
        let levels = times.time("build", || self.topology(n, p.ncrit))?;
        times.time("moments", || self.moments(&levels, &grid, p))?;
        Ok(DeviceTree {
            particles: n,
            cells: levels[levels.len() - 1],
            grid,
        })
    }

    /// Grows the particle arrays to hold `n` particles.
    fn reserve_particles(&mut self, n: usize) -> Result<()> {
        if self.particles.as_ref().is_some_and(|a| a.capacity >= n) {
            return Ok(());
        }
        self.particles = None; // free before allocating the larger ones
        let r = &self.runner;
        let arrays = |cap: usize| -> Result<ParticleArrays<R>> {
            Ok(ParticleArrays {
                capacity: cap,
                pos_mass: r.alloc(4 * cap)?,
                sorted: r.alloc(4 * cap)?,
                keys: [r.alloc(cap)?, r.alloc(cap)?],
                index: [r.alloc(cap)?, r.alloc(cap)?],
                tile_counts: r.alloc(256 * cap.div_ceil(TILE))?,
            })
        };
        self.particles = Some(with_headroom(n + 1, arrays)?);
        Ok(())
    }

    /// Grows the cell arrays to hold `cells` cells (and a level of up to `cells` cells).
    fn reserve_cells(&mut self, cells: usize) -> Result<()> {
        if self.cells.as_ref().is_some_and(|a| a.capacity >= cells) {
            return Ok(());
        }
        self.cells = None;
        let r = &self.runner;
        let arrays = |cap: usize| -> Result<CellArrays<R>> {
            Ok(CellArrays {
                capacity: cap,
                bfs_first: r.alloc(cap)?,
                bfs_count: r.alloc(cap)?,
                bfs_level: r.alloc(cap)?,
                bfs_child: r.alloc(cap)?,
                bfs_nchild: r.alloc(cap)?,
                bfs_subtree: r.alloc(cap)?,
                preorder: r.alloc(cap)?,
                moments: r.alloc(MOMENT_WORDS * cap)?,
                oct_start: r.alloc(8 * cap)?,
                oct_count: r.alloc(8 * cap)?,
                oct_slot: r.alloc(8 * cap)?,
                first: r.alloc(cap)?,
                count: r.alloc(cap)?,
                level: r.alloc(cap)?,
                nchild: r.alloc(cap)?,
                subtree: r.alloc(cap)?,
                boxes: r.alloc(4 * cap)?,
                com_mass: r.alloc(4 * cap)?,
                quad: r.alloc(6 * cap)?,
                trace: r.alloc(cap)?,
                s_eff: r.alloc(cap)?,
            })
        };
        self.cells = Some(with_headroom(cells + 1, arrays)?);
        Ok(())
    }

    /// Launches `name` on `grid` blocks.
    fn launch(&self, name: &str, grid: u32, args: &[Arg]) -> Result<()> {
        // SAFETY: every call below passes the arguments of the kernel's declaration in
        // cuda/build.cu, with arrays sized by reserve_particles / reserve_cells for the
        // particles and cells the launch covers.
        unsafe { self.runner.launch(name, grid, BLOCK, args) }
    }

    /// Copies the first `len` elements of `a` down.
    fn fetch<T: Element>(&self, a: &R::Array<T>, len: usize) -> Result<Vec<T>> {
        self.fetch_as(a, len)
    }

    /// Copies the start of `a` down as `len` elements of `U` (e.g. 4 floats as one `[f32; 4]`),
    /// straight into the vector that is returned.
    fn fetch_as<T: Element, U: bytemuck::Pod>(
        &self,
        a: &R::Array<T>,
        len: usize,
    ) -> Result<Vec<U>> {
        let mut out = vec![U::zeroed(); len];
        self.runner
            .download(a, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Exclusive prefix sums of `data[..m]` in place (`depth`: recursion level of the sums).
    fn scan(&mut self, data: u64, m: usize, depth: usize) -> Result<()> {
        let tiles = m.div_ceil(TILE);
        if self.scan_sums.len() <= depth {
            self.scan_sums.push(self.runner.alloc(tiles)?);
        }
        grow(&self.runner, &mut self.scan_sums[depth], tiles)?;
        let sums = self.scan_sums[depth].ptr();
        self.launch(
            "scan_tiles",
            tiles as u32,
            &[Arg::Ptr(data), int(m)?, Arg::Ptr(sums)],
        )?;
        if tiles > 1 {
            self.scan(sums, tiles, depth + 1)?;
            self.launch(
                "scan_add",
                tiles as u32,
                &[Arg::Ptr(data), int(m)?, Arg::Ptr(sums)],
            )?;
        }
        Ok(())
    }

    /// Uploads the particles at `pos` with masses `mass`, rounded to float32 on the way up,
    /// computes their keys in their bounding cube on the curve `order`, sorts (key, index) pairs
    /// and gathers the particles in key order. The sorted keys and order end in `keys[0]`,
    /// `index[0]`, the particles in `sorted`. Returns the cube: [`GridBox::around`] the bounds
    /// of the float32 positions, as [`Tree::build`] takes them on those positions.
    fn sort(&mut self, pos: &[DVec3], mass: &[f64], order: Order) -> Result<GridBox> {
        let n = pos.len();
        self.reserve_particles(n)?;
        let a = self.particles.as_mut().expect("reserved");
        // The bounds of the float64 positions, gathered piece by piece as they go up.
        let bounds = Mutex::new((DVec3::INFINITY, DVec3::NEG_INFINITY));
        let fill = |first: usize, piece: &mut [[f32; 4]]| {
            let range = first..first + piece.len();
            let (mut lo, mut hi) = (DVec3::INFINITY, DVec3::NEG_INFINITY);
            for ((q, x), &m) in piece.iter_mut().zip(&pos[range.clone()]).zip(&mass[range]) {
                *q = [x.x as f32, x.y as f32, x.z as f32, m as f32];
                (lo, hi) = (lo.min(*x), hi.max(*x));
            }
            let mut b = bounds.lock().unwrap_or_else(PoisonError::into_inner);
            *b = (b.0.min(lo), b.1.max(hi));
        };
        self.runner.upload_with(n, &fill, &mut a.pos_mass)?;
        // Rounding to float32 is monotone, so the rounded bounds are the bounds of the rounded
        // positions, which the keys are computed from.
        let (lo, hi) = bounds.into_inner().unwrap_or_else(PoisonError::into_inner);
        let grid = GridBox::around(lo.as_vec3().as_dvec3(), hi.as_vec3().as_dvec3());
        self.runner
            .upload(&[0u32; 8 * 256], &mut self.digit_counts)?;
        let a = self.particles.as_ref().expect("reserved");
        let o = grid.origin;
        self.launch(
            "tree_keys",
            blocks(n),
            &[
                ptr(&a.pos_mass),
                int(n)?,
                Arg::F64(o.x),
                Arg::F64(o.y),
                Arg::F64(o.z),
                Arg::F64(GRID as f64 / grid.side),
                Arg::I32((order == Order::Hilbert) as i32),
                ptr(&a.keys[0]),
                ptr(&a.index[0]),
            ],
        )?;
        self.launch(
            "radix_digit_counts",
            blocks(n).min(1024),
            &[ptr(&a.keys[0]), int(n)?, ptr(&self.digit_counts)],
        )?;
        let counts = self.fetch(&self.digit_counts, 8 * 256)?;
        let tiles = n.div_ceil(TILE);
        let (keys, index, tile_counts) = (
            [a.keys[0].ptr(), a.keys[1].ptr()],
            [a.index[0].ptr(), a.index[1].ptr()],
            a.tile_counts.ptr(),
        );
        let mut from = 0;
        for digit in 0..8 {
            // A pass whose digit is the same for every key moves nothing.
            if counts[256 * digit..256 * (digit + 1)].contains(&(n as u32)) {
                continue;
            }
            let shift = Arg::I32(8 * digit as i32);
            self.launch(
                "radix_tile_counts",
                tiles as u32,
                &[
                    Arg::Ptr(keys[from]),
                    int(n)?,
                    shift,
                    int(tiles)?,
                    Arg::Ptr(tile_counts),
                ],
            )?;
            self.scan(tile_counts, 256 * tiles, 0)?;
            self.launch(
                "radix_scatter",
                tiles as u32,
                &[
                    Arg::Ptr(keys[from]),
                    Arg::Ptr(index[from]),
                    int(n)?,
                    shift,
                    int(tiles)?,
                    Arg::Ptr(tile_counts),
                    Arg::Ptr(keys[1 - from]),
                    Arg::Ptr(index[1 - from]),
                ],
            )?;
            from = 1 - from;
        }
        let a = self.particles.as_mut().expect("reserved");
        if from == 1 {
            a.keys.swap(0, 1);
            a.index.swap(0, 1);
        }
        let a = self.particles.as_ref().expect("reserved");
        self.launch(
            "gather_particles",
            blocks(n),
            &[ptr(&a.pos_mass), ptr(&a.index[0]), int(n)?, ptr(&a.sorted)],
        )?;
        Ok(grid)
    }

    /// The topology over the `n` sorted keys, leaves of at most `ncrit` particles: cells level
    /// by level in breadth-first order, then their subtree sizes and preorder positions.
    /// Returns the start of every level's cells and, last, the number of cells.
    fn topology(&mut self, n: usize, ncrit: usize) -> Result<Vec<usize>> {
        // Enough for every tree of usual leaves; a deeper one grows the arrays and starts over.
        let mut guess = n.div_ceil(ncrit.max(1)) + 64;
        loop {
            self.reserve_cells(guess)?;
            match self.levels(n, ncrit)? {
                Ok(levels) => {
                    self.order_cells(&levels)?;
                    return Ok(levels);
                }
                Err(need) => guess = need.max(2 * guess),
            }
        }
    }

    /// The breadth-first cells, level by level; `Err(cells needed so far)` when they do not
    /// fit.
    fn levels(&mut self, n: usize, ncrit: usize) -> Result<std::result::Result<Vec<usize>, usize>> {
        let c = self.cells.as_ref().expect("reserved");
        let cap = c.capacity;
        self.launch(
            "tree_root",
            1,
            &[
                int(n)?,
                ptr(&c.bfs_first),
                ptr(&c.bfs_count),
                ptr(&c.bfs_level),
            ],
        )?;
        let mut levels = vec![0, 1];
        for level in 0..=MAX_LEVEL as usize {
            let (lo, hi) = (levels[level], levels[level + 1]);
            let c = self.cells.as_ref().expect("reserved");
            let m = 8 * (hi - lo);
            let a = self.particles.as_ref().expect("sorted");
            self.launch(
                "split_octants",
                blocks(m),
                &[
                    ptr(&a.keys[0]),
                    ptr(&c.bfs_first),
                    ptr(&c.bfs_count),
                    int(lo)?,
                    int(hi)?,
                    int(level)?,
                    int(ncrit)?,
                    ptr(&c.oct_start),
                    ptr(&c.oct_count),
                    ptr(&c.oct_slot),
                ],
            )?;
            let slots = c.oct_slot.ptr();
            self.scan(slots, m, 0)?;
            let c = self.cells.as_ref().expect("reserved");
            self.launch(
                "split_emit",
                blocks(m),
                &[
                    ptr(&c.oct_start),
                    ptr(&c.oct_count),
                    ptr(&c.oct_slot),
                    int(lo)?,
                    int(hi)?,
                    int(level)?,
                    int(hi)?,
                    int(cap)?,
                    ptr(&c.bfs_first),
                    ptr(&c.bfs_count),
                    ptr(&c.bfs_level),
                    ptr(&c.bfs_child),
                    ptr(&c.bfs_nchild),
                    ptr(&self.next_total),
                ],
            )?;
            let next = self.fetch(&self.next_total, 1)?[0] as usize;
            if next == 0 {
                return Ok(Ok(levels));
            }
            // The next level's octant lists need 8 entries per cell, within the capacity too.
            if hi + next > cap || next > cap {
                return Ok(Err(hi + next));
            }
            levels.push(hi + next);
        }
        unreachable!("cells at MAX_LEVEL never split")
    }

    /// Launches `name` once per tree level (`levels`: where each level's cells start, then
    /// their number), deepest level first when `upward`, with the level's cells `lo, hi` as the
    /// first two arguments and `rest` after them.
    fn per_level(&self, name: &str, levels: &[usize], upward: bool, rest: &[Arg]) -> Result<()> {
        let depth = levels.len() - 1;
        let mut order: Vec<usize> = (0..depth).collect();
        if upward {
            order.reverse();
        }
        for l in order {
            let (lo, hi) = (levels[l], levels[l + 1]);
            let args = [&[int(lo)?, int(hi)?][..], rest].concat();
            self.launch(name, blocks(hi - lo), &args)?;
        }
        Ok(())
    }

    /// Subtree sizes (deepest level first) and preorder positions (root first).
    fn order_cells(&mut self, levels: &[usize]) -> Result<()> {
        let c = self.cells.as_ref().expect("reserved");
        let (child, nchild, subtree) = (ptr(&c.bfs_child), ptr(&c.bfs_nchild), ptr(&c.bfs_subtree));
        self.per_level("subtree_sizes", levels, true, &[child, nchild, subtree])?;
        let c = self.cells.as_mut().expect("reserved");
        self.runner.upload(&[0u32], &mut c.preorder)?;
        let preorder = ptr(&c.preorder);
        self.per_level(
            "preorder_children",
            levels,
            false,
            &[child, nchild, subtree, preorder],
        )
    }

    /// The upward pass (deepest level first), then every cell stored at its preorder position
    /// with its box and S_eff.
    fn moments(&mut self, levels: &[usize], grid: &GridBox, p: &TreeParams) -> Result<()> {
        let c = self.cells.as_ref().expect("reserved");
        let a = self.particles.as_ref().expect("sorted");
        self.per_level(
            "cell_moments",
            levels,
            true,
            &[
                ptr(&a.sorted),
                ptr(&c.bfs_first),
                ptr(&c.bfs_count),
                ptr(&c.bfs_child),
                ptr(&c.bfs_nchild),
                ptr(&c.moments),
            ],
        )?;
        let depth = levels.len() - 1;
        let ncells = levels[depth];
        let o = grid.origin;
        self.launch(
            "store_cells",
            blocks(ncells),
            &[
                int(ncells)?,
                ptr(&c.preorder),
                ptr(&c.bfs_first),
                ptr(&c.bfs_count),
                ptr(&c.bfs_level),
                ptr(&c.bfs_nchild),
                ptr(&c.bfs_subtree),
                ptr(&c.moments),
                ptr(&a.sorted),
                Arg::F64(o.x),
                Arg::F64(o.y),
                Arg::F64(o.z),
                Arg::F64(grid.side),
                Arg::I32((p.mac != Mac::BarnesHut) as i32),
                Arg::F32(p.theta),
                ptr(&c.first),
                ptr(&c.count),
                ptr(&c.level),
                ptr(&c.nchild),
                ptr(&c.subtree),
                ptr(&c.boxes),
                ptr(&c.com_mass),
                ptr(&c.quad),
                ptr(&c.trace),
                ptr(&c.s_eff),
            ],
        )
    }

    /// Copies `tree` (the last one built), its particles, their input indices and its cells
    /// down.
    fn download(&self, tree: &DeviceTree) -> Result<Tree> {
        let (n, ncells) = (tree.particles, tree.cells);
        let a = self.particles.as_ref().expect("sorted");
        let c = self.cells.as_ref().expect("built");
        let cells = Cells {
            first: self.fetch(&c.first, ncells)?,
            count: self.fetch(&c.count, ncells)?,
            level: self.fetch(&c.level, ncells)?,
            nchild: self.fetch(&c.nchild, ncells)?,
            subtree: self.fetch(&c.subtree, ncells)?,
            boxes: self.fetch_as(&c.boxes, ncells)?,
            com_mass: self.fetch_as(&c.com_mass, ncells)?,
            quad: self.fetch_as(&c.quad, ncells)?,
            trace: self.fetch(&c.trace, ncells)?,
            s_eff: self.fetch(&c.s_eff, ncells)?,
        };
        Ok(Tree {
            grid: tree.grid,
            particles: self.fetch_as(&a.sorted, n)?,
            index: self.fetch(&a.index[0], n)?,
            cells,
        })
    }
}

mod groups;
#[cfg(all(test, hinoki_emulator))]
mod tests;
