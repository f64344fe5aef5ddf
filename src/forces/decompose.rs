//! The domain decomposition of the particles a backend holds, orchestrated above the backend
//! seam like the evaluation: the sequence of collectives is written once, the stages' work
//! (keys, samples, migration) is the backend's (`crate::domain` holds the steps).

use crate::backend::Backend;
use crate::comm::Comm;
use crate::domain::{global_box_of, global_splitters, Balance, Domains, SAMPLES_PER_RANK};
use crate::error::Result;

/// The decomposition of the particles a backend holds, where they are (on the GPU: keys,
/// owners and packing on the device, only samples and the leaving particles cross the bus;
/// on the host [`Migration::move_particles`](crate::domain::Migration::move_particles)):
/// keys in the cube of [`global_box_of`], splitters of their samples weighted by the
/// particles' interactions in the backend's last evaluation for [`Balance::Cost`], each
/// particle sent to its key's owner. Collective. Returns the particles that left this rank
/// and the domains.
pub fn decompose(
    comm: &dyn Comm,
    backend: &mut dyn Backend,
    balance: Balance,
) -> Result<(usize, Domains)> {
    let grid = global_box_of(comm, backend.bounds()?);
    let local = backend.sample(
        &grid,
        balance == Balance::Cost,
        SAMPLES_PER_RANK * comm.size(),
    )?;
    let splitters = global_splitters(comm, &local)?;
    let left = backend.migrate(comm, &splitters)?;
    Ok((left, Domains { grid, splitters }))
}
