//! Checkpoints: the complete state of a run, one file per rank, from which `hinoki run
//! --restart` continues bit for bit.
//!
//! A checkpoint directory (`OUT/checkpoint`) holds two generations, `rank{r:05}.{slot}.ckpt`
//! with slot 0 and 1 used in turn, so that the previous good checkpoint survives while the next
//! is written (each file is written to a temporary file and renamed, see
//! [`crate::io::write_atomic`]).
//!
//! File layout (all integers little-endian):
//! - magic `HINOKICK` (8 bytes), header length `h` (u64);
//! - the header, `h` bytes of JSON: format version, sequence number, step, tick, time, config
//!   hash, rank, size, particle counts, force evaluations, the diagnostics baseline and the last
//!   diagnostics, the tree-rebuild clock (`since_rebuild`, `rebuild_clock`,
//!   `walk_references`, `backoff`, `refits_trusted`, `last_refit`), the number of cells of the
//!   saved tree (`tree_cells`, 0: none), its frame's key cube (`tree_grid`), centre
//!   (`tree_centre`) and whether it is a periodic box (`tree_periodic`), the last domain
//!   decomposition's key cube (`domain_grid`) and splitters (`domain_splitters`, empty: none),
//!   and the byte length of every array;
//! - the arrays, raw: `pos`, `vel` (3 f64 per particle), `mass` (f64), `id` (u64), `bin` (u8),
//!   `acc` (3 f64), `pot` (f64), `cost` (f64: interactions of the last evaluation);
//! - with a saved tree (a run with `[gravity] rebuild` ≠ 1 stopped between two rebuilds, see
//!   [`crate::forces::rebuild`]): its particle order `tree_index` (u32 per particle) and per
//!   cell `tree_first`, `tree_count`, `tree_subtree` (u32), `tree_level`, `tree_nchild` (u8)
//!   and `tree_boxes` (4 f32: the box at the rebuild, in the frame), so that the restarted run
//!   refits the very tree the uninterrupted run would have;
//! - the XXH64 checksum (u64) of every byte before it.
//!
//! Version 2 files (written before the rebuild interval existed) are read too, as "rebuild the
//! tree at the next evaluation": bit for bit the uninterrupted run with `rebuild = 1`; so are
//! version 3 files (written before trees were built in a frame), without their tree, and
//! version 4 files (written before the domains were saved), without domains, and version 5
//! files (written before the rebuild clock compared walks by class of walked particles), their
//! one reference rate taken as that of their last walk's class.

use crate::comm::Comm;
use crate::diag::conservation::Conserved;
use crate::domain::Domains;
use crate::error::{Error, Result};
use crate::forces::rebuild::{walk_class, RebuildClock, TreeTopology, WALK_CLASSES};
use crate::forces::EngineState;
use crate::integrate::IntegratorState;
use crate::io::config::IcsConfig;
use crate::io::xxh64::Xxh64;
use crate::io::{write_atomic, RunConfig};
use crate::particles::Particles;
use crate::sfc::{Frame, GridBox};
use crate::simulation::RunState;
use glam::DVec3;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

// The arrays are written as the machine holds them, which must be little-endian.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "checkpoints assume little-endian"
);

