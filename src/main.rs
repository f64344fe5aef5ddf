//! The `hinoki` command line: subcommands `run`, `ics` and `forces`.
//!
//! Every failure ends with one line `error: …` on stderr and a non-zero exit status.

use clap::{Args, Parser, Subcommand};
use hinoki::comm::Comm;
use hinoki::diag::report::{check_against_direct, forces_json, forces_table};
use hinoki::forces::{Backend, ForceEngine, ForceParams, Method, WalkKind};
use hinoki::ics::{generate, Model};
use hinoki::io::{read_ic, write_ic, RunConfig};
use hinoki::sfc::Order;
use hinoki::simulation;
use hinoki::walk::gpu::VgChoice;
use hinoki::walk::mac::Mac;
use hinoki::{Error, Particles, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hinoki",
    version,
    about = "Barnes–Hut tree code for gravitational N-body simulation"
)]
struct Cli {
    /// Worker threads for the CPU stages (default: all cores, or RAYON_NUM_THREADS).
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
    /// Write initial conditions to a hinoki IC file.
    Ics(IcsArgs),
    /// Compute one force evaluation and report times, interactions and (with --check) errors
    /// against float64 direct summation.
    Forces(ForcesArgs),
}

#[derive(Args)]
struct RunArgs {
    /// The run configuration (TOML); omit it for the built-in default problem.
    config: Option<PathBuf>,
    /// Output directory (overrides the config's [output] dir).
    #[arg(long, short)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct IcsArgs {
    /// Model: plummer, hernquist, nfw, uniform-sphere, uniform-cube, figure-eight-3,
    /// figure-eight-4, random-bodies, disk-galaxy, cartwheel.
    model: Model,
    /// Number of particles.
    #[arg(long, short)]
    n: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    #[arg(long, short)]
    output: PathBuf,
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
    /// Read the particles from a hinoki IC file.
    #[arg(long)]
    input: Option<PathBuf>,
    #[command(flatten)]
    gravity: GravityArgs,
    /// Compare K randomly chosen particles (all when K >= N) with float64 direct summation.
    #[arg(long, value_name = "K")]
    check: Option<usize>,
    /// Seed for choosing the --check sample.
    #[arg(long, default_value_t = 12345)]
    check_seed: u64,
    /// Print exactly one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// Force-evaluation options shared by the subcommands that compute forces.
#[derive(Args)]
struct GravityArgs {
    /// Opening angle θ.
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().theta)]
    theta: f32,
    /// Opening criterion: bh (l/d < θ), modified (l/θ + s < d), accel (GADGET relative).
    #[arg(long, default_value_t = ForceParams::default().mac)]
    mac: Mac,
    /// Tolerance α of the acceleration criterion.
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().alpha)]
    alpha: f32,
    /// Multipole order: 1 (monopole) or 2 (quadrupole).
    #[arg(long, default_value_t = ForceParams::default().multipole)]
    multipole: u8,
    /// Largest number of particles in a leaf (N_crit).
    #[arg(long, default_value_t = ForceParams::default().ncrit)]
    ncrit: usize,
    /// Particles per group in the grouped walk.
    #[arg(long, default_value_t = ForceParams::default().group)]
    group: usize,
    /// Particle ordering: hilbert, morton, none.
    #[arg(long, default_value_t = ForceParams::default().order)]
    order: Order,
    /// Plummer softening length ε.
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().eps)]
    eps: f64,
    /// Gravitational constant.
    #[arg(long = "G", allow_negative_numbers = true, default_value_t = ForceParams::default().g)]
    g: f64,
    /// Force method: tree or direct (exact float64 summation).
    #[arg(long, default_value_t = ForceParams::default().method)]
    method: Method,
    /// CPU tree walk: grouped or single (one next/more walk per particle).
    #[arg(long, default_value_t = ForceParams::default().walk)]
    walk: WalkKind,
    /// Where the walk runs: cpu, gpu, auto.
    #[arg(long, default_value_t = ForceParams::default().backend)]
    backend: Backend,
    /// GPU kernel shape "V,G" (V targets per thread, G threads, a power of two ≤ 32, per group),
    /// or "auto" to time a few shapes on the first force evaluation and keep the fastest.
    #[arg(long, default_value_t = ForceParams::default().vg)]
    vg: VgChoice,
}

