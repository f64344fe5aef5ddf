//! Device buffers of the walk, allocated once and grown (never shrunk) as N grows, so a run does
//! no per-step allocation. Before growing, free device memory is checked against the need.

use crate::error::{Error, Result};
use crate::tree::{FlatTree, Tree};
use crate::walk::cpu::WalkOutput;
use crate::walk::groups::Group;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use rayon::prelude::*;
use std::sync::Arc;

/// Headroom factor when a buffer grows, so slowly growing N does not reallocate every step.
const GROWTH: f64 = 1.25;

/// The walk's device arrays (flat f32/i32/u32 views of the node and target arrays).
pub(super) struct Buffers {
    stream: Arc<CudaStream>,
    pub pos_mass: CudaSlice<f32>,
    pub size: CudaSlice<f32>,
    pub next: CudaSlice<i32>,
    pub more: CudaSlice<i32>,
    pub cell_box: CudaSlice<f32>,
    pub leaf_count: CudaSlice<i32>,
    pub quad_a: CudaSlice<f32>,
    pub quad_b: CudaSlice<f32>,
    pub targets: CudaSlice<f32>,
    pub groups: CudaSlice<u32>,
    pub out: CudaSlice<f32>,
    pub counts: CudaSlice<u32>,
    /// Host staging for cell boxes, split quadrupoles and leaf counts.
    staging: (Vec<f32>, Vec<f32>, Vec<f32>, Vec<i32>),
}

fn empty<T: DeviceRepr + ValidAsZeroBits>(s: &Arc<CudaStream>) -> Result<CudaSlice<T>> {
    s.alloc_zeros::<T>(1)
        .map_err(|e| Error::device(format!("CUDA allocation failed: {e}")))
}

