//! A writer of GADGET's binary snapshot formats (SnapFormat 1 and 2) for the tests, written
//! from the GADGET-2 user guide (section 6), not from hinoki's reader: Fortran records (a
//! 4-byte length, the bytes, the length again), the 256-byte header of GADGET-2's
//! `io_header`, then POS, VEL, ID and MASS, each preceded in SnapFormat 2 by an 8-byte record
//! of a 4-character label and the block's length + 8. It uses nothing but the standard
//! library, so that the library's unit tests include it too (`#[path]`).

use std::path::Path;

/// Particles of the six types and the header fields of one binary file.
#[derive(Clone, Debug, Default)]
pub struct GadgetFile {
    /// Particles of each type in this file (`npart`).
    pub npart: [u32; 6],
    /// The mass of each type's particles, 0 where the MASS block holds them (`massarr`).
    pub massarr: [f64; 6],
    /// `time` (a in a comoving file).
    pub time: f64,
    /// `redshift`.
    pub redshift: f64,
    /// Particles of each type in the whole snapshot (`npartTotal` and its high words).
    pub npart_total: [u64; 6],
    /// `num_files`.
    pub num_files: i32,
    /// `BoxSize`, `Omega0`, `OmegaLambda`, `HubbleParam`.
    pub box_size: f64,
    pub omega0: f64,
    pub omega_lambda: f64,
    pub hubble_param: f64,
    /// Positions, velocities and ids of every particle, type 0 first.
    pub pos: Vec<[f64; 3]>,
    pub vel: Vec<[f64; 3]>,
    pub ids: Vec<u64>,
    /// The masses of the particles of the types whose `massarr` is 0, in type order.
    pub masses: Vec<f64>,
    /// Blocks written after the others: a label (SnapFormat 2) and the bytes.
    pub extra: Vec<([u8; 4], Vec<u8>)>,
}

/// How the file is written.
#[derive(Clone, Copy, Debug)]
pub struct Encoding {
    /// SnapFormat 2 (labelled blocks) rather than 1.
    pub format2: bool,
    /// float64 positions, velocities and masses rather than float32.
    pub double: bool,
    /// u64 ids rather than u32.
    pub long_ids: bool,
    /// Big-endian numbers rather than little-endian.
    pub big_endian: bool,
}

impl Encoding {
    /// SnapFormat 1, float32, u32 ids, little-endian: N-GenIC's default.
    pub const FORMAT1: Self = Self {
        format2: false,
        double: false,
        long_ids: false,
        big_endian: false,
    };
}

/// Bytes in the byte order of `e`.
struct Out {
    bytes: Vec<u8>,
    big: bool,
}

impl Out {
    fn u32(&mut self, v: u32) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.bytes.extend(b);
    }
    fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }
    fn u64(&mut self, v: u64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.bytes.extend(b);
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    fn f32(&mut self, v: f32) {
        self.u32(v.to_bits());
    }
    fn float(&mut self, v: f64, double: bool) {
        if double {
            self.f64(v)
        } else {
            self.f32(v as f32)
        }
    }
}

impl GadgetFile {
    /// Adds a particle of type `t` (particles must be added in type order), its `mass` to the
    /// MASS block when `massarr[t]` is 0; counts it in `npart` and `npart_total`.
    pub fn push(&mut self, t: usize, pos: [f64; 3], vel: [f64; 3], id: u64, mass: f64) {
        assert!(self.npart[t + 1..].iter().all(|&n| n == 0), "type order");
        self.npart[t] += 1;
        self.npart_total[t] += 1;
        self.pos.push(pos);
        self.vel.push(vel);
        self.ids.push(id);
        if self.massarr[t] == 0.0 {
            self.masses.push(mass);
        }
    }

    /// The 256 bytes of the header.
    fn header(&self, big: bool) -> Vec<u8> {
        let mut o = Out {
            bytes: Vec::new(),
            big,
        };
        self.npart.iter().for_each(|&n| o.u32(n));
        self.massarr.iter().for_each(|&m| o.f64(m));
        o.f64(self.time);
        o.f64(self.redshift);
        o.i32(0); // flag_sfr
        o.i32(0); // flag_feedback
        self.npart_total.iter().for_each(|&n| o.u32(n as u32));
        o.i32(0); // flag_cooling
        o.i32(self.num_files);
        for v in [
            self.box_size,
            self.omega0,
            self.omega_lambda,
            self.hubble_param,
        ] {
            o.f64(v);
        }
        o.i32(0); // flag_stellarage
        o.i32(0); // flag_metals
        self.npart_total
            .iter()
            .for_each(|&n| o.u32((n >> 32) as u32));
        o.i32(0); // flag_entropy_instead_u
        o.bytes.resize(256, 0);
        o.bytes
    }

    /// The blocks, labelled: HEAD, POS, VEL, ID, MASS (when there are masses), the extras.
    pub fn blocks(&self, e: Encoding) -> Vec<([u8; 4], Vec<u8>)> {
        let out = || Out {
            bytes: Vec::new(),
            big: e.big_endian,
        };
        let mut blocks = vec![(*b"HEAD", self.header(e.big_endian))];
        if !self.pos.is_empty() {
            for (label, vectors) in [(*b"POS ", &self.pos), (*b"VEL ", &self.vel)] {
                let mut o = out();
                vectors.iter().flatten().for_each(|&x| o.float(x, e.double));
                blocks.push((label, o.bytes));
            }
            let mut o = out();
            for &id in &self.ids {
                if e.long_ids {
                    o.u64(id)
                } else {
                    o.u32(id as u32)
                }
            }
            blocks.push((*b"ID  ", o.bytes));
        }
        if !self.masses.is_empty() {
            let mut o = out();
            self.masses.iter().for_each(|&m| o.float(m, e.double));
            blocks.push((*b"MASS", o.bytes));
        }
        blocks.extend(self.extra.iter().cloned());
        blocks
    }

    /// The bytes of the file, from `blocks` (those of [`GadgetFile::blocks`], perhaps changed).
    pub fn encode(blocks: &[([u8; 4], Vec<u8>)], e: Encoding) -> Vec<u8> {
        let mut o = Out {
            bytes: Vec::new(),
            big: e.big_endian,
        };
        let record = |o: &mut Out, payload: &[u8]| {
            o.u32(payload.len() as u32);
            o.bytes.extend_from_slice(payload);
            o.u32(payload.len() as u32);
        };
        for (label, payload) in blocks {
            if e.format2 {
                let mut tag = Out {
                    bytes: label.to_vec(),
                    big: e.big_endian,
                };
                tag.u32(payload.len() as u32 + 8);
                record(&mut o, &tag.bytes);
            }
            record(&mut o, payload);
        }
        o.bytes
    }

    /// The bytes of the file.
    pub fn bytes(&self, e: Encoding) -> Vec<u8> {
        Self::encode(&self.blocks(e), e)
    }

    /// Writes the file to `path`.
    pub fn write(&self, path: &Path, e: Encoding) {
        std::fs::write(path, self.bytes(e)).expect("write a GADGET binary file");
    }
}