const MAGIC: &[u8; 8] = b"HINOKICK";
/// The layout version this hinoki writes (and reads, with [`OLD_VERSION`],
/// [`UNFRAMED_VERSION`], [`UNDIVIDED_VERSION`] and [`ONE_REFERENCE_VERSION`]).
const VERSION: u32 = 6;
/// The layout whose rebuild clock holds one reference rate (before the classes of walked
/// particles, [`crate::forces::rebuild::walk_class`]): read as that of its last walk's class.
const ONE_REFERENCE_VERSION: u32 = 5;
/// The layout before the domains were saved: read without them (the next rebalance comes
/// from the load imbalance alone until a decomposition).
const UNDIVIDED_VERSION: u32 = 4;
/// The older layout still read: no tree-rebuild state.
const OLD_VERSION: u32 = 2;
/// The layout whose saved tree is in absolute coordinates (before [`crate::sfc::Frame`]): read
/// without it (the tree is rebuilt at the next evaluation).
const UNFRAMED_VERSION: u32 = 3;
/// The arrays of a checkpoint, in file order, with their bytes per particle.
const ARRAYS: [(&str, usize); 8] = [
    ("pos", 24),
    ("vel", 24),
    ("mass", 8),
    ("id", 8),
    ("bin", 1),
    ("acc", 24),
    ("pot", 8),
    ("cost", 8),
];
/// The arrays of a saved tree, after the particle arrays: (name, bytes per particle, bytes
/// per cell).
const TREE_ARRAYS: [(&str, usize, usize); 7] = [
    ("tree_index", 4, 0),
    ("tree_first", 0, 4),
    ("tree_count", 0, 4),
    ("tree_subtree", 0, 4),
    ("tree_level", 0, 1),
    ("tree_nchild", 0, 1),
    ("tree_boxes", 0, 16),
];

/// The JSON header of a checkpoint file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    version: u32,
    /// Checkpoints written by this run before this one (slot = sequence % 2).
    sequence: u64,
    step: u64,
    ti: u64,
    /// Time (time units), for people reading the header.
    time: f64,
    /// XXH64 of the configuration that decides the run's future, in hex.
    config_hash: String,
    rank: usize,
    size: usize,
    /// Particles in this file.
    n: usize,
    force_evaluations: u64,
    start: [f64; 8],
    last: [f64; 8],
    /// Force evaluations on the current tree (see `RebuildClock`; absent before version 3).
    #[serde(default)]
    since_rebuild: u64,
    /// Versions 3 to 5: the rest of the rebuild clock of one reference rate (reference,
    /// excess, rebuild_cost, refit_cost), as f64 bit patterns (exact, unlike JSON numbers).
    #[serde(default, skip_serializing)]
    clock: [u64; 4],
    /// The rest of the rebuild clock: excess, provisional, rebuild_cost, refit_cost, as f64
    /// bit patterns (absent before version 6).
    #[serde(default)]
    rebuild_clock: [u64; 4],
    /// The rebuild clock's reference rate of each class of walked particles, as f64 bit
    /// patterns (absent before version 6).
    #[serde(default)]
    walk_references: Vec<u64>,
    /// The rebuild clock's last measured refit: its slowdown and weight, as f64 bit patterns
    /// (absent before version 6).
    #[serde(default)]
    last_refit: [u64; 2],
    /// The rebuild clock's back-off counters: skip, backoff.
    #[serde(default)]
    backoff: [u64; 2],
    /// The rebuild clock's `trusted` (absent before the probes sampled the walk: false).
    #[serde(default)]
    refits_trusted: bool,
    /// Versions 3 to 5: the rebuild clock's last walk: its rate and the last refit's
    /// provisional excess as f64 bit patterns, and its walked particles (absent before refits'
    /// rates were confirmed by the next: 0, as after a rebuild).
    #[serde(default, skip_serializing)]
    last_walk: [u64; 3],
    /// Cells of the saved tree (0: none).
    #[serde(default)]
    tree_cells: usize,
    /// The saved tree's key cube: origin (x, y, z) and side, as f64 bit patterns.
    #[serde(default)]
    tree_grid: [u64; 4],
    /// The saved tree's frame centre (x, y, z) as f64 bit patterns (absent before version 4).
    #[serde(default)]
    tree_centre: [u64; 3],
    /// Whether the saved tree's frame is a periodic box ([`Frame::periodic`]; absent in
    /// files of open-boundary runs: false).
    #[serde(default)]
    tree_periodic: bool,
    /// The last domain decomposition's key cube: origin (x, y, z) and side, as f64 bit
    /// patterns (absent before version 5, and with no decomposition yet: no splitters).
    #[serde(default)]
    domain_grid: [u64; 4],
    /// The last domain decomposition's splitters (absent before version 5; empty: none).
    #[serde(default)]
    domain_splitters: Vec<u64>,
    /// (name, bytes) of every array, in file order.
    arrays: Vec<(String, usize)>,
}

