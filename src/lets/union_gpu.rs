//! The local tree and the received LETs merged into one tree on the device (`cuda/union.cu`):
//! the cells of [`union_tree`](super::union::union_tree), with the same moments, boxes and
//! S_eff, laid out for the list walk instead of in preorder: the merged cells first (the root
//! first), then the pseudo cells through which a merged cell of more than 8 children reaches
//! them, then the local tree's cells and the forest's as they are; particles the local ones,
//! then the forest's.

use super::wire::malformed_keys;
use crate::error::Result;
use crate::gpu::args::{TreeArrays, UnionArgs};
use crate::gpu::launch::{grow, DeviceArray, KernelRunner};
use crate::gpu::stages::{blocks, int, Stages};
use crate::tree::build_gpu::DeviceTree;
use crate::tree::{DeviceCells, TreeParams, MAX_LEVEL};
use crate::walk::mac::Mac;

/// Words of the first phase's summary (`union_summary`).
const SUMMARY: usize = 4;

/// A merged tree on the device.
#[derive(Clone, Copy, Debug)]
pub struct MergedTree {
    /// Its arrays (the walk reads them from cell 0, the root).
    pub arrays: TreeArrays,
    /// Its cells.
    pub cells: usize,
    /// Its merged cells.
    pub merged: usize,
    /// The tree levels its pseudo cells add to the deepest level, at most.
    pub extra_levels: usize,
}

/// Where the forest [`UnionArrays::merge`] takes lies: its arrays, cells and particles.
#[derive(Clone, Copy, Debug)]
pub struct Forest {
    /// Its arrays on the device.
    pub arrays: TreeArrays,
    /// Its cells.
    pub cells: usize,
    /// Its particles.
    pub particles: usize,
}

/// The device arrays of the merge, grown as needed and kept across evaluations.
pub struct UnionArrays<R: KernelRunner> {
    local_keys: R::Array<u64>,
    forest_keys: R::Array<u64>,
    table_key: R::Array<u64>,
    table_count: R::Array<u32>,
    table_leader: R::Array<u32>,
    table_local: R::Array<u32>,
    table_merged: R::Array<u32>,
    slot_of: R::Array<u32>,
    leads: R::Array<u32>,
    part_counts: R::Array<u32>,
    merged_key: R::Array<u64>,
    merged_first: R::Array<u32>,
    merged_parts: R::Array<u32>,
    merged_fill: R::Array<u32>,
    pseudo: R::Array<u32>,
    octants: R::Array<u32>,
    parts: R::Array<u32>,
    extra_levels: R::Array<u32>,
    summary: R::Array<u32>,
    bad: R::Array<u32>,
    /// The merged tree's cells and particles (4 floats each).
    cells: DeviceCells<R>,
    particles: R::Array<f32>,
}

impl<R: KernelRunner> UnionArrays<R> {
    /// Empty arrays on the stage program's device.
    pub fn new(s: &Stages<R>) -> Result<Self> {
        let r = s.runner();
        Ok(Self {
            local_keys: r.alloc(1)?,
            forest_keys: r.alloc(1)?,
            table_key: r.alloc(1)?,
            table_count: r.alloc(1)?,
            table_leader: r.alloc(1)?,
            table_local: r.alloc(1)?,
            table_merged: r.alloc(1)?,
            slot_of: r.alloc(1)?,
            leads: r.alloc(1)?,
            part_counts: r.alloc(1)?,
            merged_key: r.alloc(1)?,
            merged_first: r.alloc(1)?,
            merged_parts: r.alloc(1)?,
            merged_fill: r.alloc(1)?,
            pseudo: r.alloc(1)?,
            octants: r.alloc(1)?,
            parts: r.alloc(1)?,
            extra_levels: r.alloc(MAX_LEVEL as usize + 1)?,
            summary: r.alloc(SUMMARY)?,
            bad: r.alloc(1)?,
            cells: DeviceCells::alloc(r, 1)?,
            particles: r.alloc(1)?,
        })
    }

    /// Bytes held on the device.
    pub fn device_bytes(&self) -> usize {
        8 * (self.local_keys.len()
            + self.forest_keys.len()
            + self.table_key.len()
            + self.merged_key.len())
            + 4 * (self.table_count.len()
                + self.table_leader.len()
                + self.table_local.len()
                + self.table_merged.len()
                + self.slot_of.len()
                + self.leads.len()
                + self.part_counts.len()
                + self.merged_first.len()
                + self.merged_parts.len()
                + self.merged_fill.len()
                + self.pseudo.len()
                + self.octants.len()
                + self.parts.len()
                + self.extra_levels.len()
                + self.summary.len()
                + self.bad.len()
                + self.particles.len())
            + self.cells.bytes()
    }

    /// Room for the key cells of a forest of `cells` cells (u64 each), which the LETs'
    /// unpacking writes; its device address.
    pub fn forest_keys(&mut self, s: &Stages<R>, cells: usize) -> Result<u64> {
        grow(s.runner(), &mut self.forest_keys, cells)?;
        Ok(self.forest_keys.ptr())
    }

