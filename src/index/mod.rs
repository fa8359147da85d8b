//! The `simhash` index access method: `CREATE INDEX ... USING simhash (fp)`. This file is its front
//! door: the handler (its capabilities and callbacks), the operator
//! `fp <@ simhash_ball(q, k)`, and what the rest of the extension asks of an index.
//!
//! Each fingerprint is filed under each of its four 16-bit segments: the rows the index was built
//! with in its built part, by whole segment value, densely (since format 5), and the rows inserted
//! since in the bucket of the segment's top bits (`simhash_core::buckets` has that layout and why a
//! lookup is exact, `simhash_core::dense` the built part's). A radius test reaches it as the
//! operator `fp <@ simhash_ball(q, k)`, which the planner rewrite makes of `fp <~> q <= k` where the
//! column has such an index (`crate::lookup::support`); the search reads the runs and buckets of
//! the values within each segment's radius of the query's segments (radii adding up to `k - 3`,
//! `simhash_core::probes::segment_radii`) and checks each entry's distance in the page, so the
//! table is read only for the rows within `k`. `ORDER BY fp <~> q` is served too, nearest first.
//! Every change is WAL-logged (GenericXLog, or whole pages after a build). Not yet: parallel scans.
//!
//! The files, by job (none imports from this one, and no two import from each other):
//! - the pages: `page` (the layout of a page, the metapage's and directory's fields, the page
//!   format's story), `buffers` (read, extend, GenericXLog), `meta` (the metapage read and
//!   checked), `entries` (a bucket page's entries, packed or apart), `chain` (where a chain's ends
//!   are, the checks of its links, the reads of chains);
//! - read-ahead: `readahead` (pages pinned and entries requested ahead of their reads, the CPU's
//!   prefetch; for `chain` and `dense_read`), `recent` (the buffers that last held a page);
//! - the built part: `dense` (its layout and checks, VACUUM's marks), `dense_read`, `dense_write`;
//! - the phases: `build` (CREATE INDEX) with `spill` (its rows in memory or in sorts that spill to
//!   disk), `insert`, `vacuum`, `scan` (the scan callbacks) with `search` (radius search) and
//!   `ordered` (the ordered scan), `cost` (cost and selectivity);
//! - for other subsystems: `pairs` (all pairs through the index, `simhash_pairs` of a table),
//!   `check` (`simhash_index_check`);
//! - `tests` (the `#[pg_test]` tests: page formats, damaged indexes).

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

mod buffers;
mod build;
mod chain;
mod check;
mod codes;
mod cost;
mod dense;
mod dense_read;
mod dense_write;
mod entries;
mod insert;
mod meta;
mod options;
mod ordered;
mod page;
mod pairs;
mod readahead;
mod recent;
mod scan;
mod search;
mod spill;
mod vacuum;

/// Defines the index's settings (`simhash.index_tail_memory`) and its storage parameter
/// (`segments`); called once per backend from `_PG_init`.
pub(crate) fn define_settings() {
    codes::tail::define();
    options::define();
}

/// The TIDs of the rows whose fingerprint is within `k` bits of `fp` (each once, ascending), as
/// `index` holds them now: for the near-duplicate constraint's recheck, which fetches the rows with
/// a dirty snapshot (a scan through the index AM accepts only MVCC snapshots).
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn rows_within(index: pg_sys::Relation, fp: u64, k: u32) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        if codes::is_codes(index) {
            codes::refuse(index, "a near-duplicate constraint");
        }
        search::search(index, &[Some((fp, k.min(64) as i32))])
    }
}

/// The TIDs of the rows whose code is within `k` bits of `code` (`bits` long; each once, in table
/// order) in the `simhash` index of a `bit` column, as it holds them now: for the near-duplicate
/// constraint's recheck of such a column (see [`rows_within`]). None when the index holds codes of
/// another length.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn code_rows_within(
    index: pg_sys::Relation,
    bits: u32,
    code: &[u8],
    k: u32,
) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        if !codes::is_codes(index) {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                "a simhash index of simhash64 fingerprints cannot look up bit codes".into(),
                None,
                None,
            );
        }
        codes::scan::rows_within(index, bits, code, k)
    }
}