/// Where rank `rank` writes generation `slot` (0 or 1) in checkpoint directory `dir`.
pub fn checkpoint_path(dir: &Path, rank: usize, slot: u64) -> PathBuf {
    dir.join(format!("rank{rank:05}.{slot}.ckpt"))
}

/// A checkpoint as read back: which one it is and the state it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Checkpoints written before this one in the run.
    pub sequence: u64,
    /// The state of the run.
    pub state: RunState,
    /// The time of the state (time units).
    pub time: f64,
    /// The force engine's tree and rebuild clock (see [`crate::forces::ForceEngine::restore`]).
    pub engine: EngineState,
}

/// The byte lengths of the arrays of a file with `n` particles and a saved tree of `cells`
/// cells (0: none), in file order.
fn array_lengths(n: usize, cells: usize) -> Vec<(String, usize)> {
    let tree = TREE_ARRAYS
        .iter()
        .filter(|_| cells > 0)
        .map(|&(a, per_particle, per_cell)| (a.to_string(), per_particle * n + per_cell * cells));
    ARRAYS
        .iter()
        .map(|&(a, b)| (a.to_string(), b * n))
        .chain(tree)
        .collect()
}

/// Writes this rank's checkpoint number `sequence` of `state` (at `time`) and of the force
/// engine's saved state `engine` into `dir` (slot `sequence % 2`) atomically, and returns its path.
/// `config_hash` identifies the configuration; `rank` and `size` the job.
pub fn write_checkpoint(
    dir: &Path,
    (rank, size): (usize, usize),
    sequence: u64,
    config_hash: u64,
    time: f64,
    s: &RunState,
    engine: &EngineState,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, format!("cannot create: {e}")))?;
    let path = checkpoint_path(dir, rank, sequence % 2);
    let n = s.p.len();
    let c = &engine.clock;
    let tree = engine.topology.as_ref();
    let cells = tree.map_or(0, |t| t.first.len());
    let header = Header {
        version: VERSION,
        sequence,
        step: s.step,
        ti: s.ti,
        time,
        config_hash: format!("{config_hash:016x}"),
        rank,
        size,
        n,
        force_evaluations: s.force_evaluations,
        start: s.start.sums(),
        last: s.last.sums(),
        since_rebuild: c.since_rebuild,
        clock: [0; 4],
        rebuild_clock: [c.excess, c.provisional, c.rebuild_cost, c.refit_cost].map(f64::to_bits),
        walk_references: c.references.map(f64::to_bits).to_vec(),
        last_refit: [c.last.0, c.last.1].map(f64::to_bits),
        backoff: [c.skip, c.backoff],
        refits_trusted: c.trusted,
        last_walk: [0; 3],
        tree_cells: cells,
        tree_grid: tree.map_or([0; 4], |t| {
            let (o, side) = (t.frame.cube.origin, t.frame.cube.side);
            [o.x, o.y, o.z, side].map(f64::to_bits)
        }),
        tree_centre: tree.map_or([0; 3], |t| t.frame.centre.to_array().map(f64::to_bits)),
        tree_periodic: tree.is_some_and(|t| t.frame.periodic),
        domain_grid: engine.domains.as_ref().map_or([0; 4], |d| {
            let (o, side) = (d.grid.origin, d.grid.side);
            [o.x, o.y, o.z, side].map(f64::to_bits)
        }),
        domain_splitters: engine
            .domains
            .as_ref()
            .map_or(Vec::new(), |d| d.splitters.clone()),
        arrays: array_lengths(n, cells),
    };
    let json = serde_json::to_vec(&header).expect("the header serialises");
    let vec3 = |v: &[DVec3]| -> Vec<[f64; 3]> { v.iter().map(|x| x.to_array()).collect() };
    write_atomic(&path, |w| {
        let mut hash = Xxh64::new();
        let mut put = |bytes: &[u8]| -> std::io::Result<()> {
            hash.update(bytes);
            w.write_all(bytes)
        };
        put(MAGIC)?;
        put(&(json.len() as u64).to_le_bytes())?;
        put(&json)?;
        put(bytemuck::cast_slice(&vec3(&s.p.pos)))?;
        put(bytemuck::cast_slice(&vec3(&s.p.vel)))?;
        put(bytemuck::cast_slice(&s.p.mass))?;
        put(bytemuck::cast_slice(&s.p.id))?;
        put(&s.integ.bin)?;
        put(bytemuck::cast_slice(&vec3(&s.integ.acc)))?;
        put(bytemuck::cast_slice(&s.integ.pot))?;
        put(bytemuck::cast_slice(&s.integ.cost))?;
        if let Some(t) = tree {
            put(bytemuck::cast_slice(&t.index))?;
            put(bytemuck::cast_slice(&t.first))?;
            put(bytemuck::cast_slice(&t.count))?;
            put(bytemuck::cast_slice(&t.subtree))?;
            put(&t.level)?;
            put(&t.nchild)?;
            put(bytemuck::cast_slice(&t.boxes))?;
        }
        let sum = hash.finish();
        w.write_all(&sum.to_le_bytes())
    })?;
    Ok(path)
}

