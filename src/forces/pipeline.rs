//! The tree pipeline of one force evaluation, written once over the [`Backend`] seam for one
//! rank or many: the tree (built or refitted), the walk's targets and groups, with several
//! ranks the LETs (region, export, exchange while the local tree is walked: device to device
//! on a stream of its own, or through the host in a communication thread; the received forest
//! walked after it), and the results in the particles' order.

use super::rebuild::{Probe, PROBE_EVERY};
use super::resolution::{self, Resolution};
use super::ForceParams;
use crate::backend::{Active, Backend, PreviousAcc, Source, TargetSpec};
use crate::comm::Comm;
use crate::diag::PhaseTimes;
use crate::domain::Domains;
use crate::error::{Error, Result};
use crate::hash::{mix, GOLDEN};
use crate::lets::{gather_regions, Incoming, LetShape, LetStats, LetWalk, Outgoing};
use crate::sfc::frame::{centre_of, CENTRE_SAMPLES};
use crate::sfc::{Frame, GridBox};
use crate::tree::TreeParams;
use crate::walk::cpu::{Forces, Units, WalkParams};
use crate::walk::mac::{Criterion, Mac};
use glam::DVec3;
use std::time::Instant;

/// What one evaluation of the tree pipeline gives.
pub(super) struct Evaluation {
    /// The results in the particles' order (`None` where they went into the backend's
    /// integrator state).
    pub forces: Option<Forces>,
    /// The LET traffic of this rank.
    pub stats: LetStats,
    /// The number of targets walked.
    pub walked: usize,
    /// What the float32 frame makes of the closest particles, where the job's dynamic range
    /// is beyond [`resolution::WARN_RANGE`] (but within [`resolution::MAX_RANGE`]: beyond it,
    /// the evaluation fails before it walks).
    pub resolution: Option<Resolution>,
    /// The warning that the tree's deepest cells hold more than
    /// [`resolution::CROWDED_LIMIT`] particles at distinct positions (on some rank).
    pub crowding: Option<String>,
    /// What the probe of `rebuild = "auto"` measured on this rank, where it probed.
    pub probe: Option<Probe>,
    /// The strays that stayed for the probe and went home after it (all ranks).
    pub strays: u64,
    /// The bounding box of every rank's particles (length units), where the ranks agreed on
    /// it (several ranks, or a rebuild).
    pub bounds: Option<Bounds>,
}

/// An axis-aligned bounding box: lowest and highest corner (length units).
pub(super) type Bounds = (DVec3, DVec3);

/// What an evaluation does with its trees.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trees<'a> {
    /// Rebuild the tree (else refit the last one).
    pub rebuild: bool,
    /// Before the rebuild, probe whether refits would pay ([`Probe`]); this rank's last tree
    /// holds its particles, in their order.
    pub probe: bool,
    /// The domains whose strays stayed for the probe (the same on every rank): they go home
    /// after the probe's sample of the last tree, before the rebuild.
    pub strays_stayed: Option<&'a Domains>,
}

/// Sends the particles that have moved out of their rank's domain of `d` to the ranks that own
/// them, the domains unchanged; returns how many moved (over all ranks). Collective: one sum,
/// and a migration where any rank has strays.
pub(super) fn send_strays_home(
    backend: &mut dyn Backend,
    comm: &dyn Comm,
    d: &Domains,
) -> Result<u64> {
    let mut strays = [backend.strays(d, comm.rank())?];
    comm.allreduce_sum_u64(&mut strays);
    if strays[0] > 0 {
        backend.migrate(comm, &d.splitters)?;
    }
    Ok(strays[0])
}

