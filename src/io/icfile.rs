//! hinoki's interim binary initial-conditions (IC) file: a header, four particle arrays and a
//! checksum, all little-endian.
//!
//! Layout, for N particles (offsets in bytes; the file is exactly `28 + 64 N` bytes long):
//!
//! | offset        | size  | type          | content                                          |
//! |---------------|-------|---------------|--------------------------------------------------|
//! | 0             | 8     | `[u8; 8]`     | magic `b"HINOKIIC"`                              |
//! | 8             | 4     | u32           | format version, 1                                |
//! | 12            | 8     | u64           | N, the number of particles                       |
//! | 20            | 24 N  | `[f64; 3]` × N| positions x, y, z of particle 0, then 1, …       |
//! | 20 + 24 N     | 24 N  | `[f64; 3]` × N| velocities vx, vy, vz, same order                |
//! | 20 + 48 N     | 8 N   | f64 × N       | masses                                           |
//! | 20 + 56 N     | 8 N   | u64 × N       | particle ids                                     |
//! | 20 + 64 N     | 8     | u64           | checksum: XXH64, seed 0, of bytes 0 .. 20 + 64 N |
//!
//! Integers are unsigned little-endian, floats IEEE-754 binary64 little-endian; nothing is
//! aligned or padded. Units are those of the run (N-body units by default). The checksum is
//! the standard 64-bit xxHash (`xxhsum -H64` of the file without its last 8 bytes gives the
//! same value), chosen over byte-wise FNV-1a because it hashes whole words in four lanes at
//! memory speed.
//!
//! The arrays are moved in chunks through a buffer of 64-bit words viewed as bytes with
//! bytemuck, converted with `to_le`/`from_le` (no-ops on little-endian hosts, which is all
//! hinoki runs on, but they keep the file little-endian anywhere).

use crate::error::{Error, Result};
use crate::io::atomic::write_atomic;
use crate::io::xxh64::Xxh64;
use crate::particles::Particles;
use glam::DVec3;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

/// The first eight bytes of every hinoki IC file.
const MAGIC: [u8; 8] = *b"HINOKIIC";
/// The format version this code writes and reads.
const VERSION: u32 = 1;
/// Header bytes: magic, version, N.
const HEADER: u64 = 8 + 4 + 8;
/// File bytes per particle: position, velocity, mass, id.
const PER_PARTICLE: u64 = 8 * (3 + 3 + 1 + 1);
/// Checksum bytes at the end of the file.
const CHECKSUM: u64 = 8;
/// Words moved per read or write (a multiple of 3, so position and velocity chunks hold whole
/// particles): 96 KiB.
const CHUNK: usize = 3 * 4096;

/// Writes `p` to `path` in the IC format described in the module documentation, atomically
/// (see [`write_atomic`]): the file is complete or the previous one is untouched. The arrays
/// must have equal lengths (as [`Particles::validate`] checks); values are written as they are.
pub fn write_ic(path: &Path, p: &Particles) -> Result<()> {
    let n = p.len();
    if p.vel.len() != n || p.mass.len() != n || p.id.len() != n {
        return Err(Error::input(format!(
            "{}: cannot write particles whose arrays differ in length \
             (pos {}, vel {}, mass {}, id {})",
            path.display(),
            n,
            p.vel.len(),
            p.mass.len(),
            p.id.len()
        )));
    }
    write_atomic(path, |w| {
        let mut out = HashingWriter {
            inner: w,
            hash: Xxh64::new(),
        };
        out.write_all(&MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(n as u64).to_le_bytes())?;
        write_words(&mut out, vector_words(&p.pos))?;
        write_words(&mut out, vector_words(&p.vel))?;
        write_words(&mut out, p.mass.iter().map(|m| m.to_bits()))?;
        write_words(&mut out, p.id.iter().copied())?;
        let sum = out.hash.finish();
        out.inner.write_all(&sum.to_le_bytes())
    })
}