/// The rebuild clock a header holds; a version 3 to 5 header's single reference rate is that of
/// the class of its last walk ([`RebuildClock::references`]). Fails where a version 6 header
/// holds another number of classes than [`WALK_CLASSES`].
fn rebuild_clock(header: &Header) -> std::result::Result<RebuildClock, String> {
    let mut c = RebuildClock {
        since_rebuild: header.since_rebuild,
        skip: header.backoff[0],
        backoff: header.backoff[1],
        trusted: header.refits_trusted,
        ..RebuildClock::default()
    };
    if header.version < VERSION {
        let [reference, excess, rebuild_cost, refit_cost] = header.clock.map(f64::from_bits);
        let [last_rate, provisional, last_walked] = header.last_walk;
        c.references[walk_class(last_walked)] = reference;
        (c.excess, c.rebuild_cost, c.refit_cost) = (excess, rebuild_cost, refit_cost);
        c.provisional = f64::from_bits(provisional);
        c.last = match c.since_rebuild > 1 && reference > 0.0 {
            true => (
                f64::from_bits(last_rate) / reference - 1.0,
                reference * last_walked as f64,
            ),
            false => (f64::INFINITY, 0.0),
        };
    } else {
        let [excess, provisional, rebuild_cost, refit_cost] =
            header.rebuild_clock.map(f64::from_bits);
        (c.excess, c.provisional) = (excess, provisional);
        (c.rebuild_cost, c.refit_cost) = (rebuild_cost, refit_cost);
        if header.walk_references.len() != WALK_CLASSES {
            return Err(format!(
                "corrupt: {} classes of walked particles in the rebuild clock where this hinoki \
                 has {WALK_CLASSES}",
                header.walk_references.len()
            ));
        }
        for (r, &bits) in c.references.iter_mut().zip(&header.walk_references) {
            *r = f64::from_bits(bits);
        }
        c.last = (
            f64::from_bits(header.last_refit[0]),
            f64::from_bits(header.last_refit[1]),
        );
    }
    Ok(c)
}

/// The domains a header saved: `None` without splitters (one rank, or no decomposition yet).
fn domains_of(header: &Header) -> Option<Domains> {
    let g = header.domain_grid.map(f64::from_bits);
    (!header.domain_splitters.is_empty()).then(|| Domains {
        grid: GridBox {
            origin: DVec3::new(g[0], g[1], g[2]),
            side: g[3],
        },
        splitters: header.domain_splitters.clone(),
    })
}

/// The sequence number in the header of the checkpoint file at `path` where its header can
/// still be read, whatever damage the rest has (`None` where it cannot).
fn header_sequence(path: &Path) -> Option<u64> {
    let data = std::fs::read(path).ok()?;
    if data.len() < 16 || &data[..8] != MAGIC {
        return None;
    }
    let h_len = u64::from_le_bytes(data[8..16].try_into().ok()?) as usize;
    let json = data.get(16..16usize.checked_add(h_len)?)?;
    Some(serde_json::from_slice::<Header>(json).ok()?.sequence)
}