/// Forces on this rank's particles (those `backend` holds) from the particles of every rank of
/// `comm`, by the tree walk: the tree rebuilt when `trees.rebuild` (probed first when
/// `trees.probe`, and the strays that stayed for the probe sent home after it), else
/// refitted; `amag` (the
/// previous accelerations, acceleration units) feeds the acceleration criterion, whose first
/// evaluation without them walks first with the modified criterion; with `active` other than
/// all, only the groups holding an active particle walk. The results come down in the
/// particles' order, or with `keep` go into the backend's integrator state (the evaluation's
/// `forces` are then `None`). A rebuilt tree is built in the domains' key cube `domain_cube`
/// (several ranks, open boundaries) while it holds every particle. Fails, before it walks,
/// where float32 cannot resolve the closest particles ([`resolution`]). Collective.
#[allow(clippy::too_many_arguments)]
pub(super) fn tree_forces(
    backend: &mut dyn Backend,
    comm: &dyn Comm,
    params: &ForceParams,
    trees: Trees,
    amag: PreviousAcc,
    active: Active,
    keep: bool,
    domain_cube: Option<GridBox>,
    times: &mut PhaseTimes,
) -> Result<Evaluation> {
    let tp = TreeParams {
        order: params.order,
        ncrit: params.ncrit.resolve(backend.layout().is_some()),
        mac: params.mac,
        theta: params.theta,
    };
    // Only the acceleration criterion reads the previous accelerations; without them its
    // first evaluation walks twice, and is no evaluation to probe in.
    let amag = match params.mac {
        Mac::Acceleration => amag,
        _ => PreviousAcc::None,
    };
    let bootstrap = params.mac == Mac::Acceleration && matches!(amag, PreviousAcc::None);
    let probing = trees.rebuild && trees.probe && !bootstrap;
    let t0 = Instant::now();
    let mut probe = match probing {
        true => refitted_sample(backend, params, &tp, amag)?,
        false => None,
    };
    let mut probe_time = t0.elapsed().as_secs_f64();
    let mut strays = 0;
    if let Some(d) = trees.strays_stayed {
        let t0 = Instant::now();
        strays = send_strays_home(backend, comm, d)?;
        times.add("domain", t0.elapsed().as_secs_f64());
    }
    // The frame's cube and centre are the keys' (timed with them when the tree is rebuilt).
    let t0 = Instant::now();
    let (rebuild, frame, bounds) = agree(
        backend,
        comm,
        trees.rebuild,
        params.eps,
        params.box_size,
        domain_cube,
    )?;
    if rebuild {
        times.add("sort", t0.elapsed().as_secs_f64());
    }
    // The frame the trees, targets, regions and LETs are in.
    let frame = match frame {
        Some(frame) => {
            backend.build_tree(&frame, &tp, times)?;
            Some(frame)
        }
        // Nobody holds a particle: there is no tree to build.
        None if rebuild => {
            let nowhere = Frame {
                cube: GridBox::around(DVec3::ZERO, DVec3::ZERO),
                centre: DVec3::ZERO,
                periodic: false,
            };
            backend.build_tree(&nowhere, &tp, times)?;
            None
        }
        None => backend.refit_tree(&tp, times)?,
    };
    let t0 = Instant::now();
    let close = backend.closeness(params.eps)?;
    let side = frame.map(|f| f.side());
    let (mut resolution, crowded) = resolution::of_job(comm, close, side, params.eps)?;
    times.add(
        if rebuild { "sort" } else { "refit" },
        t0.elapsed().as_secs_f64(),
    );
    // Where a far particle has stretched the cube, the error names it (every rank agrees on
    // the resolution, so every rank looks).
    if let (Some(r), Some(f)) = (resolution.as_mut().filter(|r| r.stretched()), frame) {
        let p = backend.particles()?;
        let ids = r.pair.id.map(|_| p.id.as_slice());
        r.far = Some(resolution::farthest(comm, &p.pos, ids, f.centre));
    }
    if let Some(e) = resolution.as_ref().and_then(Resolution::error) {
        return Err(e);
    }
    let side = frame.map_or(1.0, |f| f.side());
    let crowding = resolution::crowding(crowded, side);
    let spec = TargetSpec {
        order: params.order,
        group: params.group,
        periodic: params.periodic(),
        amag,
        active,
    };
    let wp = params.walk_params(side);
    if let Some(p) = probe.as_mut() {
        let t0 = Instant::now();
        p.fresh_walk = sample_walk(backend, params, amag, &wp)?;
        probe_time += t0.elapsed().as_secs_f64();
        p.cost = probe_time;
        times.add("probe", probe_time);
    }
    let walked = backend.targets(&spec, times)?;
    let mut stats = LetStats::default();
    if bootstrap {
        let boot = WalkParams {
            criterion: Criterion {
                mac: Mac::Modified,
                ..wp.criterion
            },
            ..wp
        };
        walk_everything(backend, comm, &boot, params, times, &mut stats)?;
        backend.bootstrap_amag(wp.criterion.g)?;
    }
    walk_everything(backend, comm, &wp, params, times, &mut stats)?;
    let units = Units::of_frame(params.g, side);
    let forces = match keep {
        true => {
            backend.keep_forces(units, times)?;
            None
        }
        false => Some(backend.forces(units, times)?),
    };
    Ok(Evaluation {
        forces,
        stats,
        walked,
        resolution,
        crowding,
        probe,
        strays,
        bounds,
    })
}

