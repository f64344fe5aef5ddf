//! The `hinoki` command line: subcommands `run`, `ics`, `forces`, `render` and `plot`.
//!
//! Every failure ends with one line `error: …` on stderr and a non-zero exit status.

use clap::{Args, Parser, Subcommand};
use glam::DVec3;
use hinoki::comm::{Comm, SingleProcess};
use hinoki::cosmology::measure::ShotNoise;
use hinoki::diag::report::{check_against_direct, forces_json, forces_table};
use hinoki::diag::PhaseTimes;
use hinoki::domain::{measured_imbalance, Balance, Load};
use hinoki::forces::{ForceEngine, ForceParams};
use hinoki::gpu::DeviceWork;
use hinoki::ics::Model;
use hinoki::io::config::IcsConfig;
use hinoki::io::{write_snapshot_file, RunConfig, SnapshotCosmology, SnapshotMeta, SnapshotUnits};
use hinoki::render::{
    plot_diagnostics, plot_power, render_snapshot, Axis, PowerOptions, RenderOptions,
};
use hinoki::resources::{check_threads, FORCES_BYTES, FORCES_GPU_BYTES, PARTICLE_BYTES};
use hinoki::simulation::{self, check_forces, initial_particles};
use hinoki::{Error, Particles, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "hinoki",
    version,
    about = "Barnes–Hut tree code for gravitational N-body simulation"
)]
struct Cli {
    /// Worker threads for the CPU stages (default: all cores, or RAYON_NUM_THREADS); at most 4
    /// per core this process may run on.
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a simulation: the built-in default problem (a Plummer sphere of 65,536 particles)
    /// without a config, or the problem a TOML config describes.
    Run(RunArgs),
    /// Write initial conditions to an HDF5 snapshot (GADGET-4 layout): a model at time 0
    /// (`hinoki ics MODEL --n N -o FILE`), or cosmological initial conditions in GADGET's units
    /// (`hinoki ics cosmology -o FILE`, see `hinoki ics cosmology --help`).
    Ics(IcsArgs),
    /// Compute one force evaluation and report times, interactions and (with --check) errors
    /// against float64 direct summation.
    Forces(ForcesArgs),
    /// Decompose the particles over P virtual ranks in this one process and build every LET,
    /// reporting per-rank particles, cost and LET volume (one JSON line per P): the distributed
    /// design judged at cluster scale without a cluster.
    VirtualRanks(VirtualRanksArgs),
    /// Draw a snapshot's projected surface density (log scale, viridis) as a PNG: all its
    /// particles or those of some types, through its whole depth or a slab; a periodic box
    /// (BoxSize > 0) is drawn whole about its centre, each particle at its nearest image.
    Render(RenderArgs),
    /// Draw a run's diagnostics.jsonl: energy error and seconds per phase versus time
    /// (`hinoki plot DIAGNOSTICS -o FILE`), or a cosmological snapshot's power spectrum
    /// (`hinoki plot power SNAPSHOT -o FILE`, see `hinoki plot power --help`).
    Plot(PlotArgs),
}

#[derive(Args)]
struct VirtualRanksArgs {
    /// Generate the particles from this model (see `hinoki ics --help`).
    #[arg(long, conflicts_with = "input")]
    ics: Option<Model>,
    /// Number of particles for --ics.
    #[arg(long, short, default_value_t = 1 << 20)]
    n: usize,
    /// Random seed for --ics.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read the particles from a file instead.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Comma-separated numbers of virtual ranks, e.g. 1,4,16,256,4096.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,64,256,1024,4096"
    )]
    ranks: Vec<usize>,
    #[command(flatten)]
    gravity: ForceParams,
}

#[derive(Args)]
struct RenderArgs {
    /// The snapshot: one file (HDF5, or GADGET's binary SnapFormat 1 or 2), any file of a
    /// multi-file set, its snapdir, or the base name of a binary set base.0, base.1, ….
    snapshot: PathBuf,
    /// Output picture (.png).
    #[arg(long, short)]
    output: PathBuf,
    /// Projection axis (line of sight): x, y or z.
    #[arg(long, default_value_t = Axis::Z)]
    axis: Axis,
    /// Width of the picture in pixels.
    #[arg(long, default_value_t = RenderOptions::default().width)]
    width: u32,
    /// Half-width of the view in length units (default: half the periodic box, or the radius
    /// around the centre that holds 99% of the mass drawn).
    #[arg(long, allow_negative_numbers = true)]
    extent: Option<f64>,
    /// Centre of the view in length units (default: the centre of the periodic box, or the
    /// centre of mass of the particles drawn).
    #[arg(long, value_name = "X,Y,Z", allow_hyphen_values = true, value_parser = parse_point)]
    center: Option<DVec3>,
    /// Particle types to draw, e.g. 1,4 (GADGET's: 0 gas, 1 halo, 2 disk, 3 bulge, 4 stars,
    /// 5 boundary; default: all).
    #[arg(long, value_name = "T,T,...", value_delimiter = ',')]
    types: Option<Vec<u8>>,
    /// Draw only the slab of this thickness (length units) centred on the plane through the
    /// centre across the line of sight (default: the whole depth).
    #[arg(long, value_name = "THICKNESS", allow_negative_numbers = true)]
    slab: Option<f64>,
}

