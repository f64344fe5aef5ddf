//! Cosmological runs in a periodic box end to end (comoving integration, the Ewald-corrected
//! CPU walk), against independent references: a Zel'dovich pancake (one plane wave, exact in
//! one dimension until its shell crossing) follows the closed-form Zel'dovich solution, and
//! the measured power of Zel'dovich initial conditions grows at the largest scales as the
//! linear growth factor squared.

mod common;

use common::TempDir;
use glam::DVec3;
use hinoki::comm::SingleProcess;
use hinoki::cosmology::measure::{measured_power, ShotNoise};
use hinoki::cosmology::{cosmological_ics, Cosmology, IcsOptions, LptOrder, PowerSpectrum};
use hinoki::io::{
    read_snapshot, write_snapshot_file, RunConfig, SnapshotCosmology, SnapshotMeta, SnapshotUnits,
};
use hinoki::particles::Particles;
use hinoki::simulation::{run_with, RunOptions, RunSummary};
use std::f64::consts::PI;
use std::path::Path;

/// G in GADGET's units (kpc/h, km/s, 10¹⁰ M_sun/h; GADGET-2's constant), given to the runs as
/// `[gravity] G`, and H0 = 100 km/s/Mpc in them.
const G: f64 = 43007.1;
const H0: f64 = 0.1;

/// Writes `p` as GADGET initial conditions at scale factor `a` in a periodic box of side
/// `box_size` (kpc/h) with Ω_m `omega_m` and Ω_Λ `omega_lambda` (h = 0.7), and runs `table`
/// (`[gravity]`, `[time]`, `[cosmology]`, `[output]`) on it in `dir/out`.
fn run_in_box(
    dir: &TempDir,
    p: &Particles,
    a: f64,
    box_size: f64,
    (omega_m, omega_lambda): (f64, f64),
    table: &str,
) -> RunSummary {
    let ics = dir.join("ics.hdf5");
    let header = SnapshotCosmology {
        box_size,
        redshift: 1.0 / a - 1.0,
        omega0: omega_m,
        omega_baryon: 0.0,
        omega_lambda,
        hubble_param: 0.7,
    };
    let meta = SnapshotMeta::comoving(a, header, SnapshotUnits::GADGET);
    common::writing_hdf5(|| write_snapshot_file(&ics, p, meta)).unwrap();
    let text = format!("[ics]\nfile = {:?}\n{table}", ics.to_str().unwrap());
    let cfg = RunConfig::from_toml_str(&text, "test.toml").unwrap();
    run_with(
        &cfg,
        &dir.join("out"),
        &SingleProcess,
        &RunOptions::default(),
    )
    .expect("run")
}

/// The particles of a snapshot sorted by id, with its Time.
fn sorted_snapshot(path: &Path) -> (Particles, f64) {
    let (p, t) = read_snapshot(&SingleProcess, path).unwrap();
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.sort_by_key(|&i| p.id[i as usize]);
    let mut q = p;
    q.permute(&order);
    (q, t)
}

/// `d` wrapped into [−L/2, L/2): the separation of nearest images in a box of side `l`.
fn nearest(d: f64, l: f64) -> f64 {
    d - l * (d / l).round()
}

/// The Zel'dovich pancake in Einstein–de Sitter (D = a): sheets of Lagrangian coordinate q
/// along x at x = q − (a/a_c) sin(kq)/k, k = 2π/L, whose shell crossing (∂x/∂q = 0 at q = 0)
/// is at a = a_c; their momenta p = a² dx/dt = −H0 a^{3/2} sin(kq)/(k a_c), GADGET's velocity
/// u = p/a^{3/2} = −H0 sin(kq)/(k a_c) constant. Exact in one dimension until a_c.
struct Pancake {
    /// Box side (kpc/h).
    side: f64,
    /// Scale factor of the shell crossing.
    a_cross: f64,
}

impl Pancake {
    fn k(&self) -> f64 {
        2.0 * PI / self.side
    }

    /// The displacement x − q of the sheet at q at scale factor `a` (kpc/h).
    fn displacement(&self, q: f64, a: f64) -> f64 {
        -(a / self.a_cross) * (self.k() * q).sin() / self.k()
    }

    /// GADGET's velocity u of the sheet at q (km/s; constant in time).
    fn velocity(&self, q: f64) -> f64 {
        -H0 * (self.k() * q).sin() / (self.k() * self.a_cross)
    }

