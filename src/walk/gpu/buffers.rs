//! Device buffers of the walk, allocated once and grown (never shrunk) as N grows, so a run does
//! no per-step allocation. Before growing, free device memory is checked against the need.
//!
//! The tree goes up as it is on the host (the sorted particles and the cells' arrays), viewed
//! as flat f32/u32/u8 slices: no staging copy and no threaded node arrays.

use crate::error::{Error, Result};
use crate::tree::Tree;
use crate::walk::cpu::WalkOutput;
use crate::walk::groups::Group;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaViewMut, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};
use rayon::prelude::*;
use std::sync::Arc;

/// Headroom factor when a buffer grows, so slowly growing N does not reallocate every step.
const GROWTH: f64 = 1.25;

/// The walk's device arrays.
pub(super) struct Buffers {
    stream: Arc<CudaStream>,
    /// Sorted particles (x, y, z, m) as 4 floats each; the sources of direct summation too.
    pub particles: CudaSlice<f32>,
    pub com_mass: CudaSlice<f32>,
    pub s_eff: CudaSlice<f32>,
    pub boxes: CudaSlice<f32>,
    pub subtree: CudaSlice<u32>,
    pub first: CudaSlice<u32>,
    pub count: CudaSlice<u32>,
    pub nchild: CudaSlice<u8>,
    pub quad: CudaSlice<f32>,
    pub trace: CudaSlice<f32>,
    pub targets: CudaSlice<f32>,
    pub groups: CudaSlice<u32>,
    pub out: CudaSlice<f32>,
    pub counts: CudaSlice<u32>,
    /// The list kernel's control words: the next group to take, and a stack-overflow flag.
    pub control: CudaSlice<u32>,
    /// The list kernel's per-warp stacks of cell indices.
    pub stacks: CudaSlice<u32>,
    /// The list kernel's children of every cell, 8 slots per cell.
    pub children: CudaSlice<u32>,
    /// Page-locked host copies of `out` and `counts`: the device copies into them at full
    /// bus speed, then the host unpacks them in parallel.
    host_out: Option<PinnedHostSlice<f32>>,
    host_counts: Option<PinnedHostSlice<u32>>,
    /// Page-locked staging buffers of the upload, one per element type.
    stage_f32: Option<PinnedHostSlice<f32>>,
    stage_u32: Option<PinnedHostSlice<u32>>,
    stage_u8: Option<PinnedHostSlice<u8>>,
}

fn empty<T: DeviceRepr + ValidAsZeroBits>(s: &Arc<CudaStream>) -> Result<CudaSlice<T>> {
    s.alloc_zeros::<T>(1)
        .map_err(|e| Error::device(format!("CUDA allocation failed: {e}")))
}

fn upload_err(e: cudarc::driver::DriverError) -> Error {
    Error::device(format!("CUDA upload failed: {e}"))
}