/// The first half of a probe: the last tree refitted to the particles' current positions and
/// a sample of the groups walked through it (local tree only); `None` without a tree.
fn refitted_sample(
    backend: &mut dyn Backend,
    params: &ForceParams,
    tp: &TreeParams,
    amag: PreviousAcc,
) -> Result<Option<Probe>> {
    let mut t = PhaseTimes::default();
    let Some(frame) = backend.refit_tree(tp, &mut t)? else {
        return Ok(None);
    };
    let refit_walk = sample_walk(backend, params, amag, &params.walk_params(frame.side()))?;
    Ok(Some(Probe {
        refit: t.get("refit"),
        refit_walk,
        ..Probe::default()
    }))
}

/// One group in [`PROBE_EVERY`] of the current tree walked through it (local tree only):
/// seconds and targets.
fn sample_walk(
    backend: &mut dyn Backend,
    params: &ForceParams,
    amag: PreviousAcc,
    wp: &WalkParams,
) -> Result<(f64, u64)> {
    let mut t = PhaseTimes::default();
    let spec = TargetSpec {
        order: params.order,
        group: params.group,
        periodic: params.periodic(),
        amag,
        active: Active::Sample { every: PROBE_EVERY },
    };
    let walked = backend.targets(&spec, &mut t)?;
    backend.walk(Source::Local, wp, &mut t)?;
    Ok((t.get("walk"), walked as u64))
}

/// Whether this evaluation rebuilds its trees (on every rank when any must: a rank whose
/// particles are not those of its tree has to, and the rebuilds share one frame), and then the
/// frame the trees are built in: the domains' key cube `domain_cube` where it holds every
/// rank's particles (so that each domain is a set of whole cells of the trees), else the cube
/// around them ([`GridBox::frame_for`] softening `eps`), or the periodic box [0, `box_size`)³
/// itself when `box_size` > 0 (the period is then 1 in the frame), so that every rank's cells
/// are cells of one global octree, centred in the bulk of a sample of every rank's particles
/// ([`centre_of`]), so that every rank's float32 values are in one frame (`None` when no rank
/// holds a particle, or without a rebuild), and the bounding box of every rank's particles
/// where it was agreed on (`None` on one rank without a rebuild). Fails when the particles
/// span more than float64 can hold, or lie outside the periodic box. Collective on several
/// ranks.
fn agree(
    backend: &mut dyn Backend,
    comm: &dyn Comm,
    rebuild: bool,
    eps: f64,
    box_size: f64,
    domain_cube: Option<GridBox>,
) -> Result<(bool, Option<Frame>, Option<Bounds>)> {
    if comm.size() == 1 && !rebuild {
        return Ok((false, None, None));
    }
    let (lo, hi) = backend.bounds()?;
    let mut v = [rebuild as u8 as f64, -lo.x, -lo.y, -lo.z, hi.x, hi.y, hi.z];
    if comm.size() > 1 {
        comm.allreduce_max_f64(&mut v);
    }
    let rebuild = v[0] > 0.0;
    let (lo, hi) = (-DVec3::new(v[1], v[2], v[3]), DVec3::new(v[4], v[5], v[6]));
    let bounds = Some((lo, hi));
    if !rebuild || lo.x > hi.x {
        return Ok((rebuild, None, bounds));
    }
    if box_size > 0.0 {
        let frame = periodic_frame(lo, hi, box_size, &v)?;
        return Ok((true, Some(frame), bounds));
    }
    let mut cube = GridBox::frame_for(lo, hi, eps)?;
    if let Some(d) = domain_cube.filter(|d| d.holds(lo, hi) && d.side >= cube.side) {
        cube = d;
    }
    let mine: Vec<f64> = backend
        .samples(CENTRE_SAMPLES)?
        .iter()
        .flat_map(|x| x.to_array())
        .collect();
    let all = match comm.size() {
        1 => mine,
        _ => comm.allgatherv_f64(&mine)?,
    };
    let points: Vec<DVec3> = all.chunks_exact(3).map(DVec3::from_slice).collect();
    Ok((
        true,
        Some(Frame {
            cube,
            centre: centre_of(&points),
            periodic: false,
        }),
        bounds,
    ))
}

