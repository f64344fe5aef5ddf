//! Which particles a picture shows: those of the chosen types, in a periodic box at their
//! nearest image of the view's centre, and within a slab about the centre's plane.

use super::density::Axis;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::particles::{particle_type, Particles, PARTICLE_TYPES};
use glam::DVec3;
use std::borrow::Cow;

/// The particles of `p` whose type ([`crate::particles::particle_type`]) is one of `types`
/// (all of them, not copied, for `None`), on every rank of `comm` its own. Fails with a
/// one-line input error for a type outside 0 … 5 and when no particle of any rank has one of
/// the types. Collective where `types` are given.
pub fn of_types<'a>(
    comm: &dyn Comm,
    p: &'a Particles,
    types: Option<&[u8]>,
) -> Result<Cow<'a, Particles>> {
    let Some(types) = types else {
        return Ok(Cow::Borrowed(p));
    };
    if let Some(t) = types.iter().find(|&&t| usize::from(t) >= PARTICLE_TYPES) {
        return Err(Error::input(format!(
            "--types: {t} is not a particle type (0 gas, 1 halo, 2 disk, 3 bulge, 4 stars, \
             5 boundary)"
        )));
    }
    let keep: Vec<u32> = (0..p.len() as u32)
        .filter(|&i| types.contains(&particle_type(p.id[i as usize])))
        .collect();
    let mut kept = [keep.len() as u64];
    comm.allreduce_sum_u64(&mut kept);
    if kept[0] == 0 {
        let mut counts = [0u64; PARTICLE_TYPES];
        for &id in &p.id {
            counts[usize::from(particle_type(id))] += 1;
        }
        comm.allreduce_sum_u64(&mut counts);
        let present: Vec<String> = (0..PARTICLE_TYPES)
            .filter(|&t| counts[t] > 0)
            .map(|t| t.to_string())
            .collect();
        return Err(Error::input(format!(
            "--types {}: no particle has these types (the snapshot has types {})",
            list(types),
            present.join(",")
        )));
    }
    let mut q = p.clone();
    q.permute(&keep);
    Ok(Cow::Owned(q))
}

/// Moves every particle of `p` to its image nearest to `center` in the periodic box of side
/// `box_size` (length units, > 0): each coordinate within half a box of the centre's.
pub fn nearest_images(p: &mut Particles, center: DVec3, box_size: f64) {
    for x in &mut p.pos {
        let d = *x - center;
        *x = center + d - (d / box_size).round() * box_size;
    }
}

/// The particles of `p` within `thickness`/2 of the plane through `center` across the line of
/// sight `axis` (length units). Fails with a one-line input error unless `thickness` is finite
/// and > 0.
pub fn slab(p: &Particles, center: DVec3, axis: Axis, thickness: f64) -> Result<Particles> {
    if !(thickness.is_finite() && thickness > 0.0) {
        return Err(Error::input(format!(
            "--slab must be a positive length, got {thickness}"
        )));
    }
    let k = axis.line_of_sight();
    let c = center.to_array()[k];
    let keep: Vec<u32> = (0..p.len() as u32)
        .filter(|&i| (p.pos[i as usize].to_array()[k] - c).abs() <= thickness / 2.0)
        .collect();
    let mut q = p.clone();
    q.permute(&keep);
    Ok(q)
}

/// Types as the option gives them: "1,4".
pub fn list(types: &[u8]) -> String {
    types
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;
    use crate::particles::tagged_id;

    /// One particle of each type t at (t, 10 t, −t), mass t + 1.
    fn mixed() -> Particles {
        let mut p = Particles::default();
        for t in 0..6u8 {
            let x = f64::from(t);
            p.push(
                DVec3::new(x, 10.0 * x, -x),
                DVec3::ZERO,
                x + 1.0,
                tagged_id(100 + u64::from(t), t),
            );
        }
        p
    }

    #[test]
    fn types_pick_their_particles() {
        let p = mixed();
        let one = &SingleProcess;
        assert!(matches!(of_types(one, &p, None).unwrap(), Cow::Borrowed(q) if *q == p));
        let q = of_types(one, &p, Some(&[4, 1])).unwrap();
        assert_eq!(q.mass, [2.0, 5.0]);
        let err = of_types(one, &p, Some(&[6])).unwrap_err();
        assert!(err.message.contains("6 is not a particle type"), "{err}");
        let mut halo = p.clone();
        halo.permute(&[1]);
        let err = of_types(one, &halo, Some(&[0, 2])).unwrap_err();
        assert_eq!(
            err.message,
            "--types 0,2: no particle has these types (the snapshot has types 1)"
        );
    }

    #[test]
    fn images_nearest_the_centre_and_slabs() {
        let mut p = mixed();
        nearest_images(&mut p, DVec3::splat(1.0), 4.0);
        // Every coordinate within half a box, 2, of the centre's: x = 5 → 1, y = 50 → 2,
        // z = −5 → 3.
        assert!(p
            .pos
            .iter()
            .all(|x| x.to_array().iter().all(|c| (c - 1.0).abs() <= 2.0)));
        assert_eq!(p.pos[5], DVec3::new(1.0, 2.0, 3.0));
        // Along y, the slab |y − 1| ≤ 1 keeps the particles at y = 0 (t = 0, 2, 4) and 2
        // (t = 1, 3, 5 wrap 10, 30, 50 to 2).
        let s = slab(&p, DVec3::splat(1.0), Axis::Y, 2.0).unwrap();
        assert_eq!(s.len(), 6);
        let s = slab(&p, DVec3::new(0.0, 0.0, 0.0), Axis::Y, 1.0).unwrap();
        assert_eq!(s.mass, [1.0, 3.0, 5.0]);
        assert!(slab(&p, DVec3::ZERO, Axis::Z, 0.0).is_err());
        assert!(slab(&p, DVec3::ZERO, Axis::Z, f64::NAN).is_err());
    }
}