    /// The local tree `local` (its boxes at the rebuild at device address `built`, built with
    /// `tp`) and `forest` (whose key cells [`UnionArrays::forest_keys`] holds) merged into one
    /// tree; `link` makes the lists of children of the cells of a tree from a first cell on
    /// (the walk's, [`crate::walk::gpu::GpuWalk::link`]) and returns where they are, which
    /// the merged cells' lists then join. The host waits for the device once, for the sizes;
    /// [`UnionArrays::check`] tells, once the tree is walked, whether the LETs' key cells
    /// nested (a tree of keys that do not is walked safely, but its results are wrong).
    pub fn merge(
        &mut self,
        s: &Stages<R>,
        (local, built): (&DeviceTree, u64),
        forest: Forest,
        tp: &TreeParams,
        link: impl FnOnce(TreeArrays, usize, usize) -> Result<u64>,
    ) -> Result<MergedTree> {
        let r = s.runner();
        let (nl, nf) = (local.cells, forest.cells);
        let slots = (2 * nf).next_power_of_two().max(64);
        grow(r, &mut self.local_keys, nl)?;
        grow(r, &mut self.table_key, slots)?;
        for a in [
            &mut self.table_count,
            &mut self.table_leader,
            &mut self.table_local,
            &mut self.table_merged,
        ] {
            grow(r, a, slots)?;
        }
        for a in [
            &mut self.slot_of,
            &mut self.merged_first,
            &mut self.merged_parts,
            &mut self.merged_fill,
        ] {
            grow(r, a, nf)?;
        }
        for a in [&mut self.leads, &mut self.part_counts, &mut self.pseudo] {
            grow(r, a, nf + 1)?;
        }
        grow(r, &mut self.merged_key, nf)?;
        grow(r, &mut self.octants, 8 * nf)?;
        // A group's parts: its forest cells and at most one local cell.
        grow(r, &mut self.parts, 2 * nf)?;
        r.fill(&mut self.pseudo, nf + 1, 0)?;
        r.fill(&mut self.table_key, slots, 0)?;
        r.fill(&mut self.table_count, slots, 0)?;
        r.fill(&mut self.table_leader, slots, u32::MAX)?;
        r.fill(&mut self.table_local, slots, u32::MAX)?;
        r.fill(&mut self.extra_levels, MAX_LEVEL as usize + 1, 0)?;
        r.fill(&mut self.bad, 1, u32::MAX)?;
        let mut a = UnionArgs {
            local: local.arrays,
            n_local: int(nl)?,
            n_local_particles: int(local.particles)?,
            built,
            forest: forest.arrays,
            n_forest: int(nf)?,
            n_forest_particles: int(forest.particles)?,
            local_keys: self.local_keys.ptr(),
            forest_keys: self.forest_keys.ptr(),
            slots: int(slots)?,
            table_key: self.table_key.ptr(),
            table_count: self.table_count.ptr(),
            table_leader: self.table_leader.ptr(),
            table_local: self.table_local.ptr(),
            table_merged: self.table_merged.ptr(),
            slot_of: self.slot_of.ptr(),
            leads: self.leads.ptr(),
            part_counts: self.part_counts.ptr(),
            merged_key: self.merged_key.ptr(),
            merged_first: self.merged_first.ptr(),
            merged_parts: self.merged_parts.ptr(),
            merged_fill: self.merged_fill.ptr(),
            pseudo: self.pseudo.ptr(),
            octants: self.octants.ptr(),
            parts: self.parts.ptr(),
            n_merged: 0,
            n_front: 0,
            extra_levels: self.extra_levels.ptr(),
            summary: self.summary.ptr(),
            tree: self.cells.arrays(self.particles.ptr(), 0),
            children: 0,
            n_cells: 0,
            mac: (tp.mac != Mac::BarnesHut) as i32,
            theta: tp.theta,
            bad: self.bad.ptr(),
        };
        // SAFETY (every launch below): the argument block of the union kernels, whose arrays
        // were grown above for the local tree's cells, the forest's, the table's slots and
        // (after the scans) the merged cells, their parts and the union's cells.
        let launch = |name: &str, items: usize, a: &UnionArgs| -> Result<()> {
            match items {
                0 => Ok(()),
                n => unsafe { s.launch(name, blocks(n), a) },
            }
        };
        launch("union_local_keys", nl, &a)?;
        launch("union_insert", nf, &a)?;
        launch("union_local_match", nl, &a)?;
        launch("union_leaders", nf, &a)?;
        // The merged cells and their parts' places (the totals at nf), without the host.
        s.scan(self.leads.ptr(), nf + 1)?;
        s.scan(self.part_counts.ptr(), nf + 1)?;
        launch("union_groups", nf, &a)?;
        launch("union_members", nf, &a)?;
        launch("union_count", nf, &a)?;
        s.scan(self.pseudo.ptr(), nf + 1)?;
        launch("union_summary", 1, &a)?;
        let [merged, _parts, pseudo, extra] = s
            .fetch(&self.summary, SUMMARY)?
            .try_into()
            .map(|v: [u32; SUMMARY]| v.map(|x| x as usize))
            .expect("SUMMARY words");
        a.n_merged = int(merged)?;
        let front = merged + pseudo;
        let cells = front + nl + nf;
        self.cells.reserve(r, cells)?;
        grow(
            r,
            &mut self.particles,
            4 * (local.particles + forest.particles),
        )?;
        a.tree = self.cells.arrays(self.particles.ptr(), 0);
        a.n_front = int(front)?;
        a.n_cells = int(cells)?;
        launch(
            "union_copy",
            nl + nf + local.particles + forest.particles,
            &a,
        )?;
        a.children = link(a.tree, front, cells)?;
        launch("union_cells", merged, &a)?;
        Ok(MergedTree {
            arrays: a.tree,
            cells,
            merged,
            extra_levels: extra,
        })
    }

    /// After the walk of the last merged tree: an error where the LETs' key cells did not
    /// nest.
    pub fn check(&self, s: &Stages<R>) -> Result<()> {
        match s.fetch(&self.bad, 1)?[0] {
            u32::MAX => Ok(()),
            _ => Err(malformed_keys()),
        }
    }
}