/// Reads an IC file written by [`write_ic`] and checks it: the magic, the version, that the
/// file size matches N (before anything is allocated), the checksum, and finally
/// [`Particles::validate`]. Every error is one line that starts with the file name.
pub fn read_ic(path: &Path) -> Result<Particles> {
    let io_err = |e: io::Error| Error::io(path, format!("cannot read: {e}"));
    let mut file = File::open(path).map_err(io_err)?;
    let size = file.metadata().map_err(io_err)?.len();
    let mut hash = Xxh64::new();

    let not_ic = || Error::io(path, "not a hinoki IC file (wrong magic number)");
    let mut magic = [0u8; 8];
    if size < MAGIC.len() as u64 {
        return Err(not_ic());
    }
    file.read_exact(&mut magic).map_err(io_err)?;
    if magic != MAGIC {
        return Err(not_ic());
    }
    if size < HEADER + CHECKSUM {
        return Err(Error::io(
            path,
            format!("truncated: {size} bytes is shorter than the header and checksum"),
        ));
    }
    let mut rest = [0u8; (HEADER - 8) as usize];
    file.read_exact(&mut rest).map_err(io_err)?;
    hash.update(&magic);
    hash.update(&rest);
    let version = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Error::io(
            path,
            format!("unsupported IC file version {version} (this hinoki reads version {VERSION})"),
        ));
    }
    let n = u64::from_le_bytes(rest[4..].try_into().expect("8 bytes"));
    let expected = n
        .checked_mul(PER_PARTICLE)
        .and_then(|b| b.checked_add(HEADER + CHECKSUM));
    if expected != Some(size) {
        let expected = expected.map_or("more than 2^64".to_string(), |b| b.to_string());
        return Err(Error::io(
            path,
            format!(
                "truncated or corrupt: the header says N = {n}, which needs {expected} bytes, \
                 but the file has {size}"
            ),
        ));
    }
    // N is now tied to the file size: nothing larger than the file will be allocated.
    let n = usize::try_from(n)
        .map_err(|_| Error::io(path, format!("N = {n} does not fit this machine's memory")))?;

    let mut p = Particles::with_capacity(n);
    let mut words = vec![0u64; CHUNK.min(3 * n)];
    let mut read = |count: usize, sink: &mut dyn FnMut(&[u64])| {
        read_words(&mut file, &mut hash, &mut words, count, sink).map_err(io_err)
    };
    read(3 * n, &mut |w| push_vectors(&mut p.pos, w))?;
    read(3 * n, &mut |w| push_vectors(&mut p.vel, w))?;
    read(n, &mut |w| {
        p.mass.extend(w.iter().map(|&b| f64::from_bits(b)))
    })?;
    read(n, &mut |w| p.id.extend_from_slice(w))?;

    let mut stored = [0u8; CHECKSUM as usize];
    file.read_exact(&mut stored).map_err(io_err)?;
    let stored = u64::from_le_bytes(stored);
    let computed = hash.finish();
    if stored != computed {
        return Err(Error::io(
            path,
            format!(
                "corrupt: checksum mismatch (stored {stored:#018x}, computed {computed:#018x})"
            ),
        ));
    }
    p.validate()
        .map_err(|e| Error::input(format!("{}: {}", path.display(), e)))?;
    Ok(p)
}

/// Appends the vectors whose x, y, z bit patterns follow each other in `words`.
fn push_vectors(out: &mut Vec<DVec3>, words: &[u64]) {
    out.extend(words.chunks_exact(3).map(|c| {
        DVec3::new(
            f64::from_bits(c[0]),
            f64::from_bits(c[1]),
            f64::from_bits(c[2]),
        )
    }));
}

/// A writer that hashes everything written through it.
struct HashingWriter<W> {
    inner: W,
    hash: Xxh64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.hash.update(&buf[..k]);
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The bit patterns of x, y, z of each vector in turn.
fn vector_words(v: &[DVec3]) -> impl Iterator<Item = u64> + '_ {
    v.iter().flat_map(|x| x.to_array()).map(f64::to_bits)
}

/// Writes 64-bit words little-endian, a chunk at a time.
fn write_words(out: &mut impl Write, words: impl Iterator<Item = u64>) -> io::Result<()> {
    let mut buf = Vec::with_capacity(CHUNK);
    let mut words = words.map(u64::to_le).peekable();
    while words.peek().is_some() {
        buf.clear();
        buf.extend(words.by_ref().take(CHUNK));
        out.write_all(bytemuck::cast_slice(&buf))?;
    }
    Ok(())
}