/// Reads and checks one checkpoint file written by rank `rank` of a `size`-rank job with the
/// configuration `config_hash`. Every failure (truncation, checksum mismatch, another job or
/// configuration) is an error naming the file and the problem.
pub fn read_checkpoint(
    path: &Path,
    (rank, size): (usize, usize),
    config_hash: u64,
) -> Result<Checkpoint> {
    let bad = |what: String| Error::io(path, what);
    let data = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    if data.len() < 24 || &data[..8] != MAGIC {
        return Err(bad(if data.len() < 8 || &data[..8] != MAGIC {
            "not a hinoki checkpoint (wrong magic number)".into()
        } else {
            format!("truncated: {} bytes", data.len())
        }));
    }
    let body = &data[..data.len() - 8];
    let stored = u64::from_le_bytes(data[data.len() - 8..].try_into().expect("8 bytes"));
    let mut hash = Xxh64::new();
    hash.update(body);
    let h_len = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")) as usize;
    if h_len > body.len() - 16 {
        return Err(bad(format!(
            "truncated: the header alone needs {h_len} bytes"
        )));
    }
    let header: Header = serde_json::from_slice(&body[16..16 + h_len])
        .map_err(|e| bad(format!("corrupt header: {e}")))?;
    let n = header.n;
    let cells = header.tree_cells;
    let expected: usize = 16 + h_len + array_lengths(n, cells).iter().map(|a| a.1).sum::<usize>();
    if body.len() != expected {
        return Err(bad(format!(
            "truncated or padded: {} bytes where {} particles need {}",
            data.len(),
            n,
            expected + 8
        )));
    }
    if hash.finish() != stored {
        return Err(bad("corrupt: checksum mismatch".into()));
    }
    if ![
        OLD_VERSION,
        UNFRAMED_VERSION,
        UNDIVIDED_VERSION,
        ONE_REFERENCE_VERSION,
        VERSION,
    ]
    .contains(&header.version)
    {
        return Err(bad(format!(
            "checkpoint version {} (this hinoki reads versions {OLD_VERSION} to {VERSION})",
            header.version
        )));
    }
    if (header.rank, header.size) != (rank, size) {
        return Err(bad(format!(
            "written by rank {} of {}, read by rank {rank} of {size}: restart with {} ranks",
            header.rank, header.size, header.size
        )));
    }
    if header.config_hash != format!("{config_hash:016x}") {
        return Err(bad(
            "written with a different configuration (particles, gravity or time settings \
             changed); restart with the configuration of the original run"
                .into(),
        ));
    }
    let mut at = 16 + h_len;
    let mut take = |bytes: usize| {
        let s = &body[at..at + bytes];
        at += bytes;
        s
    };
    let vec3 = |b: &[u8]| -> Vec<DVec3> {
        pod_vec::<[f64; 3]>(b)
            .into_iter()
            .map(DVec3::from_array)
            .collect()
    };
    let pos = vec3(take(24 * n));
    let vel = vec3(take(24 * n));
    let mass = pod_vec::<f64>(take(8 * n));
    let id = pod_vec::<u64>(take(8 * n));
    let bin = take(n).to_vec();
    let acc = vec3(take(24 * n));
    let pot = pod_vec::<f64>(take(8 * n));
    let cost = pod_vec::<f64>(take(8 * n));
    let topology = (cells > 0).then(|| {
        let g = header.tree_grid.map(f64::from_bits);
        TreeTopology {
            frame: Frame {
                cube: GridBox {
                    origin: DVec3::new(g[0], g[1], g[2]),
                    side: g[3],
                },
                centre: DVec3::from_array(header.tree_centre.map(f64::from_bits)),
                periodic: header.tree_periodic,
            },
            index: pod_vec(take(4 * n)),
            first: pod_vec(take(4 * cells)),
            count: pod_vec(take(4 * cells)),
            subtree: pod_vec(take(4 * cells)),
            level: take(cells).to_vec(),
            nchild: take(cells).to_vec(),
            boxes: pod_vec(take(16 * cells)),
        }
    });
    if let Some(t) = &topology {
        t.check(n)
            .map_err(|e| bad(format!("corrupt saved tree: {e}")))?;
    }
    let topology = topology.filter(|_| header.version != UNFRAMED_VERSION);
    let engine = EngineState {
        clock: rebuild_clock(&header).map_err(bad)?,
        topology,
        domains: domains_of(&header),
    };
    Ok(Checkpoint {
        engine,
        sequence: header.sequence,
        time: header.time,
        state: RunState {
            p: Particles { pos, vel, mass, id },
            integ: IntegratorState {
                bin,
                acc,
                pot,
                cost,
            },
            ti: header.ti,
            step: header.step,
            force_evaluations: header.force_evaluations,
            start: Conserved::from_sums(header.start),
            last: Conserved::from_sums(header.last),
        },
    })
}