    /// `nx` sheets of `nt`² particles (a square lattice across x, spacing side/nt) at scale
    /// factor `a`, in [0, side)³, of total mass the critical density times the volume (Ω_m =
    /// 1), ids in lattice order from 1, with the sheets' Lagrangian coordinates q.
    fn lattice(&self, nx: usize, nt: usize, a: f64) -> (Particles, Vec<f64>) {
        let (dx, dt) = (self.side / nx as f64, self.side / nt as f64);
        let rho = 3.0 * H0 * H0 / (8.0 * PI * G);
        let mass = rho * self.side.powi(3) / (nx * nt * nt) as f64;
        let mut p = Particles::default();
        let mut qs = Vec::new();
        for i in 0..nx {
            // Off the crossing plane q = 0 by a quarter spacing: no sheet at a symmetry point.
            let q = (i as f64 + 0.25) * dx;
            let x = q + self.displacement(q, a);
            for j in 0..nt {
                for l in 0..nt {
                    let pos = DVec3::new(x, (j as f64 + 0.5) * dt, (l as f64 + 0.5) * dt);
                    let vel = DVec3::new(self.velocity(q), 0.0, 0.0);
                    p.push(pos, vel, mass, p.len() as u64 + 1);
                    qs.push(q);
                }
            }
        }
        (p, qs)
    }
}

/// A plane wave along x in a periodic Einstein–de Sitter box (64 Mpc/h, 8 sheets of 16²
/// particles: the transverse spacing half the sheets', so that the lattice's departure from
/// uniform sheets, ∝ e^{−2π s/d⊥} at a separation s, stays far below the bound even where the
/// wave has drawn the sheets to half their spacing; in one dimension the Zel'dovich solution
/// is exact for discrete sheets too, until they cross), set up with the Zel'dovich solution
/// at a = 0.05 to cross shells at a_c = 1, run with the tree (θ = 0.3, quadrupoles) and shared
/// steps of 0.05 in ln a to a = 0.5: at the predicted snapshot of a = 0.25 and the final one
/// every particle is where the Zel'dovich solution puts it, and moves at its velocity, to 1 %
/// of the displacement's and the velocity's amplitudes (issue 16), and stays on its lattice
/// line across x.
#[test]
fn a_zeldovich_pancake_follows_the_closed_form_until_shell_crossing() {
    let dir = TempDir::new("cosmology-pancake");
    let wave = Pancake {
        side: 64_000.0,
        a_cross: 1.0,
    };
    let (nx, nt) = (8, 16);
    let a_start = 0.05;
    let (p, q) = wave.lattice(nx, nt, a_start);
    let eps = 0.02 * wave.side / nx as f64;
    let table = format!(
        "[gravity]\nbackend = \"cpu\"\ntheta = 0.3\nmultipole = 2\neps = {eps}\nG = {G}\n\
         [time]\nstepping = \"shared\"\ndt = 0.05\n\
         [cosmology]\nomega_m = 1.0\nomega_lambda = 0.0\nhubble_param = 0.7\nz_end = 1.0\n\
         output_redshifts = [3.0]\n[output]\npictures = false\n"
    );
    let s = run_in_box(&dir, &p, a_start, wave.side, (1.0, 0.0), &table);
    println!("{} steps, {:.1} s", s.steps, s.wall_seconds);
    assert_eq!(s.scale_factor, Some(0.5));
    let snapshot = dir.join("out/snapshots/snapshot_000.hdf5");
    for (path, a) in [
        (snapshot.as_path(), 0.25),
        (s.final_files[0].as_path(), 0.5),
    ] {
        let (end, t) = sorted_snapshot(path);
        assert!((t - a).abs() < 1e-12, "{} at a = {t}", path.display());
        assert_eq!(end.len(), p.len());
        let amplitude = (a / wave.a_cross) / wave.k();
        let speed = H0 / (wave.k() * wave.a_cross);
        let (mut worst_x, mut worst_u, mut worst_across) = (0.0f64, 0.0f64, 0.0f64);
        for (i, &q) in q.iter().enumerate() {
            let x = q + wave.displacement(q, a);
            worst_x = worst_x.max(nearest(end.pos[i].x - x, wave.side).abs() / amplitude);
            worst_u = worst_u.max((end.vel[i].x - wave.velocity(q)).abs() / speed);
            let across = DVec3::new(0.0, end.pos[i].y - p.pos[i].y, end.pos[i].z - p.pos[i].z);
            let drift = nearest(across.y, wave.side).hypot(nearest(across.z, wave.side));
            let stray = drift.max(end.vel[i].y.hypot(end.vel[i].z) * amplitude / speed);
            worst_across = worst_across.max(stray / amplitude);
        }
        println!(
            "a = {a}: largest error {worst_x:.2e} of the displacement amplitude {amplitude:.0} \
             kpc/h, {worst_u:.2e} of the velocity amplitude {speed:.1} km/s; across x \
             {worst_across:.2e}"
        );
        assert!(worst_x < 0.01, "a = {a}: position error {worst_x:.3e}");
        assert!(worst_u < 0.01, "a = {a}: velocity error {worst_u:.3e}");
        assert!(worst_across < 0.01, "a = {a}: across x {worst_across:.3e}");
    }
}

