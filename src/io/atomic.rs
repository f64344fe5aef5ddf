//! Atomic file replacement: a file is written completely or not at all.
//!
//! The data go to a temporary file next to the target (same directory, hence same file
//! system), which is flushed, synced to disk and then renamed over the target. A reader sees
//! either the old file or the complete new one, never a partial write, and a crash or an error
//! part-way leaves the old file as it was. [`write_atomic`] hands the writer a buffered file;
//! [`replace_atomic`] hands it the temporary path, for libraries that open files themselves.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes the file at `path` atomically: `write` fills a buffered temporary file
/// `.{file name}.tmp.{pid}.{k}` in the same directory (`k` counts the calls in this process, so
/// concurrent writers never share one), which is then flushed, fsynced and renamed over `path`.
///
/// On any failure (the temporary file cannot be created, `write` returns an error, the flush,
/// sync or rename fails) the temporary file is removed, the previous file at `path` (if any) is
/// untouched, and the error names `path`. The new file gets default permissions, not those of
/// the file it replaces.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    replace_atomic(path, |tmp| {
        (|| {
            let mut out = BufWriter::new(File::create(tmp)?);
            write(&mut out)?;
            out.into_inner().map_err(io::IntoInnerError::into_error)?;
            Ok(())
        })()
        .map_err(|e: io::Error| Error::io(path, format!("cannot write: {e}")))
    })
}

/// Replaces the file at `path` atomically with a file that `create` makes at the path it is
/// given: a temporary path `.{file name}.tmp.{pid}.{k}` in the same directory, as in
/// [`write_atomic`]. For writers that open files themselves (the HDF5 library). Once `create`
/// returns `Ok`, the temporary file is fsynced and renamed over `path`.
///
/// On any failure the temporary file is removed and the previous file at `path` (if any) is
/// untouched; an error of `create` is returned as it is, so it should name `path`.
pub fn replace_atomic(path: &Path, create: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path)?;
    let done = create(&tmp).and_then(|()| {
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .and_then(|()| fs::rename(&tmp, path))
            .map_err(|e| Error::io(path, format!("cannot write: {e}")))
    });
    if let Err(e) = done {
        // The temporary file may not exist (creation failed); nothing else to do then.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_parent(&tmp);
    Ok(())
}

/// The temporary file for `path`: `.{file name}.tmp.{pid}.{k}` in the same directory.
fn temp_path(path: &Path) -> Result<PathBuf> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| Error::io(path, "cannot write: not a file name"))?;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(path.with_file_name(tmp))
}

/// Makes the rename durable by syncing the directory that holds `file` (Unix only). Best
/// effort: the new file is already in place, and some file systems refuse to sync a directory.
fn sync_parent(file: &Path) {
    #[cfg(unix)]
    {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testdir::TestDir;
    use std::io::Write;

    #[test]
    fn writes_and_replaces() {
        let dir = TestDir::new("atomic-ok");
        let path = dir.path().join("a.txt");
        write_atomic(&path, |w| w.write_all(b"first")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        write_atomic(&path, |w| w.write_all(b"second, longer")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second, longer");
        assert_eq!(dir.entries(), vec!["a.txt"]);
    }

    #[test]
    fn failing_writer_keeps_old_file_and_leaves_no_temp() {
        let dir = TestDir::new("atomic-fail");
        let path = dir.path().join("a.txt");
        fs::write(&path, b"old").unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(&[7u8; 100_000])?;
            Err(io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Io);
        assert!(err.message.contains("a.txt"), "{err}");
        assert!(err.message.contains("disk on fire"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(dir.entries(), vec!["a.txt"]);
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_path() {
        let dir = TestDir::new("atomic-missing");
        let path = dir.path().join("no-such-dir").join("a.txt");
        let err = write_atomic(&path, |w| w.write_all(b"x")).unwrap_err();
        assert!(
            err.message.starts_with(&path.display().to_string()),
            "{err}"
        );
        assert!(!err.message.contains('\n'));
        assert!(dir.entries().is_empty());
    }

    #[test]
    fn parent_that_is_a_file_is_an_error() {
        let dir = TestDir::new("atomic-notdir");
        fs::write(dir.path().join("f"), b"").unwrap();
        let path = dir.path().join("f").join("a.txt");
        let err = write_atomic(&path, |w| w.write_all(b"x")).unwrap_err();
        assert!(err.message.contains("a.txt"), "{err}");
    }

    #[test]
    fn failed_rename_removes_temp_file() {
        // The target is a non-empty directory: everything succeeds but the rename.
        let dir = TestDir::new("atomic-rename");
        let target = dir.path().join("d");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), b"k").unwrap();
        let err = write_atomic(&target, |w| w.write_all(b"x")).unwrap_err();
        assert!(err.message.contains("cannot write"), "{err}");
        assert_eq!(dir.entries(), vec!["d"]);
        assert_eq!(fs::read(target.join("keep")).unwrap(), b"k");
    }

    #[test]
    fn replace_atomic_failure_removes_what_create_left() {
        let dir = TestDir::new("atomic-replace");
        let path = dir.path().join("s.hdf5");
        fs::write(&path, b"old").unwrap();
        let err = replace_atomic(&path, |tmp| {
            fs::write(tmp, b"half").unwrap();
            Err(Error::io(&path, "library failed"))
        })
        .unwrap_err();
        assert!(err.message.contains("library failed"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(dir.entries(), vec!["s.hdf5"]);
        replace_atomic(&path, |tmp| {
            fs::write(tmp, b"new").map_err(|e| Error::io(&path, e))
        })
        .unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(dir.entries(), vec!["s.hdf5"]);
    }

    #[test]
    fn path_without_file_name_is_an_error() {
        assert!(write_atomic(Path::new("/"), |_| Ok(())).is_err());
    }
}
