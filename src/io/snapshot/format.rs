//! Which format a snapshot file is in, told by its first bytes, never by its name: HDF5
//! (GADGET-4's layout) or GADGET's binary format (SnapFormat 1 or 2, [`super::gadget_binary`]).

use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The signature that begins an HDF5 superblock.
const HDF5_SIGNATURE: [u8; 8] = *b"\x89HDF\r\n\x1a\n";
/// The first place an HDF5 superblock may lie after byte 0 (behind a user block); the next
/// ones double it (1024, 2048, …).
const FIRST_USER_BLOCK: u64 = 512;
/// The first Fortran record marker of a SnapFormat 1 file: the header's 256 bytes.
const FORMAT1_MARKER: u32 = 256;
/// The first Fortran record marker of a SnapFormat 2 file: the 8 bytes of the label record
/// ("HEAD" and a 4-byte size) before the header.
const FORMAT2_MARKER: u32 = 8;

/// The snapshot formats hinoki reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// HDF5 in GADGET-4's layout (what hinoki writes).
    Hdf5,
    /// GADGET's binary format, SnapFormat (ICFormat) 1 or 2.
    GadgetBinary,
}

impl Format {
    /// The format of the file `path`: HDF5 when it holds the HDF5 signature at byte 0 (or at
    /// 512, 1024, 2048, …, behind a user block, where the HDF5 specification allows it);
    /// GADGET binary when its first 4 bytes are a Fortran record marker of 256 (SnapFormat 1)
    /// or 8 (SnapFormat 2), in either byte order. Else a one-line error naming the file.
    pub fn of(path: &Path) -> Result<Self> {
        let cannot = |e: std::io::Error| Error::io(path, format!("cannot read: {e}"));
        let mut file = std::fs::File::open(path).map_err(cannot)?;
        let len = file.metadata().map_err(cannot)?.len();
        let mut first = Vec::with_capacity(HDF5_SIGNATURE.len());
        (&mut file)
            .take(HDF5_SIGNATURE.len() as u64)
            .read_to_end(&mut first)
            .map_err(cannot)?;
        if first == HDF5_SIGNATURE {
            return Ok(Self::Hdf5);
        }
        if let Some(marker) = first.first_chunk::<4>().copied() {
            let markers = [u32::from_le_bytes(marker), u32::from_be_bytes(marker)];
            if markers
                .iter()
                .any(|&m| m == FORMAT1_MARKER || m == FORMAT2_MARKER)
            {
                return Ok(Self::GadgetBinary);
            }
        }
        let mut at = FIRST_USER_BLOCK;
        while at + HDF5_SIGNATURE.len() as u64 <= len {
            let mut signature = [0u8; 8];
            file.seek(SeekFrom::Start(at)).map_err(cannot)?;
            file.read_exact(&mut signature).map_err(cannot)?;
            if signature == HDF5_SIGNATURE {
                return Ok(Self::Hdf5);
            }
            at *= 2;
        }
        Err(Error::io(
            path,
            "neither an HDF5 file nor a GADGET binary snapshot (SnapFormat 1 or 2: a file that \
             begins with a 4-byte record length of 256 or 8)",
        ))
    }

    /// How messages name the header field that GADGET-4's HDF5 files call `hdf5`:
    /// "/Header NumPart_Total" in an HDF5 file, "header npartTotal" (the name in GADGET-2's
    /// `io_header`) in a binary one.
    pub fn field(self, hdf5: &str) -> String {
        match self {
            Self::Hdf5 => format!("/Header {hdf5}"),
            Self::GadgetBinary => {
                let binary = match hdf5 {
                    "NumPart_ThisFile" => "npart",
                    "NumPart_Total" => "npartTotal",
                    "NumFilesPerSnapshot" => "num_files",
                    "MassTable" => "massarr",
                    "Time" => "time",
                    "Redshift" => "redshift",
                    other => other,
                };
                format!("header {binary}")
            }
        }
    }
}