#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true
)]
struct PlotArgs {
    #[command(subcommand)]
    power: Option<PlotCommand>,
    /// A run's diagnostics file (diagnostics.jsonl in its output directory).
    #[arg(required = true)]
    diagnostics: Option<PathBuf>,
    /// Output picture (.png or .svg).
    #[arg(long, short, required = true)]
    output: Option<PathBuf>,
    /// Width of the picture in pixels (the height is 9/10 of it).
    #[arg(long, default_value_t = 900)]
    width: u32,
}

#[derive(Subcommand)]
enum PlotCommand {
    /// The matter power spectrum of a periodic cosmological snapshot against linear theory
    /// and Halofit.
    ///
    /// Cloud-in-cell assignment on an N³ grid, FFT, the CIC window divided out and (by
    /// default) the Poisson shot noise V Σm²/(Σm)² subtracted, averaged in shells of width
    /// 2π/L up to the grid's Nyquist wave number; k in h/Mpc, P in (Mpc/h)³ (lengths converted
    /// with the snapshot's UnitLength_in_cm, kpc/h when it records none). The linear curve is
    /// D(a)² P_EH98(k) with Ω_m, Ω_Λ, Ω_b (0.045 if absent) and h from the header, a = Time,
    /// and σ8 and n_s from the options; the Halofit curve (Takahashi et al. 2012) is the
    /// nonlinear spectrum of the same linear one at that a (flat or open ΛCDM; not drawn where
    /// it equals linear theory, at high redshift).
    Power(PowerArgs),
}

#[derive(Args)]
struct PowerArgs {
    /// The snapshot: one file (HDF5, or GADGET's binary SnapFormat 1 or 2), any file of a
    /// multi-file set, its snapdir, or the base name of a binary set base.0, base.1, ….
    snapshot: PathBuf,
    /// Output picture (.png or .svg).
    #[arg(long, short)]
    output: PathBuf,
    /// σ8 of the linear spectrum today (the header does not record it).
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    sigma8: f64,
    /// n_s, the primordial spectral index of the linear spectrum.
    #[arg(long, default_value_t = 0.96, allow_negative_numbers = true)]
    n_s: f64,
    /// Grid side N, a power of two from 2 to 512 (default: the largest power of two <=
    /// 2 N_particles^(1/3), from 8 to 256).
    #[arg(long, value_name = "N")]
    grid: Option<usize>,
    /// Shot noise: subtract the Poisson term, or keep it (right for a perturbed lattice such
    /// as `hinoki ics cosmology`'s initial conditions, whose noise is far below Poisson).
    #[arg(long, value_name = "subtract|keep", default_value = "subtract", value_parser = parse_shot_noise)]
    shot_noise: ShotNoise,
    /// Width of the picture in pixels (the height is 3/4 of it).
    #[arg(long, default_value_t = 900)]
    width: u32,
    /// Also print the numbers as one JSON object on stdout: per shell k, modes, the measured,
    /// linear and Halofit power and power/Halofit (see the README).
    #[arg(long)]
    json: bool,
}

/// Parses `subtract` or `keep`.
fn parse_shot_noise(s: &str) -> std::result::Result<ShotNoise, String> {
    match s {
        "subtract" => Ok(ShotNoise::Subtract),
        "keep" => Ok(ShotNoise::Keep),
        _ => Err(format!("expected subtract or keep, got {s:?}")),
    }
}

/// Parses "x,y,z" into a point.
fn parse_point(s: &str) -> std::result::Result<DVec3, String> {
    let parts: Vec<&str> = s.split(',').collect();
    let numbers: Vec<f64> = parts
        .iter()
        .map(|p| p.trim().parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("expected three numbers X,Y,Z: {e}"))?;
    match numbers[..] {
        [x, y, z] if numbers.iter().all(|v| v.is_finite()) => Ok(DVec3::new(x, y, z)),
        [_, _, _] => Err("the coordinates must be finite".to_string()),
        _ => Err(format!(
            "expected three numbers X,Y,Z, got {}",
            numbers.len()
        )),
    }
}

/// Parses an interval between progress lines (seconds, finite, > 0).
fn parse_seconds(s: &str) -> std::result::Result<f64, String> {
    let seconds = s
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("expected a number of seconds: {e}"))?;
    simulation::progress::check_line_seconds(seconds)
}

#[derive(Args)]
struct RunArgs {
    /// The run configuration (TOML); omit it for the built-in default problem.
    config: Option<PathBuf>,
    /// Output directory (overrides the config's [output] dir).
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Continue from the newest good checkpoint in DIR (the earlier run's output directory or
    /// its checkpoint directory); give the same config and rank count as the earlier run.
    #[arg(long, value_name = "DIR")]
    restart: Option<PathBuf>,
    /// Write a checkpoint and stop after STEPS steps (a run that continues with --restart
    /// ends bit for bit as one that never stopped).
    #[arg(long, value_name = "STEPS", value_parser = clap::value_parser!(u64).range(1..))]
    stop_after: Option<u64>,
    /// Log one line per step as well (time, step sizes, active particles, energies,
    /// milliseconds per phase).
    #[arg(long, short)]
    verbose: bool,
    /// Seconds between two progress lines (steps, simulated time, time per step, time left,
    /// |dE/E|) when stderr is not a terminal; a terminal shows a progress bar instead.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = simulation::progress::DEFAULT_LINE_SECONDS,
        value_parser = parse_seconds
    )]
    progress_every: f64,
}