/// The frame of a periodic box of side `side` ([`Frame::periodic_box`]) for particles whose
/// bounding box `[lo, hi]` is checked to lie in [0, `side`)³ (the engine wraps the particles
/// it is given into the box), centred at a pseudo-random point of the box drawn from the bits
/// of `agreed` (the values every rank agreed on, which change with every drift): the trees'
/// cells then move against the particles from one rebuild to the next, so that the tree's
/// force errors, which follow its cells' geometry, do not add up coherently over the steps on
/// the box's largest scales (GADGET-4's `RANDOMIZE_DOMAINCENTER`). The same on every rank and
/// after a restart (a function of the particles).
fn periodic_frame(lo: DVec3, hi: DVec3, side: f64, agreed: &[f64]) -> Result<Frame> {
    if lo.min_element() < 0.0 || hi.max_element() >= side {
        return Err(Error::input(format!(
            "particles lie outside the periodic box [0, {side}): their bounding box is \
             [{lo}, {hi}]"
        )));
    }
    // A SplitMix64 stream seeded by a hash of the agreed values.
    let mut state = agreed
        .iter()
        .fold(GOLDEN, |h, v| mix(h.wrapping_add(GOLDEN) ^ v.to_bits()));
    let mut uniform = || {
        state = state.wrapping_add(GOLDEN);
        (mix(state) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    };
    let centre = DVec3::new(uniform(), uniform(), uniform()) * side;
    Ok(Frame::periodic_box(side, centre))
}

/// The walks of every particle of the job for the targets: the local tree and, with several
/// ranks, the LETs of the others, exported against every rank's region (`let_boxes` boxes
/// each) and exchanged while the local tree is walked (seed 001's proposed overlap): where the
/// backend walks in the background (the GPU), the export's kernels and the exchange run beside
/// the local walk, and the received forest is unpacked and its walk launched alongside the
/// local one (or queued behind it) before the host waits for both; else the exchange goes
/// through MPI in a communication thread while this one walks, and the forest is walked after
/// both. With `params.lets` merged, the LETs are exchanged first and then merged with the
/// local tree into one tree, which is walked once. Adds the traffic to `stats`. Collective.
fn walk_everything(
    backend: &mut dyn Backend,
    comm: &dyn Comm,
    wp: &WalkParams,
    params: &ForceParams,
    times: &mut PhaseTimes,
    stats: &mut LetStats,
) -> Result<()> {
    if comm.size() == 1 {
        return backend.walk(Source::Local, wp, times);
    }
    let walks = match params.lets.resolve(wp.periodic) {
        LetWalk::Merged => Walks::Merged,
        LetWalk::Auto | LetWalk::Apart => match backend.begin_local_walk(wp, times)? {
            true => Walks::Behind,
            false => Walks::Here,
        },
    };
    let walked = exchange_while_walking(backend, comm, wp, params.let_boxes, walks, times, stats);
    if walked.is_err() {
        // No walk is left running on a failure.
        let _ = backend.end_local_walk(&mut PhaseTimes::default());
    }
    let (cells, particles) = walked?;
    stats.cells_received += cells as u64;
    stats.particles_received += particles as u64;
    Ok(())
}

/// How the local tree and the LETs are walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walks {
    /// The local walk runs in the background ([`Backend::begin_local_walk`]); the forest's
    /// follows it.
    Behind,
    /// The local tree is walked here while the LETs travel, then the forest.
    Here,
    /// Merged into one tree once the LETs are here, and walked once.
    Merged,
}

/// The forest's walk (where it has cells), timed as `walk_let`.
fn walk_forest(
    backend: &mut dyn Backend,
    wp: &WalkParams,
    cells: usize,
    times: &mut PhaseTimes,
) -> Result<()> {
    if cells > 0 {
        let mut t = PhaseTimes::default();
        backend.walk(Source::Forest, wp, &mut t)?;
        times.add("walk_let", t.get("walk"));
    }
    Ok(())
}

