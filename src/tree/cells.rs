//! The cell layout, defined once: [`CellArrays`] is a structure of arrays over the cells of a
//! tree in depth-first preorder (root = 0), generic over where it lives, host vectors
//! ([`Cells`], [`Host`]) or device arrays ([`DeviceCells`], [`OnDevice`]), and its device
//! addresses fill the kernels' view of a tree ([`TreeArrays`], `cuda/cells.cuh`). A new cell
//! field is one line of the list below and one field of `TreeArrays`; allocation, growth,
//! copies and byte counts follow from the list, and a field missing on either side does not
//! compile.

use crate::error::Result;
use crate::gpu::args::TreeArrays;
use crate::gpu::launch::{grow, DeviceArray, Element, KernelRunner};
use std::marker::PhantomData;

/// What one cell holds in one array: a scalar, or a fixed number of them.
pub trait Record: bytemuck::Pod + Send + Sync + std::fmt::Debug + PartialEq {
    /// The scalar a device array of these records holds.
    type Scalar: Element;
    /// Scalars per record.
    const WIDTH: usize;
}

impl Record for u8 {
    type Scalar = u8;
    const WIDTH: usize = 1;
}

impl Record for u32 {
    type Scalar = u32;
    const WIDTH: usize = 1;
}

impl Record for f32 {
    type Scalar = f32;
    const WIDTH: usize = 1;
}

impl Record for [f32; 4] {
    type Scalar = f32;
    const WIDTH: usize = 4;
}

impl Record for [f32; 6] {
    type Scalar = f32;
    const WIDTH: usize = 6;
}

/// Where cell arrays live.
pub trait Storage {
    /// An array of records.
    type Array<E: Record>;
}

/// Host memory: one vector of records per field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Host;

impl Storage for Host {
    type Array<E: Record> = Vec<E>;
}

/// The memory of the device of runner `R`: one flat array of scalars per field
/// ([`Record::WIDTH`] scalars a cell).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OnDevice<R>(PhantomData<R>);

impl<R: KernelRunner> Storage for OnDevice<R> {
    type Array<E: Record> = R::Array<E::Scalar>;
}

/// Cells on the host.
pub type Cells = CellArrays<Host>;

/// Cells on the device of runner `R`.
pub type DeviceCells<R> = CellArrays<OnDevice<R>>;

/// Declares [`CellArrays`] and its operations from one list of fields.
macro_rules! cell_arrays {
    ($($(#[$doc:meta])* $name:ident: $record:ty,)*) => {
        /// Octree cells as a structure of arrays in depth-first preorder (root = 0), on the
        /// host ([`Cells`]) or on a device ([`DeviceCells`]).
        pub struct CellArrays<S: Storage> {
            $($(#[$doc])* pub $name: S::Array<$record>,)*
        }

        impl Clone for Cells {
            fn clone(&self) -> Self {
                Self { $($name: self.$name.clone(),)* }
            }
        }

        impl Default for Cells {
            fn default() -> Self {
                Self { $($name: Vec::new(),)* }
            }
        }

        impl PartialEq for Cells {
            fn eq(&self, other: &Self) -> bool {
                true $(&& self.$name == other.$name)*
            }
        }

        impl std::fmt::Debug for Cells {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Cells")$(.field(stringify!($name), &self.$name))*.finish()
            }
        }

        impl<R: KernelRunner> DeviceCells<R> {
            /// Zero-filled arrays for `cells` cells (at least one) on `r`.
            pub fn alloc(r: &R, cells: usize) -> Result<Self> {
                let cells = cells.max(1);
                Ok(Self { $($name: r.alloc(<$record as Record>::WIDTH * cells)?,)* })
            }

            /// Grows every array to hold at least `cells` cells ([`grow`]).
            pub fn reserve(&mut self, r: &R, cells: usize) -> Result<()> {
                $(grow(r, &mut self.$name, <$record as Record>::WIDTH * cells)?;)*
                Ok(())
            }

            /// Copies the host cells `host` into the start of these arrays (which hold at
            /// least as many cells).
            pub fn upload(&mut self, r: &R, host: &Cells) -> Result<()> {
                $(r.upload(bytemuck::cast_slice(&host.$name), &mut self.$name)?;)*
                Ok(())
            }

            /// The first `cells` cells, copied down.
            pub fn download(&self, r: &R, cells: usize) -> Result<Cells> {
                Ok(Cells {
                    $($name: {
                        let mut v = vec![<$record as bytemuck::Zeroable>::zeroed(); cells];
                        r.download(&self.$name, bytemuck::cast_slice_mut(&mut v))?;
                        v
                    },)*
                })
            }

            /// Device bytes held.
            pub fn bytes(&self) -> usize {
                0 $(+ self.$name.len() * size_of::<<$record as Record>::Scalar>())*
            }

            /// The kernels' view of a tree of these cells, whose sorted particles (4 floats
            /// each) lie at device address `particles` and whose cells' parents (u32 each) at
            /// `parent` (0 where none are kept).
            pub fn arrays(&self, particles: u64, parent: u64) -> TreeArrays {
                TreeArrays { particles, parent, $($name: self.$name.ptr(),)* }
            }
        }
    };
}

cell_arrays! {
    /// Index of the cell's first particle in the sorted particle arrays.
    first: u32,
    /// Number of particles in the cell.
    count: u32,
    /// Tree level (root = 0).
    level: u8,
    /// Number of child cells (0 for a leaf).
    nchild: u8,
    /// Number of cells in the subtree rooted here, the cell itself included.
    subtree: u32,
    /// The cell box: geometric centre (x, y, z) and half its side (length units), packed so
    /// that a walk reads it with one 16-byte load.
    boxes: [f32; 4],
    /// Centre of mass (length units) and total mass (mass units).
    com_mass: [f32; 4],
    /// Traceless quadrupole about the centre of mass, Σ m (3 y yᵀ − |y|² I), as
    /// (xx, yy, zz, xy, xz, yz) (mass × length²).
    quad: [f32; 6],
    /// Σ m |y|² about the centre of mass (mass × length²): the trace that the traceless
    /// quadrupole drops, which the Plummer-softened quadrupole term needs.
    trace: f32,
    /// Squared effective opening radius S_eff (length²): accept when d² > S_eff.
    s_eff: f32,
}

impl Cells {
    /// Number of cells.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// True for a tree without cells (never produced by [`Tree::build`](super::Tree::build)).
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// True when cell `c` has no children.
    #[inline]
    pub fn is_leaf(&self, c: usize) -> bool {
        self.nchild[c] == 0
    }
}
