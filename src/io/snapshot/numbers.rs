//! Numbers read from a snapshot's attributes and datasets exactly as they are stored, and
//! converted by hinoki rather than by the HDF5 library.
//!
//! libhdf5 1.10 converts between number types with routines that read past their buffers when
//! a damaged file describes a type whose bit fields do not fit its size (found by the fuzz
//! harness: a float64 attribute whose exponent lies outside its 8 bytes crashed the reader some
//! thousands of cases later). So a value is read only when its stored type equals one of the
//! native little-endian integer or IEEE float types (the library then copies bytes and
//! converts nothing), and widened here: integers exactly (as `i128`), floats to float64. Any
//! other type is an error naming it.

use hdf5::{Datatype, H5Type};
use std::ops::Range;

/// Something that holds numbers: an attribute, or rows of a dataset.
pub(super) trait Source {
    /// The stored type.
    fn dtype(&self) -> hdf5::Result<Datatype>;
    /// The values, as the type `T` (which must be the stored type: nothing is converted).
    fn read<T: H5Type>(&self) -> hdf5::Result<Vec<T>>;
}

impl Source for hdf5::Attribute {
    fn dtype(&self) -> hdf5::Result<Datatype> {
        hdf5::Container::dtype(self)
    }
    fn read<T: H5Type>(&self) -> hdf5::Result<Vec<T>> {
        self.read_raw::<T>()
    }
}

/// Rows `rows` of a one-dimensional dataset, or of a two-dimensional one (all columns, row
/// after row).
pub(super) struct Rows<'a> {
    /// The dataset.
    pub dataset: &'a hdf5::Dataset,
    /// The rows read.
    pub rows: Range<usize>,
}

impl Source for Rows<'_> {
    fn dtype(&self) -> hdf5::Result<Datatype> {
        self.dataset.dtype()
    }
    fn read<T: H5Type>(&self) -> hdf5::Result<Vec<T>> {
        let rows = self.rows.clone();
        if self.dataset.ndim() == 1 {
            Ok(self
                .dataset
                .read_slice_1d::<T, _>(rows)?
                .into_raw_vec_and_offset()
                .0)
        } else {
            let block = self.dataset.read_slice_2d::<T, _>((rows, ..))?;
            Ok(block.into_raw_vec_and_offset().0)
        }
    }
}

/// Values read as stored: integers held exactly, or floats as float64.
pub(super) enum Numbers {
    /// Values of an integer type.
    Integers(Vec<i128>),
    /// Values of a floating-point type.
    Floats(Vec<f64>),
}

/// The values of `src`; the error (without the object's name) says why they cannot be read.
pub(super) fn read_numbers(src: &impl Source) -> Result<Numbers, String> {
    let dtype = src.dtype().map_err(|e| first_line(&e))?;
    let is = |d: hdf5::Result<Datatype>| d.is_ok_and(|d| d == dtype);
    if is(Datatype::from_type::<f64>()) {
        return src
            .read::<f64>()
            .map(Numbers::Floats)
            .map_err(|e| first_line(&e));
    }
    if is(Datatype::from_type::<f32>()) {
        let v = src.read::<f32>().map_err(|e| first_line(&e))?;
        return Ok(Numbers::Floats(v.into_iter().map(f64::from).collect()));
    }
    macro_rules! integers {
        ($($t:ty),*) => {$(
            if is(Datatype::from_type::<$t>()) {
                let v = src.read::<$t>().map_err(|e| first_line(&e))?;
                return Ok(Numbers::Integers(v.into_iter().map(i128::from).collect()));
            }
        )*};
    }
    integers!(i8, i16, i32, i64, u8, u16, u32, u64);
    let what = dtype
        .to_descriptor()
        .map_or_else(|_| "an unknown type".to_string(), |d| d.to_string());
    Err(format!(
        "stored as {what} ({} bytes), not a native little-endian integer or IEEE float type",
        dtype.size()
    ))
}

/// The first line of a library error.
pub(super) fn first_line(e: &hdf5::Error) -> String {
    e.to_string().lines().next().unwrap_or("").to_string()
}

impl Numbers {
    /// The values as float64 (integers rounded to the nearest float64).
    pub fn into_f64(self) -> Vec<f64> {
        match self {
            Numbers::Integers(v) => v.into_iter().map(|x| x as f64).collect(),
            Numbers::Floats(v) => v,
        }
    }

    /// The values as `T`, which must hold each exactly; the error names the first that does
    /// not fit (or says that the values are floats).
    pub fn into_integers<T: TryFrom<i128>>(self) -> Result<Vec<T>, String> {
        let v = match self {
            Numbers::Integers(v) => v,
            Numbers::Floats(_) => {
                return Err("stored as floating-point numbers, integers expected".to_string())
            }
        };
        v.into_iter()
            .map(|x| {
                T::try_from(x)
                    .map_err(|_| format!("holds {x}, outside {}", std::any::type_name::<T>()))
            })
            .collect()
    }
}