impl Buffers {
    pub fn new(stream: Arc<CudaStream>) -> Result<Self> {
        Ok(Self {
            particles: empty(&stream)?,
            com_mass: empty(&stream)?,
            s_eff: empty(&stream)?,
            boxes: empty(&stream)?,
            subtree: empty(&stream)?,
            first: empty(&stream)?,
            count: empty(&stream)?,
            nchild: empty(&stream)?,
            quad: empty(&stream)?,
            trace: empty(&stream)?,
            targets: empty(&stream)?,
            groups: empty(&stream)?,
            out: empty(&stream)?,
            counts: empty(&stream)?,
            control: stream
                .alloc_zeros::<u32>(2)
                .map_err(|e| Error::device(format!("CUDA allocation failed: {e}")))?,
            stacks: empty(&stream)?,
            children: empty(&stream)?,
            host_out: None,
            host_counts: None,
            stage_f32: None,
            stage_u32: None,
            stage_u8: None,
            stream,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        4 * (self.particles.len()
            + self.com_mass.len()
            + self.s_eff.len()
            + self.boxes.len()
            + self.subtree.len()
            + self.first.len()
            + self.count.len()
            + self.quad.len()
            + self.trace.len()
            + self.targets.len()
            + self.groups.len()
            + self.out.len()
            + self.counts.len()
            + self.control.len()
            + self.stacks.len()
            + self.children.len())
            + self.nchild.len()
    }

    /// Grows every buffer that is too small for `n` particles, `nc` cells, `nt` targets and
    /// `ng` groups, after checking that the device has the memory.
    fn reserve(&mut self, n: usize, nc: usize, nt: usize, ng: usize) -> Result<()> {
        let need: [(usize, usize, usize); 14] = [
            (self.particles.len(), 4 * n, 4),
            (self.com_mass.len(), 4 * nc, 4),
            (self.s_eff.len(), nc, 4),
            (self.boxes.len(), 4 * nc, 4),
            (self.subtree.len(), nc, 4),
            (self.first.len(), nc, 4),
            (self.count.len(), nc, 4),
            (self.nchild.len(), nc, 1),
            (self.quad.len(), 6 * nc, 4),
            (self.trace.len(), nc, 4),
            (self.targets.len(), 4 * nt, 4),
            (self.groups.len(), 2 * ng, 4),
            (self.out.len(), 4 * nt, 4),
            (self.counts.len(), 2 * nt, 4),
        ];
        let extra: usize = need
            .iter()
            .filter(|(have, want, _)| have < want)
            .map(|(_, want, size)| (*want as f64 * GROWTH) as usize * size)
            .sum();
        if extra == 0 {
            return Ok(());
        }
        self.check_free(extra)?;
        let s = self.stream.clone();
        grow(&s, &mut self.particles, 4 * n)?;
        grow(&s, &mut self.com_mass, 4 * nc)?;
        grow(&s, &mut self.s_eff, nc)?;
        grow(&s, &mut self.boxes, 4 * nc)?;
        grow(&s, &mut self.subtree, nc)?;
        grow(&s, &mut self.first, nc)?;
        grow(&s, &mut self.count, nc)?;
        grow(&s, &mut self.nchild, nc)?;
        grow(&s, &mut self.quad, 6 * nc)?;
        grow(&s, &mut self.trace, nc)?;
        grow(&s, &mut self.targets, 4 * nt)?;
        grow(&s, &mut self.groups, 2 * ng)?;
        grow(&s, &mut self.out, 4 * nt)?;
        grow(&s, &mut self.counts, 2 * nt)?;
        Ok(())
    }

    /// Fails with needed versus free memory when the device cannot hold `extra` more bytes.
    fn check_free(&self, extra: usize) -> Result<()> {
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
        Ok(())
    }

    /// Grows the list kernel's stacks to `stack_len` cell indices and its child lists to `nc`
    /// cells (after checking free memory), and clears its control words.
    pub fn prepare_list(&mut self, stack_len: usize, nc: usize) -> Result<()> {
        let s = self.stream.clone();
        if self.stacks.len() < stack_len {
            self.check_free(4 * stack_len)?;
            // Exactly `stack_len`: the stacks depend on the GPU's resident warps, not on N.
            self.stacks = s
                .alloc_zeros::<u32>(stack_len)
                .map_err(|e| Error::device(format!("CUDA allocation failed: {e}")))?;
        }
        if self.children.len() < 8 * nc {
            self.check_free(((8 * nc) as f64 * GROWTH) as usize * 4)?;
            grow(&s, &mut self.children, 8 * nc)?;
        }
        self.stream
            .memset_zeros(&mut self.control)
            .map_err(|e| Error::device(format!("CUDA memset failed: {e}")))
    }

    /// The list kernel's stack-overflow flag after a walk.
    pub fn list_overflowed(&mut self) -> Result<bool> {
        let flags = self
            .stream
            .clone_dtoh(&self.control)
            .map_err(|e| Error::device(format!("CUDA download failed: {e}")))?;
        Ok(flags[1] != 0)
    }

    /// Copies the tree, the targets and their groups to the device (growing buffers as needed),
    /// through page-locked staging buffers: the host arrays are copied into them in parallel,
    /// then each goes up by DMA at full bus speed.
    pub fn upload(&mut self, tree: &Tree, targets: &[[f32; 4]], groups: &[Group]) -> Result<()> {
        let n = tree.particles.len();
        let cells = &tree.cells;
        let nc = cells.len();
        let nt = targets.len();
        self.reserve(n, nc, nt, groups.len())?;
        let flat4 = bytemuck::cast_slice::<[f32; 4], f32>;
        let ctx = self.stream.context().clone();
        upload_staged(
            &self.stream,
            pinned(&ctx, &mut self.stage_f32, 4 * n + 16 * nc + 4 * nt)?,
            vec![
                (flat4(&tree.particles), self.particles.slice_mut(..4 * n)),
                (flat4(&cells.com_mass), self.com_mass.slice_mut(..4 * nc)),
                (&cells.s_eff[..], self.s_eff.slice_mut(..nc)),
                (flat4(&cells.boxes), self.boxes.slice_mut(..4 * nc)),
                (
                    bytemuck::cast_slice::<[f32; 6], f32>(&cells.quad),
                    self.quad.slice_mut(..6 * nc),
                ),
                (&cells.trace[..], self.trace.slice_mut(..nc)),
                (flat4(targets), self.targets.slice_mut(..4 * nt)),
            ],
        )?;
        upload_staged(
            &self.stream,
            pinned(&ctx, &mut self.stage_u32, 3 * nc + 2 * groups.len())?,
            vec![
                (&cells.subtree[..], self.subtree.slice_mut(..nc)),
                (&cells.first[..], self.first.slice_mut(..nc)),
                (&cells.count[..], self.count.slice_mut(..nc)),
                (
                    bytemuck::cast_slice::<Group, u32>(groups),
                    self.groups.slice_mut(..2 * groups.len()),
                ),
            ],
        )?;
        upload_staged(
            &self.stream,
            pinned(&ctx, &mut self.stage_u8, nc)?,
            vec![(&cells.nchild[..], self.nchild.slice_mut(..nc))],
        )
    }

    /// Copies `n` sources (x, y, z, m) for direct summation to the device.
    pub fn upload_sources(&mut self, pos_mass: &[[f32; 4]]) -> Result<()> {
        let n = pos_mass.len();
        self.reserve(n, 0, n, 0)?;
        self.stream
            .memcpy_htod(
                bytemuck::cast_slice::<[f32; 4], f32>(pos_mass),
                &mut self.particles.slice_mut(..4 * n),
            )
            .map_err(upload_err)
    }

    /// Copies the results for `nt` targets back through page-locked host buffers.
    pub fn download(&mut self, nt: usize) -> Result<WalkOutput> {
        let err =
            |e: cudarc::driver::DriverError| Error::device(format!("CUDA download failed: {e}"));
        let ctx = self.stream.context().clone();
        let out_host = pinned(&ctx, &mut self.host_out, 4 * nt)?;
        self.stream
            .memcpy_dtoh(&self.out.slice(..4 * nt), out_host)
            .map_err(err)?;
        let counts_host = pinned(&ctx, &mut self.host_counts, 2 * nt)?;
        self.stream
            .memcpy_dtoh(&self.counts.slice(..2 * nt), counts_host)
            .map_err(err)?;
        self.stream.synchronize().map_err(err)?;
        let acc = &out_host_slice(&self.host_out)?[..4 * nt];
        let counts = &out_host_slice(&self.host_counts)?[..2 * nt];
        Ok(WalkOutput {
            acc_pot: acc
                .par_chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect(),
            p2p: counts.par_chunks_exact(2).map(|c| c[0]).collect(),
            m2p: counts.par_chunks_exact(2).map(|c| c[1]).collect(),
        })
    }
}

/// Copies each host slice of `parts` into its device view through the page-locked `stage`:
/// all slices into the stage first (in parallel), then one DMA copy each.
fn upload_staged<T: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync>(
    stream: &Arc<CudaStream>,
    stage: &mut PinnedHostSlice<T>,
    mut parts: Vec<(&[T], CudaViewMut<'_, T>)>,
) -> Result<()> {
    let mut rest = stage.as_mut_slice().map_err(upload_err)?;
    let mut regions = Vec::with_capacity(parts.len());
    for (src, _) in &parts {
        let (region, tail) = rest.split_at_mut(src.len());
        regions.push(region);
        rest = tail;
    }
    const CHUNK: usize = 1 << 16;
    regions
        .par_iter_mut()
        .zip(parts.par_iter())
        .for_each(|(region, (src, _))| {
            region
                .par_chunks_mut(CHUNK)
                .zip(src.par_chunks(CHUNK))
                .for_each(|(d, s)| d.copy_from_slice(s));
        });
    for (region, (_, dst)) in regions.iter().zip(parts.iter_mut()) {
        stream.memcpy_htod(&region[..], dst).map_err(upload_err)?;
    }
    // The copies from page-locked memory are asynchronous: the stage is not to be written
    // again before they are done.
    stream.synchronize().map_err(upload_err)
}

/// The page-locked buffer in `slot`, (re)allocated when it holds fewer than `len` elements.
fn pinned<'a, T: DeviceRepr>(
    ctx: &Arc<CudaContext>,
    slot: &'a mut Option<PinnedHostSlice<T>>,
    len: usize,
) -> Result<&'a mut PinnedHostSlice<T>> {
    if !matches!(slot, Some(p) if p.len() >= len) {
        let n = ((len as f64 * GROWTH) as usize).max(len);
        // SAFETY: plain page-locked memory (flags 0); every element read is first written by a
        // device-to-host copy.
        let buf = unsafe { ctx.alloc_pinned_with_flags::<T>(n, 0) }
            .map_err(|e| Error::device(format!("page-locked host allocation failed: {e}")))?;
        *slot = Some(buf);
    }
    slot.as_mut()
        .ok_or_else(|| Error::device("page-locked host buffer missing"))
}

/// The contents of a page-locked buffer after the stream has synchronised.
fn out_host_slice<T: ValidAsZeroBits>(slot: &Option<PinnedHostSlice<T>>) -> Result<&[T]> {
    slot.as_ref()
        .ok_or_else(|| Error::device("page-locked host buffer missing"))?
        .as_slice()
        .map_err(|e| Error::device(format!("CUDA download failed: {e}")))
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