#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true
)]
struct IcsArgs {
    #[command(subcommand)]
    cosmology: Option<IcsCommand>,
    /// Model: plummer, hernquist, nfw, uniform-sphere, uniform-cube, figure-eight-3,
    /// figure-eight-4, random-bodies, disk-galaxy, cartwheel (or `cosmology`, see
    /// `hinoki ics cosmology --help`).
    #[arg(required = true)]
    model: Option<Model>,
    /// Number of particles.
    #[arg(long, short, required = true)]
    n: Option<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file (HDF5, e.g. plummer.hdf5).
    #[arg(long, short, required = true)]
    output: Option<PathBuf>,
}

#[derive(Subcommand)]
enum IcsCommand {
    /// Cosmological initial conditions (2LPT or Zel'dovich) as a GADGET-4 snapshot in GADGET's
    /// units.
    ///
    /// An N³ grid of particles in a periodic box, moved by second-order Lagrangian perturbation
    /// theory (2LPT, as N-GenIC and 2LPTic; `--lpt 1`: the Zel'dovich approximation) from a
    /// Gaussian field of the Eisenstein & Hu (1998) linear power spectrum normalised to σ8 (or
    /// of fixed amplitudes, or its paired partner), written in GADGET's default units, which
    /// GADGET-4 reads as initial conditions:
    /// comoving positions in kpc/h in [0, BoxSize), velocities u = v_pec/√a in km/s
    /// (GADGET's snapshot convention), masses in 10^10 M_sun/h, ids 1 … N³; `Time` = a,
    /// `Redshift`, `BoxSize` (kpc/h), `Omega0`, `OmegaBaryon`, `OmegaLambda`, `HubbleParam` in
    /// `/Header`, the units in `/Parameters` and `/Header`. With `--sphere R` only the sphere
    /// of radius R about the box centre is kept, moved to the origin, with open boundaries
    /// (`BoxSize` 0). `hinoki run` integrates them in comoving coordinates with a `[cosmology]`
    /// table (and refuses them without one); `forces` takes the positions as given.
    Cosmology(CosmologyArgs),
}

#[derive(Args)]
struct CosmologyArgs {
    /// Output file (HDF5, e.g. ics.hdf5).
    #[arg(long, short)]
    output: PathBuf,
    /// Particles per side: N³ particles on a grid; a power of two from 2 to 512.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 64,
        allow_negative_numbers = true
    )]
    grid: usize,
    /// Side of the periodic box in Mpc/h (comoving; written as BoxSize in kpc/h).
    #[arg(
        long = "box",
        value_name = "L",
        default_value_t = 100.0,
        allow_negative_numbers = true
    )]
    box_size: f64,
    /// Starting redshift z (>= 0; the scale factor is a = 1/(1 + z)).
    #[arg(
        long,
        value_name = "Z",
        default_value_t = 49.0,
        allow_negative_numbers = true
    )]
    z_start: f64,
    /// Ω_m, matter density today in units of the critical density.
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    omega_m: f64,
    /// Ω_b, baryon density today (0 < Ω_b < Ω_m; shapes the power spectrum, the particles
    /// carry all the matter).
    #[arg(long, default_value_t = 0.045, allow_negative_numbers = true)]
    omega_b: f64,
    /// Ω_Λ, the cosmological constant today.
    #[arg(long, default_value_t = 0.7, allow_negative_numbers = true)]
    omega_lambda: f64,
    /// h, the Hubble constant in units of 100 km/s/Mpc.
    #[arg(
        long,
        value_name = "H",
        default_value_t = 0.7,
        allow_negative_numbers = true
    )]
    hubble_param: f64,
    /// σ8, the rms linear density contrast today in spheres of 8 Mpc/h.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    sigma8: f64,
    /// n_s, the primordial spectral index.
    #[arg(long, default_value_t = 0.96, allow_negative_numbers = true)]
    n_s: f64,
    /// Random seed of the Gaussian field (the same particles for the same options, whatever
    /// the number of threads).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep only the sphere of radius R (Mpc/h, comoving; 0 < R <= box/2) about the box
    /// centre, centred on the origin, with open boundaries (BoxSize 0): e.g. `--grid 256
    /// --box 91.4 --sphere 31.5`, 2.87 M particles in 45 Mpc.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    sphere: Option<f64>,
    /// Order of Lagrangian perturbation theory: 1 (Zel'dovich) or 2 (2LPT, as N-GenIC's
    /// NGENIC_2LPT and 2LPTic make them).
    #[arg(
        long,
        value_name = "ORDER",
        default_value_t = 2,
        value_parser = clap::value_parser!(u8).range(1..=2)
    )]
    lpt: u8,
    /// Fixed amplitudes: every mode's |δ_k|² = P(k)/V exactly, its random phase kept (Angulo
    /// & Pontzen 2016; GADGET-4's NGENIC_FIX_MODE_AMPLITUDES).
    #[arg(long)]
    fixed_amplitudes: bool,
    /// The paired realisation: every mode negated, δ_k → −δ_k (Pontzen et al. 2016; GADGET-4's
    /// NGENIC_MIRROR_PHASES); run it beside the unpaired one of the same seed.
    #[arg(long)]
    paired: bool,
}