impl GravityArgs {
    fn params(&self) -> ForceParams {
        ForceParams {
            theta: self.theta,
            mac: self.mac,
            alpha: self.alpha,
            multipole: self.multipole,
            ncrit: self.ncrit,
            group: self.group,
            order: self.order,
            eps: self.eps,
            g: self.g,
            method: self.method,
            walk: self.walk,
            backend: self.backend,
            vg: self.vg,
        }
    }
}

fn main() -> ExitCode {
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
                        "error: a subcommand is needed: run, ics or forces (see hinoki --help)"
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
        Err(e) => {
            eprintln!("error: {e}");
            if comm.size() > 1 {
                // End every rank instead of leaving the others waiting in a collective.
                comm.abort(1);
            }
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("HINOKI_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn dispatch(cli: Cli, comm: &dyn Comm) -> Result<()> {
    if comm.size() > 1 {
        return Err(Error::comm(format!(
            "rank {} of {}: this hinoki computes forces on one rank only (the distributed LET walk is not built yet); start it without mpirun or with -np 1",
            comm.rank(),
            comm.size()
        )));
    }
    if let Some(t) = cli.threads {
        if t == 0 {
            return Err(Error::input("--threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .map_err(|e| Error::input(format!("cannot start {t} threads: {e}")))?;
    }
    match cli.command {
        Command::Run(a) => run(a),
        Command::Ics(a) => {
            let p = generate(a.model, a.n, a.seed)?;
            write_ic(&a.output, &p)?;
            tracing::info!(
                "wrote {} {} particles to {}",
                p.len(),
                a.model,
                a.output.display()
            );
            Ok(())
        }
        Command::Forces(a) => forces(a),
    }
}

fn load_particles(
    ics: Option<Model>,
    n: usize,
    seed: u64,
    input: Option<&PathBuf>,
) -> Result<Particles> {
    match input {
        Some(path) => read_ic(path),
        None => generate(ics.unwrap_or(Model::Plummer), n, seed),
    }
}

fn forces(a: ForcesArgs) -> Result<()> {
    let params = a.gravity.params();
    params.validate()?;
    if a.check == Some(0) {
        return Err(Error::input("--check needs at least 1 particle"));
    }
    let p = load_particles(a.ics, a.n, a.seed, a.input.as_ref())?;
    p.validate()?;
    let mut engine = ForceEngine::new(params.clone())?;
    let result = engine.compute(&p, None)?;
    let check = a
        .check
        .map(|k| check_against_direct(&p, &params, &result, k, a.check_seed));
    if a.json {
        let mut report = forces_json(p.len(), &params, &result, check.as_ref());
        report["memory"] = serde_json::json!({ "device_bytes": engine.device_bytes() });
        report["vg_used"] = serde_json::json!(engine.layout().map(|l| l.to_string()));
        println!("{report}");
    } else {
        print!(
            "{}",
            forces_table(p.len(), &params, &result, check.as_ref())
        );
    }
    Ok(())
}

fn run(a: RunArgs) -> Result<()> {
    let cfg = match &a.config {
        Some(path) => RunConfig::load(path)?,
        None => RunConfig::default(),
    };
    let out = a.out.unwrap_or_else(|| cfg.output.dir.clone());
    let s = simulation::run(&cfg, &out)?;
    println!(
        "hinoki run: N = {}, {} steps to t = {:.4} in {:.1} s; energy {:.8e} -> {:.8e}, |dE/E| = {:.3e}",
        s.n, s.steps, s.time, s.wall_seconds, s.start.total, s.end.total, s.energy_error
    );
    let phases: Vec<String> = s.times.iter().map(|(n, t)| format!("{n} {t:.2}")).collect();
    println!("time per phase [s]: {}", phases.join(", "));
    println!("final particles: {}", s.final_state.display());
    Ok(())
}
