//! Scans: `fp <@ simhash_ball(q, k)` reads the buckets `simhash_core::buckets` names, checks the
//! distance of every entry there and reports each row once, all at the first call (the matches are
//! few), sorted by TID so that the table is read in order. A radius beyond what the segments answer
//! reads every bucket of segment 0.
//!
//! The answers are computed ahead of the table reads, with no page pinned in between, so only MVCC
//! snapshots are accepted (as pgvector's scans do): a row VACUUM removed in between cannot be
//! visible to the scan's snapshot.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::buckets::{probe_buckets, reported_in, MAX_PROBED_RADIUS};

use super::page::{self, Kind, INVALID_BLOCK};
use super::SEGMENTS;
use crate::pg::errors::raise;

/// A scan key's ball: the query fingerprint and the radius (`None`: a NULL, which nothing is in).
pub(super) type Ball = Option<(u64, i32)>;

/// The center and radius of a `simhash_ball` composite value.
///
/// # Safety
///
/// `datum` is a non-NULL `simhash_ball` value.
pub(super) unsafe fn ball_of(datum: Datum) -> Ball {
    unsafe {
        let tuple = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as pg_sys::HeapTupleHeader;
        let mut isnull = false;
        let center = pg_sys::GetAttributeByNum(tuple, 1, &mut isnull);
        if isnull {
            return None;
        }
        let radius = pg_sys::GetAttributeByNum(tuple, 2, &mut isnull);
        if isnull {
            return None;
        }
        Some((center.value() as u64, radius.value() as i32))
    }
}

/// Whether `fp` is in `ball` (`None` when the ball is NULL).
pub(super) fn within(fp: u64, ball: (u64, i32)) -> bool {
    i64::from(simhash_core::hamming(fp, ball.0)) <= i64::from(ball.1)
}

#[derive(Default)]
struct ScanState {
    balls: Vec<Ball>,
    results: Vec<pg_sys::ItemPointerData>,
    next: usize,
    searched: bool,
}

/// The scan's state: Rust memory, freed by `amendscan`, or, when the query fails before that, by a
/// callback of the memory context the scan lives in.
#[repr(C)]
struct Holder {
    callback: pg_sys::MemoryContextCallback,
    state: *mut ScanState,
}

#[pg_guard]
unsafe extern "C-unwind" fn free_state(holder: *mut core::ffi::c_void) {
    unsafe {
        let holder = holder as *mut Holder;
        if !(*holder).state.is_null() {
            drop(Box::from_raw((*holder).state));
            (*holder).state = std::ptr::null_mut();
        }
    }
}