/// Reads `count` little-endian 64-bit words in chunks of at most `buf.len()`, hashes their bytes
/// and hands each chunk, converted to native order, to `sink`.
fn read_words(
    r: &mut impl Read,
    hash: &mut Xxh64,
    buf: &mut [u64],
    count: usize,
    sink: &mut dyn FnMut(&[u64]),
) -> io::Result<()> {
    let mut left = count;
    while left > 0 {
        let len = left.min(buf.len());
        let chunk = &mut buf[..len];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(chunk);
        r.read_exact(bytes)?;
        hash.update(bytes);
        chunk.iter_mut().for_each(|w| *w = u64::from_le(*w));
        sink(chunk);
        left -= chunk.len();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::io::testdir::TestDir;
    use std::path::PathBuf;

    fn sample(n: usize) -> Particles {
        let mut p = Particles::with_capacity(n);
        for i in 0..n {
            let x = i as f64;
            p.push(
                DVec3::new(x.sin(), x.cos() * 1e-300, -x / 3.0),
                DVec3::new(1.0 / (x + 1.0), -0.0, x * 1e10),
                1.0 / n as f64,
                1_000_000_007 * i as u64 + u64::MAX / 2,
            );
        }
        p
    }

    fn written(dir: &TestDir, p: &Particles) -> (PathBuf, Vec<u8>) {
        let path = dir.path().join("ics.bin");
        write_ic(&path, p).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (path, bytes)
    }

    /// Rewrites the checksum after a deliberate change, so that later checks are reached.
    fn reseal(bytes: &mut [u8]) {
        let end = bytes.len() - 8;
        let mut h = Xxh64::new();
        h.update(&bytes[..end]);
        bytes[end..].copy_from_slice(&h.finish().to_le_bytes());
    }

    fn read_err(path: &Path, bytes: &[u8]) -> Error {
        std::fs::write(path, bytes).unwrap();
        let err = read_ic(path).unwrap_err();
        assert!(
            err.message.starts_with(&path.display().to_string()),
            "{err}"
        );
        assert!(!err.message.contains('\n'), "{err}");
        err
    }

    #[test]
    fn round_trip_is_bit_exact() {
        let dir = TestDir::new("ic-roundtrip");
        // 5000 particles: several read/write chunks, and a last partial one.
        for n in [1, 5000] {
            let p = sample(n);
            let (path, bytes) = written(&dir, &p);
            assert_eq!(bytes.len(), 28 + 64 * n);
            assert_eq!(&bytes[..8], b"HINOKIIC");
            assert_eq!(bytes[8..12], 1u32.to_le_bytes());
            assert_eq!(bytes[12..20], (n as u64).to_le_bytes());
            assert_eq!(bytes[20..28], p.pos[0].x.to_le_bytes());
            let q = read_ic(&path).unwrap();
            assert_eq!(q.id, p.id);
            let bits = |v: &[DVec3]| -> Vec<[u64; 3]> {
                v.iter().map(|x| x.to_array().map(f64::to_bits)).collect()
            };
            assert_eq!(bits(&q.pos), bits(&p.pos));
            assert_eq!(bits(&q.vel), bits(&p.vel));
            assert_eq!(q.mass, p.mass);
        }
        assert_eq!(dir.entries(), vec!["ics.bin"]);
    }

    #[test]
    fn missing_file() {
        let dir = TestDir::new("ic-missing");
        let path = dir.path().join("nope.bin");
        let err = read_ic(&path).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Io);
        assert!(
            err.message.starts_with(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn wrong_magic() {
        let dir = TestDir::new("ic-magic");
        let (path, mut bytes) = written(&dir, &sample(3));
        bytes[0] = b'X';
        assert!(read_err(&path, &bytes)
            .message
            .contains("not a hinoki IC file"));
        assert!(read_err(&path, b"HINO")
            .message
            .contains("not a hinoki IC file"));
        assert!(read_err(&path, b"")
            .message
            .contains("not a hinoki IC file"));
    }

    #[test]
    fn unsupported_version() {
        let dir = TestDir::new("ic-version");
        let (path, mut bytes) = written(&dir, &sample(3));
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        reseal(&mut bytes);
        let err = read_err(&path, &bytes);
        assert!(
            err.message.contains("unsupported IC file version 2"),
            "{err}"
        );
    }

    #[test]
    fn size_mismatch_is_caught_before_allocating() {
        let dir = TestDir::new("ic-size");
        let (path, bytes) = written(&dir, &sample(3));
        let err = read_err(&path, &bytes[..bytes.len() - 1]);
        assert!(err.message.contains("truncated"), "{err}");
        assert!(read_err(&path, &bytes[..15]).message.contains("truncated"));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read_err(&path, &longer).message.contains("N = 3"));
        // A corrupt N that would need petabytes, or more bytes than a u64 counts.
        for n in [1u64 << 50, u64::MAX / 3] {
            let mut huge = bytes.clone();
            huge[12..20].copy_from_slice(&n.to_le_bytes());
            let err = read_err(&path, &huge);
            assert!(err.message.contains(&format!("N = {n}")), "{err}");
        }
    }

    #[test]
    fn checksum_mismatch() {
        let dir = TestDir::new("ic-checksum");
        let (path, bytes) = written(&dir, &sample(100));
        // Flip one bit in each array (the header fields are checked on their own).
        for at in [20 + 5, 20 + 24 * 100 + 7, 20 + 48 * 100, 20 + 56 * 100 + 3] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let err = read_err(&path, &bad);
            assert!(err.message.contains("corrupt"), "byte {at}: {err}");
        }
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(read_err(&path, &bad).message.contains("corrupt"));
    }

    #[test]
    fn invalid_particles_are_rejected_with_the_file_name() {
        let dir = TestDir::new("ic-invalid");
        let mut p = sample(4);
        p.mass[2] = -1.0;
        let (path, _) = written(&dir, &p);
        let err = read_ic(&path).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(
            err.message.starts_with(&path.display().to_string()),
            "{err}"
        );
        assert!(err.message.contains("mass"), "{err}");

        let (path, _) = written(&dir, &Particles::default());
        assert!(read_ic(&path).unwrap_err().message.contains("N = 0"));
    }

    #[test]
    fn unequal_arrays_are_not_written() {
        let dir = TestDir::new("ic-unequal");
        let mut p = sample(4);
        p.id.pop();
        let path = dir.path().join("ics.bin");
        assert!(write_ic(&path, &p).is_err());
        assert!(dir.entries().is_empty());
    }
}