#[derive(Args)]
struct ForcesArgs {
    /// Generate the particles from this model (see `hinoki ics --help`).
    #[arg(long, conflicts_with = "input")]
    ics: Option<Model>,
    /// Number of particles for --ics.
    #[arg(long, short, default_value_t = 65536)]
    n: usize,
    /// Random seed for --ics.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read the particles from a snapshot, hinoki's or GADGET's (HDF5, or GADGET's binary
    /// SnapFormat 1 or 2): one file, any file of a multi-file set, its snapdir, or the base
    /// name of a binary set base.0, base.1, ….
    #[arg(long)]
    input: Option<PathBuf>,
    #[command(flatten)]
    gravity: ForceParams,
    /// Compare K randomly chosen particles (all when K >= N) with float64 direct summation.
    #[arg(long, value_name = "K")]
    check: Option<usize>,
    /// Seed for choosing the --check sample.
    #[arg(long, default_value_t = 12345)]
    check_seed: u64,
    /// Print exactly one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Evaluate the forces R times on the same particles and report the last evaluation
    /// (warm GPU and buffers; with --balance cost each one rebalances on the last one's cost).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
}

fn main() -> ExitCode {
    // Temporary files older than this that dead processes left are stale (io::atomic).
    hinoki::io::atomic::process_start();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as K;
            match e.kind() {
                K::DisplayHelp | K::DisplayVersion => {
                    let _ = e.print();
                    return ExitCode::SUCCESS;
                }
                K::DisplayHelpOnMissingArgumentOrSubcommand => {
                    eprintln!(
                        "error: a subcommand is needed: run, ics, forces, render, plot or virtual-ranks (see hinoki --help)"
                    );
                    return ExitCode::from(2);
                }
                _ => {}
            }
            // Clap's message is several lines: what is wrong (up to the first blank line, e.g.
            // the list of missing arguments), then usage. Keep the first part, on one line.
            let text = e.render().to_string();
            let what: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("{}", what.join(" "));
            return ExitCode::from(2);
        }
    };
    init_logging();
    // A stop signal (Slurm's USR1 before the time limit, a preemption's TERM) that comes while the
    // run starts must not end the process: it stops the run, with a checkpoint, after its first
    // step.
    if matches!(cli.command, Command::Run(_)) {
        if let Err(e) = hinoki::simulation::signals::install() {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    // MPI starts only under a launcher; the communicator lives to the end of main (dropping it
    // finalises MPI).
    let comm = match hinoki::comm::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match dispatch(cli, &*comm) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&*comm, e),
    }
}

/// Reports a failed command once for the whole job: rank 0 prints an error every rank shares
/// (all of them learnt it, or all failed), and every rank ends normally. An error of this rank
/// alone is printed here, and the job is aborted, instead of leaving the other ranks waiting in
/// a collective.
fn fail(comm: &dyn Comm, e: Error) -> ExitCode {
    let shared = if e.is_shared() {
        Some(e.clone())
    } else {
        comm.first_error(Some(&e))
    };
    match shared {
        Some(s) => {
            if comm.rank() == 0 {
                print_error(&s);
            }
            // A launcher may end the job when its first rank exits non-zero: none leaves
            // before rank 0 has printed.
            comm.barrier();
            ExitCode::FAILURE
        }
        None => {
            print_error(&e);
            comm.abort(1)
        }
    }
}

/// Prints `error: …` with one write, so that lines of several processes never interleave.
fn print_error(e: &Error) {
    let line = format!("error: {e}\n");
    eprint!("{line}");
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("HINOKI_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| hinoki::simulation::progress::LogWriter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn dispatch(cli: Cli, comm: &dyn Comm) -> Result<()> {
    if let Some(t) = cli.threads {
        check_threads(t, "--threads")?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .map_err(|e| Error::input(format!("cannot start {t} threads: {e}")))?;
    } else if let Some(t) = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&t| t > 0)
    {
        // rayon reads it itself (and ignores a value that is not a positive number).
        check_threads(t, "RAYON_NUM_THREADS")?;
    }
    hinoki::comm::affinity::warn_if_starved(comm, cli.threads);
    match cli.command {
        Command::Run(a) => run(a, comm),
        Command::Ics(a) => ics(a),
        Command::Forces(a) => forces(a, comm),
        Command::VirtualRanks(a) => virtual_ranks(a),
        Command::Render(a) => {
            // One picture: rank 0 reads the whole snapshot and draws it.
            if comm.rank() != 0 {
                return Ok(());
            }
            let opts = RenderOptions {
                axis: a.axis,
                width: a.width,
                extent: a.extent,
                center: a.center,
                types: a.types,
                slab: a.slab,
                ..RenderOptions::default()
            };
            let n = render_snapshot(&a.snapshot, &opts, &a.output)?;
            tracing::info!("drew {n} particles to {}", a.output.display());
            Ok(())
        }
        Command::Plot(a) => match (a.power, a.diagnostics, a.output) {
            (Some(PlotCommand::Power(p)), _, _) => power(p),
            (None, Some(d), Some(o)) => plot_diagnostics(&d, &o, a.width),
            // clap requires both without the subcommand.
            _ => Err(Error::input("plot: DIAGNOSTICS and --output are required")),
        },
    }
}