/// [`walk_everything`]'s exchange and walks: the regions gathered, the LETs exported and
/// exchanged, the received forest loaded, and the walks done as `walks` says. Returns the
/// forest's cells and particles. Collective.
fn exchange_while_walking(
    backend: &mut dyn Backend,
    comm: &dyn Comm,
    wp: &WalkParams,
    let_boxes: usize,
    walks: Walks,
    times: &mut PhaseTimes,
    stats: &mut LetStats,
) -> Result<(usize, usize)> {
    let mut beside = Beside::new();
    let mine = beside.time(|t| t.time("let", || backend.region(let_boxes)))?;
    let regions = beside.time(|t| t.time("exchange", || gather_regions(comm, &mine)))?;
    let outgoing = beside
        .time(|t| backend.export_lets(&regions, comm.rank(), &wp.criterion, wp.periodic, t))?;
    match outgoing {
        // Device to device: the shapes over the host, the LETs on their own stream while the
        // local tree is walked.
        Outgoing::Device(shapes) => {
            let theirs = beside.time(|t| {
                t.time("exchange", || {
                    LetShape::decode(&comm.alltoall_u64(&LetShape::encode(&shapes))?)
                })
            })?;
            beside.time(|t| t.time("exchange", || backend.send_lets(&theirs, comm)))?;
            stats.bytes_sent += 4 * shapes.iter().map(|l| l.words() as u64).sum::<u64>();
            stats.bytes_received += 4 * theirs.iter().map(|l| l.words() as u64).sum::<u64>();
            if walks == Walks::Here {
                backend.walk(Source::Local, wp, times)?;
            }
            let incoming = Incoming::Device(&theirs);
            walk_the_forest(backend, wp, incoming, walks, beside, times)
        }
        // Through the host: only the communication thread calls MPI while the local tree is
        // walked (or the walk begun runs).
        Outgoing::Host { words, counts } => {
            let (local, remote) = std::thread::scope(|s| {
                let exchange = s.spawn(|| {
                    let t0 = Instant::now();
                    let got = comm.alltoallv_f32(&words, &counts);
                    (got, t0.elapsed().as_secs_f64())
                });
                let local = match walks {
                    Walks::Here => backend.walk(Source::Local, wp, times),
                    Walks::Behind | Walks::Merged => Ok(()),
                };
                // What the overlap did not hide: the wait for the LETs after the local walk
                // (or while the walk begun runs, which then counts as its).
                (
                    local,
                    beside.time(|t| t.time("let_wait", || exchange.join())),
                )
            });
            let (got, secs) =
                remote.map_err(|_| Error::comm("the LET exchange thread panicked"))?;
            times.add("exchange", secs);
            local?;
            let got = got?;
            stats.bytes_sent += 4 * words.len() as u64;
            stats.bytes_received += 4 * got.data.len() as u64;
            let incoming = Incoming::Host {
                data: &got.data,
                counts: &got.counts,
            };
            walk_the_forest(backend, wp, incoming, walks, beside, times)
        }
    }
}

/// Once the LETs are here (`incoming`): the forest loaded and walked (alongside or behind the
/// local walk where that was begun, and then both waited for; or merged with the local tree and
/// walked with it), the host's phases settled against the local walk's end. Returns the
/// forest's cells and particles.
fn walk_the_forest(
    backend: &mut dyn Backend,
    wp: &WalkParams,
    incoming: Incoming,
    walks: Walks,
    mut beside: Beside,
    times: &mut PhaseTimes,
) -> Result<(usize, usize)> {
    if walks == Walks::Merged {
        let (cells, particles) = beside.time(|t| backend.load_forest(incoming, t))?;
        beside.settle(None, times);
        backend.walk(Source::Merged, wp, times)?;
        return Ok((cells, particles));
    }
    let loaded = beside.time(|t| {
        let (cells, particles) = backend.load_forest(incoming, t)?;
        walk_forest(backend, wp, cells, t)?;
        Ok((cells, particles))
    });
    let walked = match walks {
        Walks::Behind => backend.end_local_walk(times)?,
        Walks::Here | Walks::Merged => None,
    };
    beside.settle(walked, times);
    loaded
}

/// The host's phases while the local walk may run in the background
/// ([`Backend::begin_local_walk`]), each call's kept with its interval, so that the stretch
/// of them that the walk hid counts as the walk's: `walk` is then the time the walk ran, and
/// the LET phases what they added to it.
struct Beside {
    /// Each call's start and end, and its phases.
    spans: Vec<(Instant, Instant, PhaseTimes)>,
}

