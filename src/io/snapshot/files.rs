//! Snapshot file names, GADGET's: `snapshot_NNN.hdf5` for a one-file snapshot,
//! `snapdir_NNN/snapshot_NNN.k.hdf5` (k = 0 … files − 1) for a set of several files; a set of
//! binary files (SnapFormat 1 or 2) is named `base.k`, without an extension.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The file that rank `rank` of a `size`-rank job writes for snapshot `number` into `dir`:
/// `dir/snapshot_NNN.hdf5` for one rank, else `dir/snapdir_NNN/snapshot_NNN.rank.hdf5`.
pub fn snapshot_path(dir: &Path, number: usize, rank: usize, size: usize) -> PathBuf {
    if size == 1 {
        dir.join(format!("snapshot_{number:03}.hdf5"))
    } else {
        dir.join(format!("snapdir_{number:03}"))
            .join(format!("snapshot_{number:03}.{rank}.hdf5"))
    }
}

/// The file to open first for the snapshot that `path` names: `path` itself when it is a
/// file; `path.0` when there is no `path` but that file (the set `base.0`, `base.1`, … of
/// GADGET's binary files named by its base); or the one `*.0.hdf5` or `*.0` file of a
/// snapshot directory.
pub(super) fn first_file(path: &Path) -> Result<PathBuf> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            let mut member = path.as_os_str().to_os_string();
            member.push(".0");
            let member = PathBuf::from(member);
            return match member.is_file() {
                true => Ok(member),
                false => Err(Error::io(path, format!("cannot read: {e}"))),
            };
        }
    };
    if !meta.is_dir() {
        return Ok(path.to_path_buf());
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| Error::io(path, format!("cannot read: {e}")))?;
    let mut firsts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.to_str()
                .is_some_and(|s| s.ends_with(".0.hdf5") || s.ends_with(".0"))
        })
        .collect();
    firsts.sort();
    match firsts.len() {
        1 => Ok(firsts.remove(0)),
        0 => Err(Error::io(
            path,
            "no snapshot in this directory (no file named *.0.hdf5 or *.0)",
        )),
        _ => Err(Error::io(
            path,
            format!(
                "{} snapshots in this directory (files *.0.hdf5 or *.0); name one of their \
                 files",
                firsts.len()
            ),
        )),
    }
}

/// The `files` files of the set that `first` belongs to, in order: `first` alone when
/// `files == 1`, else `base.0` … `base.{files-1}` next to `first`, whose name must be
/// `base.k`, with the extension `.hdf5` or none (which the other names then share). Named one
/// at a time, so that a header announcing 2^31 files costs nothing before the first missing
/// one is found. `field` names the header field that gave `files` in the error.
pub(super) fn set_members<'a>(
    first: &'a Path,
    files: usize,
    field: &str,
) -> Result<Box<dyn Iterator<Item = PathBuf> + 'a>> {
    if files == 1 {
        return Ok(Box::new(std::iter::once(first.to_path_buf())));
    }
    let name = first.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (stem, extension) = match name.strip_suffix(".hdf5") {
        Some(stem) => (stem, ".hdf5"),
        None => (name, ""),
    };
    let base = stem
        .rsplit_once('.')
        .filter(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        .map(|(base, _)| base)
        .ok_or_else(|| {
            Error::io(
                first,
                format!(
                    "{field} = {files}, but the file name is not of the form BASE.K.hdf5 or \
                     BASE.K that names the files of a set"
                ),
            )
        })?;
    let base = base.to_string();
    Ok(Box::new((0..files).map(move |k| {
        first.with_file_name(format!("{base}.{k}{extension}"))
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gadget_names() {
        let d = Path::new("out");
        assert_eq!(snapshot_path(d, 7, 0, 1), d.join("snapshot_007.hdf5"));
        assert_eq!(
            snapshot_path(d, 12, 3, 4),
            d.join("snapdir_012/snapshot_012.3.hdf5")
        );
        assert_eq!(snapshot_path(d, 1234, 0, 1), d.join("snapshot_1234.hdf5"));
    }

    #[test]
    fn members_of_a_set() {
        let f = Path::new("s/snapshot_003.1.hdf5");
        let field = "/Header NumFilesPerSnapshot";
        let members = |f, n| set_members(f, n, field).unwrap().collect::<Vec<_>>();
        assert_eq!(
            members(f, 3),
            [
                "s/snapshot_003.0.hdf5",
                "s/snapshot_003.1.hdf5",
                "s/snapshot_003.2.hdf5"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(members(f, 1), vec![f.to_path_buf()]);
        assert_eq!(
            set_members(f, usize::MAX, field).unwrap().nth(7).unwrap(),
            PathBuf::from("s/snapshot_003.7.hdf5")
        );
        // GADGET's binary sets: base.k without an extension.
        assert_eq!(
            members(Path::new("ics/ics_64.2"), 3),
            ["ics/ics_64.0", "ics/ics_64.1", "ics/ics_64.2"].map(PathBuf::from)
        );
        for single in ["s/snapshot_003.hdf5", "s/ics", "s/ics.x"] {
            let err = set_members(Path::new(single), 2, field).err().unwrap();
            assert!(err.message.contains("NumFilesPerSnapshot = 2"), "{err}");
        }
    }
}