fn ics(a: IcsArgs) -> Result<()> {
    if let Some(IcsCommand::Cosmology(c)) = a.cosmology {
        return ics_cosmology(c);
    }
    // Clap requires these without a subcommand.
    let (Some(model), Some(n), Some(output)) = (a.model, a.n, a.output) else {
        return Err(Error::input("hinoki ics needs MODEL, --n and --output"));
    };
    let source = particle_source(Some(model), n, a.seed, None);
    let p = initial_particles(&source, &SingleProcess, PARTICLE_BYTES, false)?;
    write_snapshot_file(&output, &p, SnapshotMeta::nbody(0.0))?;
    tracing::info!(
        "wrote {} {} particles to {}",
        p.len(),
        model,
        output.display()
    );
    Ok(())
}

/// `hinoki ics cosmology`: every value is checked (by the cosmology library) before anything
/// is computed, and the file is written atomically.
fn ics_cosmology(c: CosmologyArgs) -> Result<()> {
    use hinoki::cosmology::field::{Amplitudes, Realisation};
    use hinoki::cosmology::{
        cosmological_ics, hubble_for_units, Cosmology, IcsOptions, LptOrder, PowerSpectrum,
    };
    if !(c.z_start.is_finite() && c.z_start >= 0.0) {
        return Err(Error::input(format!(
            "--z-start = {} must be finite and >= 0 (the scale factor a = 1/(1 + z) in (0, 1])",
            c.z_start
        )));
    }
    let a_start = 1.0 / (1.0 + c.z_start);
    // GADGET's units: kpc/h and km/s, H0 = 0.1 per internal time unit (not used by the
    // initial conditions, which work in Mpc/h and km/s).
    let hubble = hubble_for_units(c.hubble_param, 1e-3 / c.hubble_param, 1.0);
    let cosmology = Cosmology::new(c.omega_m, c.omega_lambda, c.hubble_param, hubble)?;
    let power = PowerSpectrum::new(&cosmology, c.omega_b, c.n_s, c.sigma8)?;
    hinoki::cosmology::field::Grid::new(c.grid, c.box_size)?;
    let n = (c.grid as u64).pow(3);
    hinoki::resources::ensure_memory(
        hinoki::cosmology::COSMOLOGICAL_ICS_BYTES * n,
        &format!("{n} cosmological particles ({}^3)", c.grid),
    )?;
    if let Some(r) = c.sphere {
        hinoki::cosmology::check_sphere(c.box_size, r)?;
    }
    let options = IcsOptions {
        order: if c.lpt == 1 {
            LptOrder::Zeldovich
        } else {
            LptOrder::Second
        },
        realisation: Realisation {
            seed: c.seed,
            amplitudes: if c.fixed_amplitudes {
                Amplitudes::Fixed
            } else {
                Amplitudes::Gaussian
            },
            paired: c.paired,
        },
        ..IcsOptions::new(c.grid, c.box_size, a_start, c.seed)
    };
    let ics = cosmological_ics(&cosmology, &power, &options)?;
    let box_kpc = 1000.0 * ics.box_size;
    let cosmology = SnapshotCosmology {
        box_size: box_kpc,
        redshift: ics.redshift,
        omega0: c.omega_m,
        omega_baryon: c.omega_b,
        omega_lambda: c.omega_lambda,
        hubble_param: c.hubble_param,
    };
    let a = ics.scale_factor;
    let mut meta = SnapshotMeta::comoving(a, cosmology, SnapshotUnits::GADGET);
    let mut p = ics.into_gadget();
    let field = [
        Some(if c.lpt == 1 { "Zel'dovich" } else { "2LPT" }),
        c.fixed_amplitudes.then_some("fixed amplitudes"),
        c.paired.then_some("paired"),
    ];
    let field = field.into_iter().flatten().collect::<Vec<_>>().join(", ");
    let grid = format!("{}^3, box {} Mpc/h, {field}", c.grid, c.box_size);
    let region = match c.sphere {
        Some(r) => {
            p = hinoki::cosmology::cut_sphere(p, box_kpc, 1000.0 * r)?;
            meta.cosmology.box_size = 0.0;
            format!("a sphere of radius {r} Mpc/h about the centre of {grid}, open boundaries")
        }
        None => grid,
    };
    write_snapshot_file(&c.output, &p, meta)?;
    tracing::info!(
        "wrote {} particles ({region}, z = {}, a = {a}) to {} in GADGET's units (kpc/h, km/s \
         with u = v/sqrt(a), 10^10 M_sun/h)",
        p.len(),
        c.z_start,
        c.output.display()
    );
    Ok(())
}

