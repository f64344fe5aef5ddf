//! Atomic file replacement: a file is written completely or not at all.
//!
//! The data go to a temporary file next to the target (same directory, hence same file
//! system), which is flushed, synced to disk and then renamed over the target. A reader sees
//! either the old file or the complete new one, never a partial write, and a crash or an error
//! part-way leaves the old file as it was. [`write_atomic`] hands the writer a buffered file;
//! [`replace_atomic`] hands it the temporary path, for libraries that open files themselves.
//!
//! A process killed while it writes (`kill -9`, the OOM killer, a node failure) leaves its
//! temporary file behind. The first write of a process into a directory removes such stale
//! temporaries (see [`remove_stale_temporaries`]), and a run removes those in its whole output
//! directory when it starts, so a restart cleans up after the run it continues.

use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

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
    remove_stale_temporaries(tmp.parent().unwrap_or(Path::new(".")));
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

/// The moment this process started, as far as stale temporary files go: the time of the first
/// call (`main` makes it first thing). Every rank of a job has started before any rank writes
/// (they meet in a collective first), so no temporary of this job is older.
pub fn process_start() -> SystemTime {
    static START: OnceLock<SystemTime> = OnceLock::new();
    *START.get_or_init(SystemTime::now)
}

/// Removes, once per directory and process (later calls for `dir` return at once), the
/// temporary files of [`write_atomic`] and [`replace_atomic`] in `dir` that no live process
/// will finish: names `.{name}.tmp.{pid}.{k}` whose pid is not this process's, is no running
/// process on this machine, and whose file was last modified before this process started
/// ([`process_start`]: a live process on another node, whose pid means nothing here, writes
/// only after this process has started). Best effort: nothing is removed where `/proc` cannot
/// tell which processes run, and errors are ignored.
pub fn remove_stale_temporaries(dir: &Path) {
    static DONE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    let start = process_start();
    let first = DONE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(dir.to_path_buf());
    if !first || !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(temporary_pid) else {
            continue;
        };
        let alive = Path::new("/proc").join(pid.to_string()).exists();
        let older = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < start);
        if pid != std::process::id() && !alive && older && fs::remove_file(entry.path()).is_ok() {
            tracing::info!(
                "removed {}, left by process {pid} that ended while writing",
                entry.path().display()
            );
        }
    }
}

/// [`remove_stale_temporaries`] in `root` and every directory below it (symbolic links are
/// not followed): a run's whole output directory, whose snapshot and checkpoint directories
/// it may not write into again.
pub fn remove_stale_temporaries_below(root: &Path) {
    remove_stale_temporaries(root);
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_stale_temporaries_below(&entry.path());
        }
    }
}

/// The pid in a temporary file's name `.{name}.tmp.{pid}.{k}`, or `None` for other names.
fn temporary_pid(name: &str) -> Option<u32> {
    let (rest, k) = name.strip_prefix('.')?.rsplit_once('.')?;
    let (rest, pid) = rest.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let named = rest.strip_suffix(".tmp").is_some_and(|n| !n.is_empty());
    (named && digits(k) && digits(pid)).then(|| pid.parse().ok())?
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
    fn temporary_names_are_recognised() {
        assert_eq!(temporary_pid(".snapshot_008.hdf5.tmp.4242.7"), Some(4242));
        for other in [
            "snapshot_008.hdf5.tmp.4242.7",
            "..tmp.1.2",
            ".a.tmp.x.2",
            ".a.tmp.1.",
            ".a.tmp.1",
            ".a.tmq.1.2",
            ".a.tmp.99999999999.2",
        ] {
            assert_eq!(temporary_pid(other), None, "{other}");
        }
    }

    #[test]
    fn stale_temporaries_of_ended_processes_are_removed() {
        let dir = TestDir::new("atomic-stale");
        // A pid that has certainly ended (a child that was waited for).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let dead = child.id();
        let before = process_start() - std::time::Duration::from_secs(3600);
        let file = |name: String, modified: SystemTime| {
            let path = dir.path().join(name);
            File::create(&path).unwrap().set_modified(modified).unwrap();
            path
        };
        let stale = file(format!(".snapshot_008.hdf5.tmp.{dead}.3"), before);
        let kept = [
            // Its process ended, but after this one started (another node's rank).
            file(format!(".b.tmp.{dead}.0"), SystemTime::now()),
            // A live process (init) and this one.
            file(".c.tmp.1.0".to_string(), before),
            file(format!(".d.tmp.{}.9", std::process::id()), before),
            // Not hinoki's pattern.
            file(format!("e.tmp.{dead}.1"), before),
        ];
        write_atomic(&dir.path().join("f.txt"), |w| w.write_all(b"x")).unwrap();
        assert!(!stale.exists());
        for k in &kept {
            assert!(k.exists(), "{}", k.display());
        }
        // Once per directory: a later stale file stays until the next process.
        let later = file(format!(".g.tmp.{dead}.1"), before);
        write_atomic(&dir.path().join("f.txt"), |w| w.write_all(b"y")).unwrap();
        assert!(later.exists());
    }

    #[test]
    fn path_without_file_name_is_an_error() {
        assert!(write_atomic(Path::new("/"), |_| Ok(())).is_err());
    }
}