/// Copies raw bytes (a whole number of `T`s) into a vector of `T`, whatever their alignment.
fn pod_vec<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut(&mut v).copy_from_slice(bytes);
    v
}

/// The hash that ties a checkpoint to its configuration: XXH64 of everything that decides the
/// run's future (the `[ics]`, `[gravity]`, `[time]` and `[cosmology]` tables; not
/// `[output]`).
pub fn config_hash(cfg: &RunConfig) -> u64 {
    let mut h = Xxh64::new();
    // Runs from a file without `[ics]` units keep the hash they had before the keys existed.
    let ics = match &cfg.ics {
        IcsConfig::File { path, units } if units.is_empty() => format!("File({path:?})"),
        ics => format!("{ics:?}"),
    };
    let mut text = format!("{ics}|{:?}|{:?}", cfg.gravity, cfg.time);
    // Newtonian runs keep the hash they had before comoving runs existed.
    if let Some(c) = &cfg.cosmology {
        text += &format!("|{c:?}");
    }
    h.update(text.as_bytes());
    h.finish()
}

/// The newest good checkpoint of this rank under `dir` (a run's output directory or its
/// `checkpoint` directory), agreed on by every rank of `comm`. Refuses, with the reason and
/// the older good checkpoint's name, when a checkpoint file is corrupt, truncated or from
/// another job or configuration, unless that file's header still shows it to be the older
/// generation of an intact newer one (then a warning, and the newer one).
pub fn find_checkpoint(dir: &Path, comm: &dyn Comm, config_hash: u64) -> Result<Checkpoint> {
    let dir = if dir.join("checkpoint").is_dir() {
        dir.join("checkpoint")
    } else {
        dir.to_path_buf()
    };
    if !dir.is_dir() {
        return Err(Error::io(&dir, "no such checkpoint directory"));
    }
    let job = (comm.rank(), comm.size());
    let paths = [0, 1].map(|slot| checkpoint_path(&dir, job.0, slot));
    let read: Vec<Option<Result<Checkpoint>>> = paths
        .iter()
        .map(|p| p.exists().then(|| read_checkpoint(p, job, config_hash)))
        .collect();
    // Per slot, over all ranks: any file bad, any missing, the sequence range, and any file
    // bad that is not known to be older than the other slot's (its header still names a
    // smaller sequence number).
    let mut flags = [0.0; 10];
    for (slot, r) in read.iter().enumerate() {
        flags[slot] = matches!(r, Some(Err(_))) as u8 as f64;
        let older = match (r, &read[1 - slot]) {
            (Some(Err(_)), Some(Ok(other))) => {
                header_sequence(&paths[slot]).is_some_and(|q| q < other.sequence)
            }
            _ => false,
        };
        flags[8 + slot] = (flags[slot] > 0.0 && !older) as u8 as f64;
        flags[2 + slot] = r.is_none() as u8 as f64;
        let seq = match r {
            Some(Ok(c)) => c.sequence as f64,
            _ => -1.0,
        };
        flags[4 + slot] = seq;
        flags[6 + slot] = -seq;
    }
    comm.allreduce_max_f64(&mut flags);
    let usable = |slot: usize| {
        flags[slot] == 0.0 && flags[2 + slot] == 0.0 && flags[4 + slot] == -flags[6 + slot]
    };
    let good = (0..2)
        .filter(|&s| usable(s))
        .max_by_key(|&s| flags[4 + s] as u64);
    // A damaged generation older than an intact, complete one costs nothing: it is the one
    // the next checkpoint overwrites.
    let older = |slot: usize| flags[8 + slot] == 0.0 && good == Some(1 - slot);
    if let Some(bad) = (0..2).find(|&s| flags[s] > 0.0 && older(s)) {
        if comm.rank() == 0 {
            tracing::warn!(
                "{}: the older checkpoint generation is damaged; restarting from the newer, \
                 intact one",
                paths[bad].display()
            );
        }
    }
    if let Some(bad) = (0..2).find(|&s| flags[s] > 0.0 && !older(s)) {
        let why = match &read[bad] {
            Some(Err(e)) => e.to_string(),
            _ => format!(
                "{}: another rank's checkpoint of this generation is damaged",
                paths[bad].display()
            ),
        };
        let older = match good.and_then(|s| read[s].as_ref()) {
            Some(Ok(c)) => format!(
                "; the other checkpoint {} (step {}, t = {}) is intact: remove the damaged \
                 generation to restart from it",
                paths[1 - bad].display(),
                c.state.step,
                c.time
            ),
            _ => "; no intact checkpoint remains".to_string(),
        };
        return Err(Error::io(
            &dir,
            format!("refusing to restart: {why}{older}"),
        ));
    }
    match good.and_then(|s| read.into_iter().nth(s).flatten().and_then(Result::ok)) {
        Some(c) => Ok(c),
        None => Err(Error::io(
            &dir,
            format!(
                "no complete checkpoint for rank {} of {} (looked for {})",
                job.0,
                job.1,
                paths[0].display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;
    use crate::forces::{Backend, ForceEngine, ForceParams};
    use crate::io::testdir::TestDir;

    /// A run state of 500 Plummer particles and the refit state of an engine that rebuilds
    /// every 4 evaluations, after its first.
    fn states() -> (RunState, EngineState) {
        let p = crate::ics::generate(crate::ics::Model::Plummer, 500, 1).unwrap();
        let params = ForceParams {
            backend: Backend::Cpu,
            ..ForceParams::default()
        };
        let mut engine = ForceEngine::new(params)
            .unwrap()
            .with_rebuild("4".parse().unwrap());
        let f = engine.compute(&SingleProcess, &p, None).unwrap();
        let s = RunState {
            integ: IntegratorState::new(f.acc, f.pot),
            p,
            ti: 3,
            step: 3,
            force_evaluations: 1500,
            start: Conserved::default(),
            last: Conserved::default(),
        };
        (s, engine.saved_state().unwrap())
    }

    #[test]
    fn the_tree_survives_and_versions_2_to_5_read() {
        let dir = TestDir::new("checkpoint-tree");
        let (s, refit) = states();
        assert!(refit.topology.is_some() && refit.clock.since_rebuild == 1);
        let path = write_checkpoint(dir.path(), (0, 1), 0, 42, 0.1, &s, &refit).unwrap();
        let c = read_checkpoint(&path, (0, 1), 42).unwrap();
        assert!(c.state == s, "the run state differs");
        assert!(c.engine == refit, "the refit state differs");
        let data = std::fs::read(&path).unwrap();
        let h_len = u64::from_le_bytes(data[8..16].try_into().unwrap()) as usize;
        let mut header: serde_json::Value = serde_json::from_slice(&data[16..16 + h_len]).unwrap();
        let write_header = |h: &serde_json::Value| {
            let json = serde_json::to_vec(h).unwrap();
            let mut old = MAGIC.to_vec();
            old.extend((json.len() as u64).to_le_bytes());
            old.extend(&json);
            old.extend(&data[16 + h_len..data.len() - 8]);
            let mut hash = Xxh64::new();
            hash.update(&old);
            old.extend(hash.finish().to_le_bytes());
            std::fs::write(&path, old).unwrap();
        };
        // A clock of another number of classes is refused.
        let mut short = header.clone();
        short["walk_references"].as_array_mut().unwrap().pop();
        write_header(&short);
        let e = read_checkpoint(&path, (0, 1), 42).unwrap_err();
        assert!(e.message.contains("classes of walked particles"), "{e}");
        // The rebuild clock as versions 3 to 5 wrote it: one reference rate, that of the 500
        // particles walked at the rebuild.
        let o = header.as_object_mut().unwrap();
        for key in ["rebuild_clock", "walk_references", "last_refit"] {
            o.remove(key).unwrap();
        }
        let cl = &refit.clock;
        let reference = cl.references[walk_class(500)];
        o.insert(
            "clock".into(),
            serde_json::json!(
                [reference, cl.excess, cl.rebuild_cost, cl.refit_cost].map(f64::to_bits)
            ),
        );
        o.insert(
            "last_walk".into(),
            serde_json::json!([reference.to_bits(), 0, 500]),
        );
        // Version 5: the same clock and tree.
        header["version"] = ONE_REFERENCE_VERSION.into();
        write_header(&header);
        let c = read_checkpoint(&path, (0, 1), 42).unwrap();
        assert!(
            c.state == s && c.engine == refit,
            "version 5 reads otherwise"
        );
        // The same file as version 3 wrote it: the rebuild clock kept, the tree (then in
        // absolute coordinates) left out.
        let mut v3 = header.clone();
        v3["version"] = UNFRAMED_VERSION.into();
        v3.as_object_mut().unwrap().remove("tree_centre").unwrap();
        write_header(&v3);
        let c = read_checkpoint(&path, (0, 1), 42).unwrap();
        assert_eq!((&c.state, c.engine.clock), (&s, refit.clock));
        assert!(c.engine.topology.is_none());
        // The same file as version 2 wrote it: no rebuild clock, no tree.
        let o = header.as_object_mut().unwrap();
        for key in [
            "since_rebuild",
            "clock",
            "backoff",
            "last_walk",
            "tree_cells",
            "tree_grid",
            "tree_centre",
        ] {
            o.remove(key).unwrap();
        }
        o["arrays"] = serde_json::json!(array_lengths(500, 0));
        let particles: usize = ARRAYS.iter().map(|a| a.1 * 500).sum();
        let mut write_version = |version: u32| {
            header["version"] = version.into();
            let json = serde_json::to_vec(&header).unwrap();
            let mut old = MAGIC.to_vec();
            old.extend((json.len() as u64).to_le_bytes());
            old.extend(&json);
            old.extend(&data[16 + h_len..16 + h_len + particles]);
            let mut hash = Xxh64::new();
            hash.update(&old);
            old.extend(hash.finish().to_le_bytes());
            std::fs::write(&path, old).unwrap();
        };
        write_version(OLD_VERSION);
        let c = read_checkpoint(&path, (0, 1), 42).unwrap();
        assert_eq!(c.state, s);
        assert_eq!(c.engine, EngineState::default());
        assert!(c.engine.clock.due(crate::forces::Rebuild::Auto));
        write_version(1);
        let e = read_checkpoint(&path, (0, 1), 42).unwrap_err();
        assert!(e.message.contains("checkpoint version 1"), "{e}");
    }

    #[test]
    fn a_malformed_tree_is_refused() {
        let (_, refit) = states();
        let t = refit.topology.unwrap();
        t.check(500).unwrap();
        let mut bad = t.clone();
        bad.index[7] = bad.index[8];
        assert!(bad.check(500).unwrap_err().contains("repeats"));
        let mut bad = t.clone();
        bad.count[1] += 1;
        assert!(bad.check(500).unwrap_err().contains("tile"));
        assert!(t.check(499).is_err());
    }
}
