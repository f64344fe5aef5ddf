//! `hinoki render` and `hinoki plot` end to end: the pictures decode, have the asked-for size,
//! show the object where it is, come out byte-identical every time, and every bad input is a
//! one-line error.

mod common;

use common::{arg, hinoki, hinoki_logging, TempDir};
use std::path::Path;
use std::process::Output;

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{what}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fails unless `out` failed with one `error:` line that mentions every needle.
fn one_line_error(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
}

/// A decoded 8-bit RGB PNG.
struct Picture {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Picture {
    fn read(path: &Path) -> Self {
        let (width, height, rgb) = common::png_rgb(path);
        Self { width, height, rgb }
    }

    /// The mean (column, row) of the pixels that satisfy `f`, and how many there are.
    fn centroid(&self, f: impl Fn([u8; 3]) -> bool) -> (f64, f64, usize) {
        self.centroid_in((0, self.width, 0, self.height), f)
    }

    /// [`Picture::centroid`] of the pixels within the box (left, right, top, bottom).
    fn centroid_in(
        &self,
        (l, r, t, b): (usize, usize, usize, usize),
        f: impl Fn([u8; 3]) -> bool,
    ) -> (f64, f64, usize) {
        let (mut sx, mut sy, mut n) = (0.0, 0.0, 0);
        for (k, px) in self.rgb.chunks_exact(3).enumerate() {
            let (x, y) = (k % self.width, k / self.width);
            if (l..=r).contains(&x) && (t..=b).contains(&y) && f([px[0], px[1], px[2]]) {
                sx += (k % self.width) as f64;
                sy += (k / self.width) as f64;
                n += 1;
            }
        }
        (sx / n.max(1) as f64, sy / n.max(1) as f64, n)
    }