/// Where the options `--ics`, `--n`, `--seed` and `--input` say the particles come from.
fn particle_source(ics: Option<Model>, n: usize, seed: u64, input: Option<PathBuf>) -> IcsConfig {
    match input {
        Some(path) => IcsConfig::file(path),
        None => IcsConfig::Generate {
            model: ics.unwrap_or(Model::Plummer),
            n,
            seed,
        },
    }
}

/// Prints on standard output (as `print!`/`println!`), but a reader that went away (a pipe
/// closed early, as `| head` leaves it) ends the output quietly instead of a panic.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// [`out!`] with a new line.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// `hinoki plot power`: the picture, and the numbers on stdout with `--json`.
fn power(p: PowerArgs) -> Result<()> {
    let opts = PowerOptions {
        sigma8: p.sigma8,
        n_s: p.n_s,
        grid: p.grid,
        shot_noise: p.shot_noise,
        width: p.width,
    };
    let report = plot_power(&p.snapshot, &p.output, &opts)?;
    if p.json {
        outln!("{report}");
    }
    Ok(())
}

/// `hinoki forces`: `--repeat` evaluations on the particles, the last one reported. Every
/// second from the start to the report is in a named phase of `times` (the evaluations'
/// `total` and the [`COMMAND_PHASES`](hinoki::diag::timers::COMMAND_PHASES) around them).
fn forces(a: ForcesArgs, comm: &dyn Comm) -> Result<()> {
    let wall = Instant::now();
    let mut times = PhaseTimes::default();
    let params = a.gravity;
    let mut engine = times.time("startup", || -> Result<ForceEngine> {
        params.validate()?;
        if a.check == Some(0) {
            return Err(Error::input("--check needs at least 1 particle"));
        }
        if a.repeat == 0 {
            return Err(Error::input("--repeat needs at least 1 evaluation"));
        }
        ForceEngine::new(params.clone())
    })?;
    times.time("connect", || engine.connect(comm))?;
    // Each rank starts from its share of the input; the domain decomposition then gives it a
    // slice of the Peano–Hilbert curve. The particles go to the engine once (on the GPU: to the
    // device, where they stay) and come back after the last evaluation.
    let t0 = Instant::now();
    let source = particle_source(a.ics, a.n, a.seed, a.input);
    // The GPU's room for this rank's share, before the particles are made or read.
    simulation::ensure_device_room(&mut engine, &source, comm, comm.size() > 1)?;
    let host_bytes = match engine.layout() {
        Some(_) => FORCES_GPU_BYTES,
        None => FORCES_BYTES,
    };
    let p = initial_particles(&source, comm, host_bytes, false)?;
    let n_total = comm.allgather_u64(&[p.len() as u64]).iter().sum::<u64>() as usize;
    // On one rank nothing moves: the engine needs the positions and masses only, and the
    // particles stay here for the report. With several ranks they move, and come back after
    // the last evaluation.
    let p = match comm.size() {
        1 => {
            engine.load_positions(&p)?;
            Some(p)
        }
        _ => {
            engine.load(&p)?;
            None
        }
    };
    times.add("ics", t0.elapsed().as_secs_f64());
    // NCCL connected while the particles were read: the evaluations are timed with it.
    times.time("connect", || engine.adopt_exchange(comm, true))?;
    let mut result = None;
    let mut moved = 0usize;
    // The first evaluation always balances the domains (the initial shares are not slices of
    // the curve); the others where the last one's load imbalance asks for it, as a run does
    // (the particles do not move, so none strays from its domain or leaves its cube).
    let mut imbalance = f64::INFINITY;
    let mut work = DeviceWork::default();
    for _ in 0..a.repeat {
        let bus0 = engine.bus_bytes();
        let work0 = engine.device_work().unwrap_or_default();
        let mut around = PhaseTimes::default();
        let load = Load {
            imbalance,
            outgrown: false,
        };
        let rebalance = comm.size() > 1 && engine.rebalance_due(load);
        moved = match rebalance {
            true => around.time("domain", || engine.decompose(comm, params.balance))?,
            false => 0,
        };
        let mut r = engine.evaluate(comm, None, None)?;
        // The last evaluation's results go before the ranks meet: freeing them (hundreds of
        // MB at 2^24 particles) takes each rank its own time, which would otherwise hold up
        // the next evaluation's first collective.
        around.time("results", || drop(result.take()));
        // The ranks agree on the imbalance; the wait there is the slowest rank's lead.
        let cost = r
            .p2p
            .iter()
            .zip(&r.m2p)
            .map(|(&a, &b)| (a + b) as u64)
            .sum();
        imbalance = around.time("wait", || measured_imbalance(comm, cost));
        r.times.merge(&around);
        times.merge(&r.times);
        // What crossed the bus in this evaluation, its decomposition included.
        let bus = engine.bus_bytes();
        r.bus_bytes = (bus.0 - bus0.0, bus.1 - bus0.1);
        work = engine.device_work().unwrap_or_default() - work0;
        result = Some(r);
    }
    let result = result.expect("at least one evaluation");
    let p = match p {
        Some(p) => p,
        None => times.time("results", || engine.particles())?,
    };
    times.time("check", || check_forces(comm, &p, &result.acc, &result.pot))?;
    // Reported as used: `auto` choices resolved for the backend.
    let params = engine.params().clone();
    let t0 = Instant::now();
    let check = match a.check {
        Some(k) => Some(check_against_direct(
            comm,
            &p,
            &params,
            &result,
            k,
            a.check_seed,
        )?),
        None => None,
    };
    let ranks = ranks_report(comm, &p, &result, &engine, work, moved, &params);
    times.add("report", t0.elapsed().as_secs_f64());
    let command = command_report(comm, &result, &times, wall.elapsed().as_secs_f64());
    if comm.rank() != 0 {
        return Ok(());
    }
    if a.json {
        let mut report = forces_json(n_total, &params, &result, check.as_ref());
        for (k, v) in ranks.into_iter().chain(command) {
            report[k] = v;
        }
        // This rank's device bytes at the end, by stage, and at the most, per particle it
        // holds; and whether the stages' transient arrays were released.
        let memory = engine.device_memory();
        let per = |bytes: f64| bytes / engine.particle_count().max(1) as f64;
        report["memory"] = serde_json::json!({
            "device_bytes": memory.total(),
            "bytes_per_particle": per(memory.total() as f64),
            "by_stage": memory,
        });
        if let Some((peak, release)) = engine.device_peak() {
            report["memory"]["peak_bytes"] = serde_json::json!(peak);
            report["memory"]["peak_bytes_per_particle"] = serde_json::json!(per(peak as f64));
            report["memory"]["plan"] = serde_json::json!(match release {
                true => "release",
                false => "keep",
            });
        }
        report["vg_used"] = serde_json::json!(engine.layout().map(|l| l.to_string()));
        outln!("{report}");
    } else {
        out!(
            "{}",
            forces_table(n_total, &params, &result, check.as_ref())
        );
        let several = comm.size() > 1;
        for (k, v) in ranks.into_iter().filter(|_| several).chain(command) {
            outln!("  {k}: {v}");
        }
    }
    Ok(())
}

