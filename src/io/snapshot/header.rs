//! The `/Header` group of a snapshot file: GADGET's attributes, written with GADGET-4's types
//! and read from any GADGET version's.

use crate::error::{Error, Result};
use hdf5::types::VarLenUnicode;
use std::path::Path;

/// Particle types of a GADGET snapshot; every per-type array has this many entries.
pub(super) const TYPES: usize = 6;
/// The most values a header attribute is read with (GADGET's per-type arrays hold one per
/// particle type).
const MAX_VALUES: usize = 64;
/// The type hinoki's particles are (GADGET's collisionless "halo" particles).
pub(super) const HALO: usize = 1;

/// What hinoki uses of a snapshot file's header.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Header {
    /// Particles of each type in this file.
    pub this_file: [u64; TYPES],
    /// Particles of each type in the whole snapshot.
    pub total: [u64; TYPES],
    /// Mass of every particle of a type (mass units); 0 where masses are per particle.
    pub mass_table: [f64; TYPES],
    /// Simulation time of the snapshot (time units).
    pub time: f64,
    /// Files in the snapshot.
    pub files: usize,
}

impl Header {
    /// The header of a hinoki file holding `n` of the snapshot's `total` particles.
    pub fn hinoki(n: u64, total: u64, time: f64, files: usize) -> Self {
        let mut this_file = [0; TYPES];
        this_file[HALO] = n;
        let mut all = [0; TYPES];
        all[HALO] = total;
        Self {
            this_file,
            total: all,
            mass_table: [0.0; TYPES],
            time,
            files,
        }
    }

    /// Writes the header attributes into `group`, with GADGET-4's types, plus the GADGET-2
    /// cosmology fields (a non-cosmological run: Ω₀ = Ω_Λ = 0, h = 1, z = 0, no box).
    pub fn write(&self, group: &hdf5::Group) -> hdf5::Result<()> {
        group
            .new_attr::<u64>()
            .shape(TYPES)
            .create("NumPart_ThisFile")?
            .write_raw(&self.this_file)?;
        group
            .new_attr::<u64>()
            .shape(TYPES)
            .create("NumPart_Total")?
            .write_raw(&self.total)?;
        group
            .new_attr::<u32>()
            .shape(TYPES)
            .create("NumPart_Total_HighWord")?
            .write_raw(&[0u32; TYPES])?;
        group
            .new_attr::<f64>()
            .shape(TYPES)
            .create("MassTable")?
            .write_raw(&self.mass_table)?;
        let files = i32::try_from(self.files).unwrap_or(i32::MAX);
        group
            .new_attr::<i32>()
            .create("NumFilesPerSnapshot")?
            .write_scalar(&files)?;
        for (name, value) in [
            ("Time", self.time),
            ("Redshift", 0.0),
            ("BoxSize", 0.0),
            ("Omega0", 0.0),
            ("OmegaLambda", 0.0),
            ("HubbleParam", 1.0),
        ] {
            group.new_attr::<f64>().create(name)?.write_scalar(&value)?;
        }
        Ok(())
    }

