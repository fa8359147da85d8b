//! `simhash_segment_probes()`, `simhash_bands()`, `simhash_band_probes()`: the candidate sets the
//! planner rewrite probes the indexes with (see `simhash_core::probes`). Exposed so that the rewritten
//! expression can compute them at run time when the query fingerprint is a parameter or a column.

use pgrx::prelude::*;

use crate::fingerprint::simhash64::SimHash64;
use crate::pg::errors::raise;

fn check_segment_radius(radius: i32) -> u32 {
    if !(0..=3).contains(&radius) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("segment radius {radius} is out of range"),
            Some("The segment radius is the number of differing bits per 16-bit segment, 0 to 3.".into()),
            None,
        );
    }
    radius as u32
}

/// Every value of segment `n` within `radius` bits of `fp`'s, ascending.
#[pg_extern(sql = false)]
fn simhash_segment_probes(fp: SimHash64, n: i32, radius: i32) -> Vec<i32> {
    let radius = check_segment_radius(radius);
    let value = crate::fingerprint::text::segment_or_raise(fp, n);
    simhash_core::probes::segment_probes(value, radius).into_iter().map(i32::from).collect()
}

/// The four band keys (segment number << 16 | segment value) that a GIN index holds.
#[pg_extern(sql = false)]
fn simhash_bands(fp: SimHash64) -> Vec<i32> {
    simhash_core::probes::bands(fp.0).to_vec()
}

/// The band keys within `radius` bits per segment of `fp`'s, for `simhash_bands(col) && ...`.
#[pg_extern(sql = false)]
fn simhash_band_probes(fp: SimHash64, radius: i32) -> Vec<i32> {
    simhash_core::probes::band_probes(fp.0, check_segment_radius(radius))
}