/// The whole command's part of the force report: the last evaluation apart from returning its
/// results (`evaluation`: `total` less `download` and `unsort`, the seconds a scaling study
/// compares), and every phase of the command (`times`, all evaluations), its wall time `wall`
/// (seconds) and the share of it in named phases (`coverage`, 0 … 1), each as its spread
/// (min, mean, max) over the ranks. Collective.
fn command_report(
    comm: &dyn Comm,
    last: &hinoki::forces::ForceResult,
    times: &PhaseTimes,
    wall: f64,
) -> Vec<(&'static str, serde_json::Value)> {
    use hinoki::diag::ranks::{coverage, phase_spreads, spread, spreads_json};
    use serde_json::json;
    let t = &last.times;
    let evaluation = spread(comm, t.get("total") - t.get("download") - t.get("unsort"));
    let (wall, coverage) = coverage(comm, times, wall);
    vec![
        (
            "evaluation",
            json!({ "seconds": evaluation.max, "ranks": evaluation }),
        ),
        (
            "command",
            json!({ "wall": wall, "coverage": coverage,
                    "time_ranks": spreads_json(&phase_spreads(comm, times)) }),
        ),
    ]
}

fn virtual_ranks(a: VirtualRanksArgs) -> Result<()> {
    let params = a.gravity;
    params.validate()?;
    let source = particle_source(a.ics, a.n, a.seed, a.input);
    let p = initial_particles(&source, &SingleProcess, FORCES_BYTES, false)?;
    // Cost weights: the interactions of each particle in one force evaluation.
    let cost = match params.balance {
        Balance::Cost => {
            let r = ForceEngine::new(params.clone())?.compute(&SingleProcess, &p, None)?;
            Some(
                r.p2p
                    .iter()
                    .zip(&r.m2p)
                    .map(|(&a, &b)| (a + b) as f64)
                    .collect::<Vec<f64>>(),
            )
        }
        Balance::Count => None,
    };
    for &ranks in &a.ranks {
        let v = hinoki::diag::virtual_ranks::study(&p, cost.as_deref(), ranks, &params)?;
        outln!("{}", serde_json::to_string(&v).unwrap_or_default());
    }
    Ok(())
}