impl Buffers {
    pub fn new(stream: Arc<CudaStream>) -> Result<Self> {
        Ok(Self {
            pos_mass: empty(&stream)?,
            size: empty(&stream)?,
            next: empty(&stream)?,
            more: empty(&stream)?,
            cell_box: empty(&stream)?,
            leaf_count: empty(&stream)?,
            quad_a: empty(&stream)?,
            quad_b: empty(&stream)?,
            targets: empty(&stream)?,
            groups: empty(&stream)?,
            out: empty(&stream)?,
            counts: empty(&stream)?,
            staging: Default::default(),
            stream,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        4 * (self.pos_mass.len()
            + self.size.len()
            + self.next.len()
            + self.more.len()
            + self.cell_box.len()
            + self.leaf_count.len()
            + self.quad_a.len()
            + self.quad_b.len()
            + self.targets.len()
            + self.groups.len()
            + self.out.len()
            + self.counts.len())
    }

    /// Grows every buffer that is too small for `nodes` nodes, `cells` cells and `nt` targets,
    /// after checking that the device has the memory.
    fn reserve(&mut self, nodes: usize, cells: usize, nt: usize, ng: usize) -> Result<()> {
        let need = [
            (self.pos_mass.len(), 4 * nodes),
            (self.size.len(), nodes),
            (self.next.len(), nodes),
            (self.more.len(), nodes),
            (self.cell_box.len(), 4 * cells),
            (self.leaf_count.len(), cells),
            (self.quad_a.len(), 4 * cells),
            (self.quad_b.len(), 2 * cells),
            (self.targets.len(), 4 * nt),
            (self.groups.len(), 2 * ng),
            (self.out.len(), 4 * nt),
            (self.counts.len(), 2 * nt),
        ];
        let extra: usize = need
            .iter()
            .filter(|(have, want)| have < want)
            .map(|(_, want)| (*want as f64 * GROWTH) as usize * 4)
            .sum();
        if extra == 0 {
            return Ok(());
        }
        let (free, total) = self
            .stream
            .context()
            .mem_get_info()
            .map_err(|e| Error::device(format!("CUDA memory query failed: {e}")))?;
        if extra > free {
            return Err(Error::device(format!(
                "not enough GPU memory: the walk needs {:.2} GiB more but only {:.2} GiB of {:.2} GiB are free",
                extra as f64 / (1u64 << 30) as f64,
                free as f64 / (1u64 << 30) as f64,
                total as f64 / (1u64 << 30) as f64
            )));
        }
        let s = self.stream.clone();
        grow(&s, &mut self.pos_mass, 4 * nodes)?;
        grow(&s, &mut self.size, nodes)?;
        grow(&s, &mut self.next, nodes)?;
        grow(&s, &mut self.more, nodes)?;
        grow(&s, &mut self.cell_box, 4 * cells)?;
        grow(&s, &mut self.leaf_count, cells)?;
        grow(&s, &mut self.quad_a, 4 * cells)?;
        grow(&s, &mut self.quad_b, 2 * cells)?;
        grow(&s, &mut self.targets, 4 * nt)?;
        grow(&s, &mut self.groups, 2 * ng)?;
        grow(&s, &mut self.out, 4 * nt)?;
        grow(&s, &mut self.counts, 2 * nt)?;
        Ok(())
    }

    /// Copies the tree, the targets and their groups to the device (growing buffers as needed).
    pub fn upload(
        &mut self,
        tree: &Tree,
        flat: &FlatTree,
        targets: &[[f32; 4]],
        groups: &[Group],
    ) -> Result<()> {
        let nodes = flat.pos_mass.len();
        let cells = &tree.cells;
        let nc = cells.len();
        self.reserve(nodes, nc, targets.len(), groups.len())?;
        let (boxes, qa, qb, leaf) = &mut self.staging;
        boxes.clear();
        qa.clear();
        qb.clear();
        leaf.clear();
        leaf.par_extend((0..nc).into_par_iter().map(|c| {
            if cells.is_leaf(c) {
                cells.count[c] as i32
            } else {
                0
            }
        }));
        boxes.par_extend((0..nc).into_par_iter().flat_map_iter(|c| {
            let ce = cells.centre[c];
            [ce[0], ce[1], ce[2], cells.half[c]]
        }));
        qa.par_extend(
            cells
                .quad
                .par_iter()
                .flat_map_iter(|q| [q[0], q[1], q[2], q[3]]),
        );
        qb.par_extend(cells.quad.par_iter().flat_map_iter(|q| [q[4], q[5]]));
        let s = &self.stream;
        let err =
            |e: cudarc::driver::DriverError| Error::device(format!("CUDA upload failed: {e}"));
        s.memcpy_htod(
            bytemuck::cast_slice::<[f32; 4], f32>(&flat.pos_mass),
            &mut self.pos_mass.slice_mut(..4 * nodes),
        )
        .map_err(err)?;
        s.memcpy_htod(&flat.size[..], &mut self.size.slice_mut(..nodes))
            .map_err(err)?;
        s.memcpy_htod(&flat.next[..], &mut self.next.slice_mut(..nodes))
            .map_err(err)?;
        s.memcpy_htod(&flat.more[..], &mut self.more.slice_mut(..nodes))
            .map_err(err)?;
        s.memcpy_htod(&boxes[..], &mut self.cell_box.slice_mut(..4 * nc))
            .map_err(err)?;
        s.memcpy_htod(&leaf[..], &mut self.leaf_count.slice_mut(..nc))
            .map_err(err)?;
        s.memcpy_htod(&qa[..], &mut self.quad_a.slice_mut(..4 * nc))
            .map_err(err)?;
        s.memcpy_htod(&qb[..], &mut self.quad_b.slice_mut(..2 * nc))
            .map_err(err)?;
        s.memcpy_htod(
            bytemuck::cast_slice::<[f32; 4], f32>(targets),
            &mut self.targets.slice_mut(..4 * targets.len()),
        )
        .map_err(err)?;
        s.memcpy_htod(
            bytemuck::cast_slice::<Group, u32>(groups),
            &mut self.groups.slice_mut(..2 * groups.len()),
        )
        .map_err(err)?;
        Ok(())
    }

    /// Copies `n` sources (x, y, z, m) for direct summation to the device.
    pub fn upload_sources(&mut self, pos_mass: &[[f32; 4]]) -> Result<()> {
        let n = pos_mass.len();
        self.reserve(n, 0, n, 0)?;
        self.stream
            .memcpy_htod(
                bytemuck::cast_slice::<[f32; 4], f32>(pos_mass),
                &mut self.pos_mass.slice_mut(..4 * n),
            )
            .map_err(|e| Error::device(format!("CUDA upload failed: {e}")))
    }

    /// Copies the results for `nt` targets back, straight into the output arrays.
    pub fn download(&mut self, nt: usize) -> Result<WalkOutput> {
        let err =
            |e: cudarc::driver::DriverError| Error::device(format!("CUDA download failed: {e}"));
        let mut acc_pot = vec![[0.0f32; 4]; nt];
        let mut counts = vec![[0u32; 2]; nt];
        self.stream
            .memcpy_dtoh(
                &self.out.slice(..4 * nt),
                bytemuck::cast_slice_mut::<[f32; 4], f32>(&mut acc_pot),
            )
            .map_err(err)?;
        self.stream
            .memcpy_dtoh(
                &self.counts.slice(..2 * nt),
                bytemuck::cast_slice_mut::<[u32; 2], u32>(&mut counts),
            )
            .map_err(err)?;
        self.stream.synchronize().map_err(err)?;
        Ok(WalkOutput {
            acc_pot,
            p2p: counts.par_iter().map(|c| c[0]).collect(),
            m2p: counts.par_iter().map(|c| c[1]).collect(),
        })
    }
}

/// Replaces `buf` by a larger allocation (with headroom) when it holds fewer than `len` elements.
fn grow<T: DeviceRepr + ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    len: usize,
) -> Result<()> {
    if buf.len() >= len {
        return Ok(());
    }
    let n = ((len as f64 * GROWTH) as usize).max(len);
    *buf = s
        .alloc_zeros::<T>(n)
        .map_err(|e| Error::device(format!("CUDA allocation of {n} elements failed: {e}")))?;
    Ok(())
}