    /// Reads the header of the file `path` (open as `file`). Per-type arrays may be shorter
    /// than six entries (the missing types have no particles) but must reach type 1; counts of
    /// any integer type are accepted; `NumPart_Total` is completed by `NumPart_Total_HighWord`
    /// where a GADGET-2 file split it into 32-bit words.
    pub fn read(file: &hdf5::File, path: &Path) -> Result<Self> {
        let group = file
            .group("Header")
            .map_err(|_| Error::io(path, "not a GADGET snapshot: no /Header group"))?;
        let attr = |name: &str| {
            let a = group
                .attr(name)
                .map_err(|_| Error::io(path, format!("missing /Header attribute {name}")))?;
            // A damaged file may claim any size: the values are read only when few.
            let shape = a.shape();
            let values = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            match values {
                Some(n) if n <= MAX_VALUES => Ok(a),
                _ => Err(Error::io(
                    path,
                    format!(
                        "/Header attribute {name} has shape {shape:?} (at most {MAX_VALUES} \
                         values expected)"
                    ),
                )),
            }
        };
        let bad = |name: &str, e: &dyn std::fmt::Display| {
            Error::io(path, format!("cannot read /Header attribute {name}: {e}"))
        };
        let per_type_u64 = |name: &str| -> Result<[u64; TYPES]> {
            let v = attr(name)?.read_raw::<u64>().map_err(|e| bad(name, &e))?;
            per_type(path, name, &v)
        };
        let scalar_f64 = |name: &str| -> Result<f64> {
            let v = attr(name)?.read_raw::<f64>().map_err(|e| bad(name, &e))?;
            one(path, name, &v)
        };

        let this_file = per_type_u64("NumPart_ThisFile")?;
        let mut total = per_type_u64("NumPart_Total")?;
        if group.attr("NumPart_Total_HighWord").is_ok() {
            let high = per_type_u64("NumPart_Total_HighWord")?;
            for (t, h) in total.iter_mut().zip(high) {
                if *t < 1 << 32 {
                    *t += h << 32;
                }
            }
        }
        let mass_table = {
            let v = attr("MassTable")?
                .read_raw::<f64>()
                .map_err(|e| bad("MassTable", &e))?;
            per_type(path, "MassTable", &v)?
        };
        let time = scalar_f64("Time")?;
        let files = {
            let v = attr("NumFilesPerSnapshot")?
                .read_raw::<i64>()
                .map_err(|e| bad("NumFilesPerSnapshot", &e))?;
            let k = one(path, "NumFilesPerSnapshot", &v)?;
            usize::try_from(k).ok().filter(|&k| k >= 1).ok_or_else(|| {
                Error::io(
                    path,
                    format!("/Header NumFilesPerSnapshot = {k} (must be at least 1)"),
                )
            })?
        };
        let header = Self {
            this_file,
            total,
            mass_table,
            time,
            files,
        };
        header.check(path)?;
        Ok(header)
    }

    /// Rejects values no snapshot can have: a non-finite time, a negative or non-finite table
    /// mass, more particles in the file than in the snapshot.
    fn check(&self, path: &Path) -> Result<()> {
        if !self.time.is_finite() {
            return Err(Error::io(
                path,
                format!("/Header Time = {} is not finite", self.time),
            ));
        }
        if let Some(m) = self.mass_table.iter().find(|m| !m.is_finite() || **m < 0.0) {
            return Err(Error::io(
                path,
                format!("/Header MassTable holds {m} (masses must be finite and >= 0)"),
            ));
        }
        if self.this_file[HALO] > self.total[HALO] && self.total[HALO] > 0 {
            return Err(Error::io(
                path,
                format!(
                    "/Header NumPart_ThisFile[1] = {} exceeds NumPart_Total[1] = {}",
                    self.this_file[HALO], self.total[HALO]
                ),
            ));
        }
        Ok(())
    }
}

/// Writes `/Config` with the code's name and version, where GADGET-4 records how it was built.
pub(super) fn write_config(file: &hdf5::File) -> hdf5::Result<()> {
    let group = file.create_group("Config")?;
    for (name, value) in [("Code", "hinoki"), ("Version", env!("CARGO_PKG_VERSION"))] {
        let value: VarLenUnicode = value.parse().expect("no NUL in the code's name or version");
        group
            .new_attr::<VarLenUnicode>()
            .create(name)?
            .write_scalar(&value)?;
    }
    Ok(())
}

/// A per-type array padded with zeros to six entries; it must reach type 1 and have at most six.
fn per_type<T: Copy + Default>(path: &Path, name: &str, v: &[T]) -> Result<[T; TYPES]> {
    if v.len() <= HALO || v.len() > TYPES {
        return Err(Error::io(
            path,
            format!(
                "/Header {name} has {} entries (expected {TYPES}, one per particle type)",
                v.len()
            ),
        ));
    }
    let mut out = [T::default(); TYPES];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

/// The value of a scalar (or one-element) attribute.
fn one<T: Copy>(path: &Path, name: &str, v: &[T]) -> Result<T> {
    match v {
        [x] => Ok(*x),
        _ => Err(Error::io(
            path,
            format!("/Header {name} has {} values (expected one)", v.len()),
        )),
    }
}