/// The multi-rank parts of the force report: times of the slowest rank and their spread, load
/// imbalance, LET and particle traffic (with `params`' boxes per rank and how the LETs were
/// walked), the device work of the evaluation `work` (on a GPU), and the conserved totals (N,
/// mass, id checksums).
fn ranks_report(
    comm: &dyn Comm,
    p: &Particles,
    r: &hinoki::forces::ForceResult,
    engine: &ForceEngine,
    work: DeviceWork,
    moved: usize,
    params: &ForceParams,
) -> Vec<(&'static str, serde_json::Value)> {
    use hinoki::diag::ranks::{phase_spreads, slowest_json, spread, spreads, spreads_json};
    use serde_json::json;
    let phases = phase_spreads(comm, &r.times);
    let walk = spread(comm, r.times.get("walk") + r.times.get("walk_let"));
    let ls = engine.let_stats();
    let traffic = spreads(
        comm,
        &[
            p.len() as f64,
            ls.bytes_sent as f64,
            ls.bytes_received as f64,
            ls.cells_received as f64,
            ls.particles_received as f64,
            moved as f64,
            r.bus_bytes.0 as f64,
            r.bus_bytes.1 as f64,
            work.launches as f64,
            work.waits as f64,
        ],
    );
    let mut sums = [
        p.len() as u64,
        p.id.iter().fold(0u64, |s, &i| s.wrapping_add(i)),
        p.id.iter()
            .fold(0u64, |s, &i| s.wrapping_add(i.wrapping_mul(i))),
    ];
    comm.allreduce_sum_u64(&mut sums);
    let mut mass = [p.total_mass()];
    comm.allreduce_sum_f64(&mut mass);
    let mut inter = [r.p2p.iter().chain(&r.m2p).map(|&x| x as f64).sum::<f64>()];
    comm.allreduce_sum_f64(&mut inter);
    let slowest_walk = phases
        .iter()
        .filter(|(n, _)| *n == "walk" || *n == "walk_let")
        .map(|(_, s)| s.max)
        .sum::<f64>();
    vec![
        ("ranks", json!(comm.size())),
        ("time", slowest_json(&phases)),
        ("time_ranks", spreads_json(&phases)),
        (
            "imbalance",
            json!({ "walk": walk.imbalance(), "particles": traffic[0].imbalance() }),
        ),
        (
            "lets",
            json!({
                "boxes_per_rank": params.let_boxes,
                "walk": params.lets.resolve(params.periodic()).name(),
                "exchange": engine.exchange(),
                "bytes_sent": traffic[1], "bytes_received": traffic[2],
                "cells_received": traffic[3], "particles_received": traffic[4],
            }),
        ),
        (
            "domain",
            json!({ "particles": traffic[0], "particles_moved": traffic[5],
                    "bytes_moved": { "max": traffic[5].max * 64.0, "mean": traffic[5].mean * 64.0 } }),
        ),
        (
            "bus_bytes_ranks",
            json!({ "up": traffic[6], "down": traffic[7] }),
        ),
        (
            "device_work_ranks",
            match traffic[8].max > 0.0 {
                true => json!({ "launches": traffic[8], "waits": traffic[9] }),
                false => json!(null),
            },
        ),
        (
            "conservation",
            json!({ "n": sums[0], "id_sum": sums[1], "id_square_sum": sums[2], "mass": mass[0] }),
        ),
        (
            "interactions_job",
            json!({ "total": inter[0],
                    "per_second": if slowest_walk > 0.0 { inter[0] / slowest_walk } else { 0.0 } }),
        ),
    ]
}

fn run(a: RunArgs, comm: &dyn Comm) -> Result<()> {
    let cfg = match &a.config {
        Some(path) => RunConfig::load(path)?,
        None => RunConfig::default(),
    };
    let out = a.out.unwrap_or_else(|| cfg.output.dir.clone());
    let opts = simulation::RunOptions {
        restart: a.restart,
        stop_after: a.stop_after,
        verbose: a.verbose,
        progress_seconds: a.progress_every,
    };
    let s = simulation::run_with(&cfg, &out, comm, &opts)?;
    if comm.rank() != 0 {
        return Ok(());
    }
    if let Some(why) = &s.stopped {
        outln!(
            "hinoki run: {why} at step {}, {}; checkpoint in {}; continue with: hinoki run{} -o {} --restart {}",
            s.steps,
            s.describe_end(),
            out.join("checkpoint").display(),
            a.config.as_ref().map_or(String::new(), |c| format!(" {}", c.display())),
            out.display(),
            out.display()
        );
        return Ok(());
    }
    match s.scale_factor {
        // The energy of comoving coordinates is not conserved: no |dE/E| to give.
        Some(_) => outln!(
            "hinoki run: N = {}, {} steps to {} in {:.1} s (comoving; |dE/E| n/a)",
            s.n,
            s.steps,
            s.describe_end(),
            s.wall_seconds
        ),
        None => outln!(
            "hinoki run: N = {}, {} steps to t = {:.4} in {:.1} s; energy {:.8e} -> {:.8e}, |dE/E| = {:.3e}",
            s.n, s.steps, s.time, s.wall_seconds, s.start.total, s.end.total, s.energy_error
        ),
    }
    let phases: Vec<String> = s.times.iter().map(|(n, t)| format!("{n} {t:.2}")).collect();
    outln!("time per phase [s]: {}", phases.join(", "));
    outln!("{}; {} rebalances", s.describe_coverage(), s.rebalances);
    if let Some(line) = s.describe_step_costs() {
        outln!("{line}");
    }
    if let Some((calls, steps)) = s.mpi_calls.filter(|c| c.1 > 0) {
        outln!(
            "MPI (rank 0): {:.1} collective operations a step, over {steps} steps",
            calls as f64 / steps as f64
        );
    }
    match s.final_files.as_slice() {
        [one] => outln!("final particles: {}", one.display()),
        [first, .., last] => outln!(
            "final particles: {} … {} ({} files)",
            first.display(),
            last.display(),
            s.final_files.len()
        ),
        [] => {}
    }
    Ok(())
}