/// Zel'dovich initial conditions (the library's `cosmological_ics` of first order, flat ΛCDM, 32³ particles in a
/// 150 Mpc/h box) run from z = 49 to z = 9 with the tree (θ = 0.5) and shared steps of 0.05
/// in ln a: the power measured in the shells of k ≤ 3 k_f (cloud-in-cell on a 64³ grid, no
/// shot-noise subtraction: a perturbed lattice has far less than Poisson noise there) grows by
/// D(a)²/D(a_start)² of `Cosmology::growth` to 2 % in each shell (issue 16); the same
/// realisation at both times, so the ratio has no cosmic variance.
///
/// The shells from 4 k_f on (k Δ ≥ 0.8, Δ the lattice spacing) are printed, not asserted:
/// there a lattice's modes grow more slowly than a fluid's, by an amount ∝ (k Δ)² (Marcos et
/// al. 2006, Phys. Rev. D 73, 103507): −3, −5, −6, −8, −10 % at 4 … 8 k_f, the same with
/// θ = 0.1, and with four times smaller steps, and a quarter of it with 64³ particles (on
/// an H100, docs/performance.md). Without the periodic frame's random centre the
/// fundamental mode grew 5 % too fast with θ = 0.5 (the tree's errors added up coherently).
#[test]
fn the_largest_scales_grow_as_the_linear_growth_factor() {
    let dir = TempDir::new("cosmology-growth");
    let (omega_m, omega_lambda, h) = (0.3, 0.7, 0.7);
    // Mpc/h and km/s for the initial conditions (the `hubble` of these units is 100).
    let cosmology = Cosmology::new(omega_m, omega_lambda, h, 100.0).unwrap();
    let power = PowerSpectrum::new(&cosmology, 0.05, 0.96, 0.8).unwrap();
    let (n, side, a_start, a_end) = (32, 150.0, 0.02, 0.1);
    let options = IcsOptions {
        order: LptOrder::Zeldovich,
        ..IcsOptions::new(n, side, a_start, 7)
    };
    let ics = cosmological_ics(&cosmology, &power, &options).unwrap();
    let p = ics.into_gadget();
    let box_kpc = 1000.0 * side;
    let eps = box_kpc / n as f64 / 25.0;
    let table = format!(
        "[gravity]\nbackend = \"cpu\"\ntheta = 0.5\neps = {eps}\nG = {G}\n\
         [time]\nstepping = \"shared\"\ndt = 0.05\n\
         [cosmology]\nomega_m = {omega_m}\nomega_lambda = {omega_lambda}\nhubble_param = {h}\n\
         z_end = 9.0\n[output]\npictures = false\n"
    );
    let s = run_in_box(&dir, &p, a_start, box_kpc, (omega_m, omega_lambda), &table);
    println!("{} steps, {:.1} s", s.steps, s.wall_seconds);
    assert_eq!(s.scale_factor, Some(a_end));
    let (end, t) = sorted_snapshot(&s.final_files[0]);
    assert!((t - a_end).abs() < 1e-12);
    let grid = 2 * n;
    let spectrum =
        |q: &Particles| measured_power(&q.pos, &q.mass, box_kpc, grid, ShotNoise::Keep).unwrap();
    let (before, after) = (spectrum(&p), spectrum(&end));
    let want = (cosmology.growth(a_end).unwrap() / cosmology.growth(a_start).unwrap()).powi(2);
    let kf = 2.0 * PI / box_kpc;
    let mut worst = Vec::new();
    for (b, e) in before.iter().zip(&after).filter(|(b, _)| b.k < 8.5 * kf) {
        assert_eq!((b.k, b.modes), (e.k, e.modes));
        let growth = e.power / b.power;
        println!(
            "k = {:.2} k_f ({} modes): P grew by {growth:.4}, D² by {want:.4}: {:+.2} %",
            b.k / kf,
            b.modes,
            100.0 * (growth / want - 1.0)
        );
        if b.k < 3.5 * kf {
            worst.push((growth / want - 1.0).abs());
        }
    }
    assert_eq!(worst.len(), 3);
    assert!(worst.iter().all(|w| *w < 0.02), "{worst:?}");
}