impl Beside {
    /// No call yet.
    fn new() -> Self {
        Self { spans: Vec::new() }
    }

    /// Runs `f` with phases of its own, kept with the call's interval.
    fn time<T>(&mut self, f: impl FnOnce(&mut PhaseTimes) -> T) -> T {
        let (t0, mut t) = (Instant::now(), PhaseTimes::default());
        let r = f(&mut t);
        self.spans.push((t0, Instant::now(), t));
        r
    }

    /// Adds the calls' phases to `times`; with `end` (when the local walk that ran beside
    /// them ended, host clock), the share of each call that lay before it as `walk`.
    fn settle(self, end: Option<Instant>, times: &mut PhaseTimes) {
        for (start, stop, phases) in self.spans {
            let hidden = match end {
                Some(end) if end > start && stop > start => {
                    (end.min(stop) - start).as_secs_f64() / (stop - start).as_secs_f64()
                }
                _ => 0.0,
            };
            for (name, secs) in phases.iter() {
                times.add(name, secs * (1.0 - hidden));
                if hidden > 0.0 {
                    times.add("walk", secs * hidden);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::CpuBackend;
    use crate::comm::SingleProcess;
    use crate::ics::{generate, Model};
    use crate::walk::WalkKind;

    /// The host's phases beside a background walk: the stretch of each before the walk's end
    /// counts as `walk`, the rest keeps its name, and nothing is lost or counted twice.
    #[test]
    fn phases_beside_the_walk_count_as_the_walk_until_it_ends() {
        use std::time::Duration;
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let phases = |name: &'static str, secs: f64| {
            let mut t = PhaseTimes::default();
            t.add(name, secs);
            t
        };
        let beside = || Beside {
            spans: vec![
                (at(0), at(10), phases("let", 0.010)),
                (at(10), at(30), phases("exchange", 0.020)),
                (at(30), at(40), phases("let", 0.010)),
            ],
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // The walk ended halfway through the exchange.
        let mut times = PhaseTimes::default();
        beside().settle(Some(at(20)), &mut times);
        assert!(close(times.get("walk"), 0.020), "{times:?}");
        assert!(close(times.get("let"), 0.010), "{times:?}");
        assert!(close(times.get("exchange"), 0.010), "{times:?}");
        // It ended after them all: they were all hidden.
        let mut times = PhaseTimes::default();
        beside().settle(Some(at(50)), &mut times);
        assert!(close(times.get("walk"), 0.040), "{times:?}");
        assert!(
            close(times.get("let") + times.get("exchange"), 0.0),
            "{times:?}"
        );
        // No walk beside them (the CPU): they keep their names.
        let mut times = PhaseTimes::default();
        beside().settle(None, &mut times);
        assert!(close(times.get("walk"), 0.0), "{times:?}");
        assert!(close(times.get("let"), 0.020), "{times:?}");
        assert!(close(times.get("exchange"), 0.020), "{times:?}");
    }

    /// A rebuild's trees are built in the domains' key cube while it holds the particles, and
    /// in the particles' own cube once they have left it.
    #[test]
    fn trees_are_built_in_the_domains_cube_while_it_holds_the_particles() {
        let p = generate(Model::Plummer, 2000, 3).unwrap();
        let mut backend = CpuBackend::new(WalkKind::Grouped, 0.01);
        backend.load(&p, false).unwrap();
        let own = GridBox::of_points(&p.pos);
        let roomy = own.widened(0.25);
        let mut frame = |cube| {
            agree(&mut backend, &SingleProcess, true, 0.01, 0.0, cube)
                .unwrap()
                .1
                .unwrap()
                .cube
        };
        assert_eq!(frame(Some(roomy)), roomy);
        assert_eq!(frame(None), own);
        // A cube the particles have left (shifted by half its side) is not used.
        let left = GridBox {
            origin: roomy.origin + DVec3::splat(0.5 * roomy.side),
            side: roomy.side,
        };
        let (lo, hi) = crate::sfc::bounding_box(&p.pos);
        assert!(roomy.holds(lo, hi) && !left.holds(lo, hi));
        assert_eq!(frame(Some(left)), own);
    }
}