/// For each fingerprint of `fps`, the rows within `k` bits of it (`k` at most
/// `simhash_core::buckets::MAX_PROBED_RADIUS`): (position in `fps`, TID) pairs, each once, with
/// every bucket read once for all of them: for the near-duplicate constraint's recheck of many rows.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn rows_within_each(
    index: pg_sys::Relation,
    fps: &[u64],
    k: u32,
) -> Vec<(usize, pg_sys::ItemPointerData)> {
    unsafe {
        if codes::is_codes(index) {
            codes::refuse(index, "a near-duplicate constraint");
        }
        search::search_many(index, fps, k)
    }
}

/// Reports once each pair of entries of `index` within `k` (at most
/// `simhash_core::buckets::MAX_PROBED_RADIUS`), live or not, to `on_pairs`, a group of entries with
/// one fingerprint at a time (`simhash_core::bucket_pairs::OnPairs`; TIDs as
/// `crate::pg::tid::tid_order` keys), a bucket or two in memory at a time: for `simhash_pairs` of a
/// table. No page is locked or pinned during the calls.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn pairs_within(index: pg_sys::Relation, k: u32, on_pair: simhash_core::bucket_pairs::OnPairs<u64>) {
    unsafe {
        if codes::is_codes(index) {
            codes::refuse(index, "simhash_pairs");
        }
        pairs::for_each_pair(index, k, on_pair)
    }
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_amhandler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The access method's handler: its capabilities and callbacks.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let am = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexAmRoutine>()) as *mut pg_sys::IndexAmRoutine;
        (*am).type_ = pg_sys::NodeTag::T_IndexAmRoutine;
        // 1: radius tests (fp <@ simhash_ball, code <@ simhash_code_ball); 2: ORDER BY distance
        // (fp <-> q, code <-> ball); 3: ORDER BY distance as float8 (code <~> ball), bit codes only.
        (*am).amstrategies = 3;
        (*am).amsupport = 0;
        (*am).amoptsprocnum = 0;
        (*am).amcanorder = false;
        (*am).amcanorderbyop = true;
        (*am).amcanbackward = false;
        (*am).amcanunique = false;
        (*am).amcanmulticol = false;
        // ORDER BY without a radius test: the scan returns every row, those with a NULL
        // fingerprint too (the index holds them in a chain of their own).
        (*am).amoptionalkey = true;
        (*am).amsearcharray = false;
        (*am).amsearchnulls = false;
        (*am).amstorage = false;
        (*am).amclusterable = false;
        (*am).ampredlocks = false;
        (*am).amcanparallel = false;
        (*am).amcaninclude = false;
        (*am).amusemaintenanceworkmem = false;
        (*am).amparallelvacuumoptions = 0; // VACUUM_OPTION_NO_PARALLEL
        (*am).amkeytype = pg_sys::InvalidOid;

        (*am).ambuild = Some(build::ambuild);
        (*am).ambuildempty = Some(build::ambuildempty);
        (*am).aminsert = Some(insert::aminsert);
        (*am).ambulkdelete = Some(vacuum::ambulkdelete);
        (*am).amvacuumcleanup = Some(vacuum::amvacuumcleanup);
        (*am).amcostestimate = Some(cost::amcostestimate);
        (*am).amoptions = Some(amoptions);
        (*am).amvalidate = Some(amvalidate);
        (*am).ambeginscan = Some(scan::ambeginscan);
        (*am).amrescan = Some(scan::amrescan);
        (*am).amgettuple = Some(scan::amgettuple);
        (*am).amgetbitmap = Some(scan::amgetbitmap);
        (*am).amendscan = Some(scan::amendscan);
        Datum::from(am)
    }
}

/// `WITH (segments = s)`, for an index of codes ([`options`]).
#[pg_guard]
unsafe extern "C-unwind" fn amoptions(reloptions: Datum, validate: bool) -> *mut pg_sys::bytea {
    unsafe { options::parse(reloptions, validate) }
}

/// The operator classes are the extension's own (sql/simhash.sql): nothing to check.
#[pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_within_ball() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `fp <@ simhash_ball(q, k)`: whether `fp` is within `k` bits of `q` (NULL when the ball's center
/// or radius is NULL), as `fp <~> q <= k`.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_within_ball(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        // STRICT: both arguments are non-NULL here.
        match search::ball_of(args[1].value) {
            Some(ball) => Datum::from(search::within(args[0].value.value() as u64, ball)),
            None => {
                (*fcinfo).isnull = true;
                Datum::from(0)
            }
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;