unsafe fn state_of<'a>(scan: pg_sys::IndexScanDesc) -> &'a mut ScanState {
    unsafe { &mut *(*((*scan).opaque as *mut Holder)).state }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambeginscan(
    index: pg_sys::Relation,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    unsafe {
        let scan = pg_sys::RelationGetIndexScan(index, nkeys, norderbys);
        let holder = pg_sys::palloc0(std::mem::size_of::<Holder>()) as *mut Holder;
        (*holder).state = Box::into_raw(Box::<ScanState>::default());
        (*holder).callback.func = Some(free_state);
        (*holder).callback.arg = holder.cast();
        pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, &mut (*holder).callback);
        (*scan).opaque = holder.cast();
        scan
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amrescan(
    scan: pg_sys::IndexScanDesc,
    keys: pg_sys::ScanKey,
    nkeys: i32,
    _orderbys: pg_sys::ScanKey,
    _norderbys: i32,
) {
    unsafe {
        let state = state_of(scan);
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        state.balls = (0..(*scan).numberOfKeys as usize)
            .map(|i| {
                let key = &*(*scan).keyData.add(i);
                if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                    None
                } else {
                    ball_of(key.sk_argument)
                }
            })
            .collect();
        state.results.clear();
        state.next = 0;
        state.searched = false;
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgettuple(
    scan: pg_sys::IndexScanDesc,
    _direction: pg_sys::ScanDirection::Type,
) -> bool {
    unsafe {
        let snapshot = (*scan).xs_snapshot;
        if snapshot.is_null()
            || !matches!(
                (*snapshot).snapshot_type,
                pg_sys::SnapshotType::SNAPSHOT_MVCC | pg_sys::SnapshotType::SNAPSHOT_HISTORIC_MVCC
            )
        {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "a simhash index scan needs an MVCC snapshot".into(),
                None,
                None,
            );
        }
        let state = state_of(scan);
        if !state.searched {
            state.results = search((*scan).indexRelation, &state.balls);
            state.searched = true;
        }
        match state.results.get(state.next) {
            Some(tid) => {
                (*scan).xs_heaptid = *tid;
                (*scan).xs_recheck = false;
                state.next += 1;
                true
            }
            None => false,
        }
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgetbitmap(scan: pg_sys::IndexScanDesc, tbm: *mut pg_sys::TIDBitmap) -> i64 {
    unsafe {
        let state = state_of(scan);
        let mut results = search((*scan).indexRelation, &state.balls);
        let n = results.len();
        if n > 0 {
            pg_sys::tbm_add_tuples(tbm, results.as_mut_ptr(), n as i32, false);
        }
        n as i64
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amendscan(scan: pg_sys::IndexScanDesc) {
    unsafe {
        if !(*scan).opaque.is_null() {
            free_state((*scan).opaque);
        }
    }
}

/// The TIDs of the rows in every ball, ascending.
unsafe fn search(index: pg_sys::Relation, balls: &[Ball]) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        // A NULL ball, or none at all (the operator class has no other strategy), matches nothing.
        let Some(balls) = balls.iter().copied().collect::<Option<Vec<(u64, i32)>>>() else {
            return Vec::new();
        };
        // Probe with the smallest ball; check all.
        let Some(&(query, radius)) = balls.iter().min_by_key(|ball| ball.1) else {
            return Vec::new();
        };
        if radius < 0 {
            return Vec::new();
        }
        let k = radius.min(64) as u32;
        let meta = page::load_meta(index);

        let mut results = Vec::new();
        let in_all = |fp: u64| balls.iter().all(|&ball| within(fp, ball));
        if k <= MAX_PROBED_RADIUS {
            for segment in 0..SEGMENTS {
                let buckets = probe_buckets(query, segment, k, meta.bits).unwrap_or_default();
                for bucket in buckets {
                    read_bucket(index, &meta, segment, bucket, |fp, tid| {
                        if in_all(fp) && reported_in(fp, query, segment, k) {
                            super::push(&mut results, tid);
                        }
                    });
                }
            }
        } else {
            for bucket in 0..1u32 << meta.bits {
                read_bucket(index, &meta, 0, bucket, |fp, tid| {
                    if in_all(fp) {
                        super::push(&mut results, tid);
                    }
                });
            }
        }
        results.sort_unstable_by_key(crate::pg::tid::tid_order);
        results
    }
}

/// Calls `each` with every entry of a bucket, one page at a time under a share lock.
unsafe fn read_bucket(
    index: pg_sys::Relation,
    meta: &page::Meta,
    segment: u32,
    bucket: u32,
    mut each: impl FnMut(u64, pg_sys::ItemPointerData),
) {
    unsafe {
        let mut block = page::chain(index, meta, segment, bucket).head;
        while block != INVALID_BLOCK {
            let buffer = page::read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
            let bucket_page = pg_sys::BufferGetPage(buffer);
            page::expect_kind(bucket_page, Kind::Bucket, index, block);
            for entry in page::entries(bucket_page) {
                let (fp, tid) = (entry.fp, entry.tid);
                each(fp, tid);
            }
            block = (*page::special(bucket_page)).next;
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        pgrx::check_for_interrupts!();
    }
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C-unwind" fn amcostestimate(
    root: *mut pg_sys::PlannerInfo,
    path: *mut pg_sys::IndexPath,
    loop_count: f64,
    startup_cost: *mut pg_sys::Cost,
    total_cost: *mut pg_sys::Cost,
    selectivity: *mut pg_sys::Selectivity,
    correlation: *mut f64,
    pages: *mut f64,
) {
    unsafe {
        let mut costs: pg_sys::GenericCosts = std::mem::zeroed();
        pg_sys::genericcostestimate(root, path, loop_count, &mut costs);
        *startup_cost = costs.indexStartupCost;
        *total_cost = costs.indexTotalCost;
        *selectivity = costs.indexSelectivity;
        *correlation = costs.indexCorrelation;
        *pages = costs.numIndexPages;
    }
}