    /// Bounding box (left, right, top, bottom) of the pixels of exactly `colour`.
    fn bbox(&self, colour: [u8; 3]) -> (usize, usize, usize, usize) {
        let mut b = (usize::MAX, 0, usize::MAX, 0);
        for (k, px) in self.rgb.chunks_exact(3).enumerate() {
            if px == colour {
                let (x, y) = (k % self.width, k / self.width);
                b = (b.0.min(x), b.1.max(x), b.2.min(y), b.3.max(y));
            }
        }
        b
    }
}

/// The colour of empty pixels: the bottom of viridis.
const EMPTY: [u8; 3] = [68, 1, 84];

/// Bright (yellow-green) pixels: the top of viridis.
fn bright(px: [u8; 3]) -> bool {
    px[0] > 150 && px[1] > 200 && px[2] < 120
}

#[test]
fn render_shows_the_object_where_it_is() {
    let dir = TempDir::new("render");
    let snap = dir.join("plummer.hdf5");
    ok(
        &hinoki(&["ics", "plummer", "-n", "20000", "-o", arg(&snap)]),
        "ics",
    );

    let png = dir.join("z.png");
    ok(
        &hinoki(&["render", arg(&snap), "-o", arg(&png), "--width", "400"]),
        "render",
    );
    let pic = Picture::read(&png);
    assert_eq!(pic.width, 400);
    assert!(pic.height > 300 && pic.height < 400, "{}", pic.height);
    // The map: the box of empty pixels (the corners of a round object are empty).
    let (l, r, t, b) = pic.bbox(EMPTY);
    let side = (r - l) as f64;
    assert!(
        side > 200.0 && ((b - t) as f64 - side).abs() < 3.0,
        "map {l}..{r} x {t}..{b}"
    );
    let (cx, cy, n) = pic.centroid_in((l, r, t, b), bright);
    assert!(n > 10, "no bright pixels");
    let (mx, my) = ((l + r) as f64 / 2.0, (t + b) as f64 / 2.0);
    assert!(
        (cx - mx).abs() < 0.03 * side && (cy - my).abs() < 0.03 * side,
        "({cx}, {cy}) vs ({mx}, {my})"
    );

    // Centred on x = 1 with half-width 2, along y: the sphere (at x = 0) sits a quarter of the
    // map left of the middle, still at mid-height.
    let shifted = dir.join("shifted.png");
    let out = hinoki(&[
        "render",
        arg(&snap),
        "-o",
        arg(&shifted),
        "--width",
        "400",
        "--axis",
        "y",
        "--center",
        "1,0,0",
        "--extent",
        "2",
    ]);
    ok(&out, "render --center --extent");
    let pic = Picture::read(&shifted);
    let (l, r, t, b) = pic.bbox(EMPTY);
    let side = (r - l) as f64;
    let (cx, cy, _) = pic.centroid_in((l, r, t, b), bright);
    let (mx, my) = ((l + r) as f64 / 2.0, (t + b) as f64 / 2.0);
    assert!(
        (cx - (mx - 0.25 * side)).abs() < 0.03 * side,
        "{cx} vs {mx} - {side}/4"
    );
    assert!((cy - my).abs() < 0.03 * side, "{cy} vs {my}");

    // The same input gives the same bytes (the font is embedded).
    let again = dir.join("again.png");
    ok(
        &hinoki(&["render", arg(&snap), "-o", arg(&again), "--width", "400"]),
        "render again",
    );
    assert_eq!(std::fs::read(&png).unwrap(), std::fs::read(&again).unwrap());
    // No temporary files left.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["again.png", "plummer.hdf5", "shifted.png", "z.png"]);
}

#[test]
fn render_errors_are_one_line() {
    let dir = TempDir::new("render-bad");
    let snap = dir.join("s.hdf5");
    ok(
        &hinoki(&["ics", "hernquist", "-n", "100", "-o", arg(&snap)]),
        "ics",
    );
    let png = dir.join("p.png");
    let (s, p) = (arg(&snap), arg(&png));
    one_line_error(
        &hinoki(&["render", s, "-o", p, "--axis", "w"]),
        &["x, y or z"],
    );
    one_line_error(
        &hinoki(&["render", s, "-o", p, "--width", "10"]),
        &["--width", "10"],
    );
    one_line_error(
        &hinoki(&["render", s, "-o", p, "--extent", "-1"]),
        &["--extent"],
    );
    one_line_error(
        &hinoki(&["render", s, "-o", p, "--center", "1,2"]),
        &["--center", "three"],
    );
    one_line_error(
        &hinoki(&["render", s, "-o", p, "--center", "1,2,x"]),
        &["--center"],
    );
    let jpg = dir.join("p.jpg");
    let out = hinoki(&["render", s, "-o", arg(&jpg)]);
    one_line_error(&out, &["p.jpg", ".png"]);
    // render writes no SVG, so it must not suggest one.
    assert!(!String::from_utf8_lossy(&out.stderr).contains(".svg"));
    let svg = dir.join("p.svg");
    one_line_error(&hinoki(&["render", s, "-o", arg(&svg)]), &["PNG only"]);
    let missing = dir.join("missing.hdf5");
    one_line_error(
        &hinoki(&["render", arg(&missing), "-o", p]),
        &["missing.hdf5", "cannot read"],
    );
    let nowhere = dir.join("no-dir").join("p.png");
    one_line_error(
        &hinoki(&["render", s, "-o", arg(&nowhere)]),
        &["p.png", "cannot write"],
    );
    // One mass of 1e305: the surface density overflows (plotters' colour map panicked on it).
    let heavy = dir.join("heavy.hdf5");
    let mut h = hinoki::ics::generate(hinoki::ics::Model::Plummer, 200, 2).unwrap();
    h.mass[3] = 1e305;
    common::writing_hdf5(|| hinoki::io::write_snapshot_file(&heavy, &h, 0.0)).unwrap();
    one_line_error(
        &hinoki(&[
            "render",
            arg(&heavy),
            "-o",
            p,
            "--center",
            "0,0,0",
            "--extent",
            "2",
        ]),
        &["surface density overflows", "1e305"],
    );
    assert!(!png.exists());
}

/// Views and data whose axis ranges plotters cannot draw (infinite, or too narrow for their
/// distance from the origin; its tick search never ended on them) are one-line errors.
#[test]
fn ranges_that_cannot_be_drawn_are_errors_not_hangs() {
    let dir = TempDir::new("render-far");
    let snap = dir.join("s.hdf5");
    ok(
        &hinoki(&["ics", "plummer", "-n", "100", "-o", arg(&snap)]),
        "ics",
    );
    let far = dir.join("far.hdf5");
    let mut p = hinoki::ics::generate(hinoki::ics::Model::Plummer, 100, 1).unwrap();
    p.pos.iter_mut().for_each(|x| *x *= 1e158);
    common::writing_hdf5(|| hinoki::io::write_snapshot_file(&far, &p, 0.0)).unwrap();
    let png = dir.join("p.png");
    let (s, o) = (arg(&snap), arg(&png));
    // The default view of particles beyond 1e154: the 99 % mass radius overflows.
    one_line_error(
        &hinoki(&["render", arg(&far), "-o", o]),
        &["view", "range", "--extent"],
    );
    for bad in [
        &["--center", "1e158,0,0"][..],
        &["--extent", "1e308"],
        &["--center", "1e20,0,0", "--extent", "1"],
    ] {
        let mut args = vec!["render", s, "-o", o];
        args.extend_from_slice(bad);
        one_line_error(&hinoki(&args), &["view", "range"]);
    }
    // Wide but drawable views still work.
    ok(
        &hinoki(&["render", s, "-o", o, "--extent", "8e307"]),
        "widest view",
    );
    ok(
        &hinoki(&[
            "render",
            s,
            "-o",
            o,
            "--center",
            "1e300,0,0",
            "--extent",
            "1e292",
        ]),
        "far view",
    );
    let jsonl = dir.join("d.jsonl");
    for (lines, needle) in [
        (["-1e308", "1e-5", "1e308", "1e-4"], "times"),
        (["0", "1e308", "1", "1e-4"], "energy_error"),
    ] {
        let line = |t: &str, e: &str| format!("{{\"time\": {t}, \"energy_error\": {e}}}\n");
        std::fs::write(&jsonl, line(lines[0], lines[1]) + &line(lines[2], lines[3])).unwrap();
        one_line_error(
            &hinoki(&["plot", arg(&jsonl), "-o", o]),
            &["d.jsonl", needle, "cannot be drawn"],
        );
    }
}

/// Ten diagnostics lines as a run writes them, plus a key the plot does not know.
fn diagnostics(path: &Path) {
    let lines: Vec<String> = (0..10)
        .map(|k| {
            serde_json::json!({
                "time": k as f64 * 0.1, "step": k, "kinetic": 0.25, "potential": -0.5,
                "total": -0.25, "energy_error": 1e-7 * k as f64, "momentum": [0.0, 0.0, 0.0],
                "angular_momentum": [0.0, 0.0, 0.0], "future_key": {"a": 1},
                "phase_seconds": {"sort": 0.001, "walk": 0.05 + 0.001 * k as f64, "total": 0.06},
            })
            .to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn plot_draws_png_and_svg() {
    let dir = TempDir::new("plot");
    let jsonl = dir.join("diagnostics.jsonl");
    diagnostics(&jsonl);
    let png = dir.join("d.png");
    ok(
        &hinoki(&["plot", arg(&jsonl), "-o", arg(&png), "--width", "600"]),
        "plot png",
    );
    let pic = Picture::read(&png);
    assert_eq!((pic.width, pic.height), (600, 540));
    // Lines in the first two Tableau colours: the energy error and the first phase.
    let blue = |px: [u8; 3]| px == [31, 119, 180];
    let orange = |px: [u8; 3]| px == [255, 127, 14];
    let (_, blue_row, blues) = pic.centroid(blue);
    assert!(blues > 100, "{blues} blue pixels");
    assert!(pic.centroid(orange).2 > 100);
    // Blue is drawn in both panels (the error, and the first phase's legend and line).
    assert!(blue_row > 0.0);

    let svg = dir.join("d.svg");
    ok(&hinoki(&["plot", arg(&jsonl), "-o", arg(&svg)]), "plot svg");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..50]);
    for word in ["relative energy error", "walk", "sort", "seconds"] {
        assert!(text.contains(word), "{word} missing from the SVG");
    }
}

#[test]
fn plot_errors_are_one_line() {
    let dir = TempDir::new("plot-bad");
    let png = dir.join("d.png");
    let missing = dir.join("missing.jsonl");
    one_line_error(
        &hinoki(&["plot", arg(&missing), "-o", arg(&png)]),
        &["missing.jsonl", "cannot read"],
    );
    let junk = dir.join("junk.jsonl");
    std::fs::write(&junk, "not json\n{\"step\": 1}\n\n").unwrap();
    one_line_error(
        &hinoki(&["plot", arg(&junk), "-o", arg(&png)]),
        &["junk.jsonl", "no usable"],
    );
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    one_line_error(
        &hinoki(&["plot", arg(&empty), "-o", arg(&png)]),
        &["no usable"],
    );
    let good = dir.join("good.jsonl");
    diagnostics(&good);
    let gif = dir.join("d.gif");
    one_line_error(
        &hinoki(&["plot", arg(&good), "-o", arg(&gif)]),
        &["d.gif", ".png or .svg"],
    );
    one_line_error(
        &hinoki(&["plot", arg(&good), "-o", arg(&png), "--width", "5"]),
        &["--width"],
    );
    assert!(!png.exists());
}

/// A run whose final picture cannot be written (a directory stands where `final.png` goes)
/// still succeeds: its results are written, and the pictures' failure is one warning line.
#[test]
fn a_run_whose_picture_cannot_be_drawn_succeeds_with_a_warning() {
    let dir = TempDir::new("run-picture");
    let cfg = dir.cpu_run_config(500, 0.02, "");
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("final.png")).unwrap();
    let o = hinoki_logging(&["run", arg(&cfg), "-o", arg(&out)], "warn");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let warning: Vec<&str> = err.lines().filter(|l| l.contains("pictures")).collect();
    assert!(
        warning.len() == 1
            && warning[0].contains("were not drawn")
            && warning[0].contains("final.png"),
        "{err}"
    );
    assert!(out.join("final").is_dir(), "{}", out.display());
}
