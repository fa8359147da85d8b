//! Scans (the callbacks `ambeginscan` to `amendscan`): `fp <@ simhash_ball(q, k)` finds every row
//! in the ball at the first call (`super::search`; the matches are few) and returns them sorted by
//! TID so that the table is read in order.
//!
//! `ORDER BY fp <~> q` (with `amgettuple`) returns the rows nearest first. With a radius test too,
//! its matches are sorted by distance. Without one (or when they take more than work_mem), an ordered
//! scan (`super::ordered`) reads the index ring by ring around the query as rows are asked for.
//!
//! The answers are computed ahead of the table reads, with no page pinned in between, so only MVCC
//! snapshots are accepted (as pgvector's scans do): a row VACUUM removed in between cannot be
//! visible to the scan's snapshot.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use super::ordered::Ordered;
use super::search::{self, Ball};
use crate::pg::errors::raise;

#[derive(Default)]
struct ScanState {
    balls: Vec<Ball>,
    /// `ORDER BY fp <-> q`: `Some(q)`, `Some(None)` for a NULL `q` (any order).
    order: Option<Option<u64>>,
    /// Which ORDER BY key `order` is (`usize::MAX`: none, every `q` is NULL).
    order_key: usize,
    results: Vec<pg_sys::ItemPointerData>,
    /// With ORDER BY and a radius test: the distance of each result.
    distances: Vec<u32>,
    next: usize,
    searched: bool,
    /// An ordered scan without a radius test, or with one whose matches do not fit in work_mem.
    nearest: Option<Box<Ordered>>,
    /// With a radius test whose matches do not fit in work_mem: the radius around the ordered
    /// scan's query beyond which it stops (`u32::MAX`: none), each row rechecked.
    within: Option<u32>,
    /// The scan of an index of codes (`super::codes::scan`).
    codes: super::codes::scan::CodesScan,
}

impl ScanState {
    /// For a radius test whose matches take more than work_mem (a large radius, many copies):
    /// an ordered scan instead, which keeps to work_mem, around `order` (`ORDER BY fp <-> q`) or
    /// else the smallest ball's centre, stopping beyond the ball when that is its centre; the
    /// executor rechecks each row against the radius tests.
    unsafe fn fall_back(&mut self, index: pg_sys::Relation, order: Option<u64>) {
        let Some(&Some((centre, radius))) = self.balls.iter().min_by_key(|ball| ball.map_or(i32::MIN, |b| b.1)) else {
            return;
        };
        let query = order.unwrap_or(centre);
        self.within = Some(if query == centre { radius.max(0) as u32 } else { u32::MAX });
        self.nearest = Some(Box::new(unsafe { Ordered::new(index, Some(query)) }));
    }
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
        if norderbys > 0 {
            (*scan).xs_orderbyvals = pg_sys::palloc0(std::mem::size_of::<Datum>() * norderbys as usize).cast();
            (*scan).xs_orderbynulls = pg_sys::palloc0(norderbys as usize).cast();
        }
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
    orderbys: pg_sys::ScanKey,
    norderbys: i32,
) {
    unsafe {
        let state = state_of(scan);
        // (what the keys are read with is freed here, not at the end of the query: an inner scan
        // of a nested loop is rescanned for every outer row)
        let _scratch = crate::pg::scratch::Scratch::new();
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
        }
        if super::codes::is_codes((*scan).indexRelation) {
            return super::codes::scan::rescan(scan, &mut state.codes);
        }
        // ORDER BY fp <-> q: the first key whose q is not NULL orders the scan (a NULL q makes its
        // distance NULL for every row, a constant); with every q NULL, any order.
        let orderbys = (0..(*scan).numberOfOrderBys as usize).map(|i| &*(*scan).orderByData.add(i));
        let mut effective = None;
        for (i, key) in orderbys.enumerate() {
            if key.sk_flags & pg_sys::SK_ISNULL as i32 == 0 {
                effective = Some((i, key.sk_argument.value() as u64));
                break;
            }
        }
        state.order = ((*scan).numberOfOrderBys > 0).then(|| effective.map(|(_, q)| q));
        state.order_key = effective.map_or(usize::MAX, |(i, _)| i);
        state.nearest = None;
        state.within = None;
        state.distances.clear();
        state.balls = (0..(*scan).numberOfKeys as usize)
            .map(|i| {
                let key = &*(*scan).keyData.add(i);
                if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                    None
                } else {
                    search::ball_of(key.sk_argument)
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
        if (*scan).xs_want_itup {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "a simhash index cannot serve an index-only scan".into(),
                None,
                Some("Enable sequential scans (SET enable_seqscan = on).".into()),
            );
        }
        let state = state_of(scan);
        let index = (*scan).indexRelation;
        if super::codes::is_codes(index) {
            return super::codes::scan::gettuple(scan, &mut state.codes);
        }
        if !state.searched {
            match state.order {
                // No key at all (a partial index whose predicate is the query's only condition,
                // a scan priced out by amcostestimate): every row.
                None if state.balls.is_empty() => state.nearest = Some(Box::new(Ordered::new(index, None))),
                None => match search::collect(index, &state.balls) {
                    Ok(found) => {
                        state.results = crate::memory::entries_with_room(found.len());
                        state.results.extend(found.into_iter().map(|(_, tid)| tid));
                    }
                    Err(_) => state.fall_back(index, None),
                },
                // A radius test too: its matches, by distance.
                Some(order) if !state.balls.is_empty() => match search::collect(index, &state.balls) {
                    Ok(mut found) => {
                        let query = order.unwrap_or(0);
                        let distance = |fp: u64| simhash_core::hamming(fp, query);
                        crate::memory::sort_interruptibly(&mut found, |&(fp, tid)| {
                            (distance(fp), crate::pg::tid::tid_order(&tid))
                        });
                        state.results = crate::memory::entries_with_room(found.len());
                        state.results.extend(found.iter().map(|&(_, tid)| tid));
                        state.distances = crate::memory::entries_with_room(found.len());
                        state.distances.extend(found.into_iter().map(|(fp, _)| distance(fp)));
                    }
                    Err(_) => state.fall_back(index, order),
                },
                Some(order) => state.nearest = Some(Box::new(Ordered::new(index, order))),
            }
            state.searched = true;
        }
        let found = if let Some(ordered) = state.nearest.as_mut() {
            match ordered.next_tid(index) {
                // (the rows whose fingerprint is NULL come last, without a distance)
                Some((_, distance)) if state.within.is_some_and(|k| distance.is_none_or(|d| d > k)) => None,
                found => found,
            }
        } else {
            let found = state.results.get(state.next).map(|&tid| (tid, state.distances.get(state.next).copied()));
            state.next += 1;
            found
        };
        let Some((tid, distance)) = found else { return false };
        (*scan).xs_heaptid = tid;
        (*scan).xs_recheck = state.within.is_some();
        if state.order.is_some() {
            // The distance of the ordering key is exact and comes out in order. With more ORDER BY
            // distances the values go to the executor (NULL for the keys before it, whose q is
            // NULL, a lower bound of 0 for the keys after it), which then sorts each run of equal
            // distances by the others.
            let norderbys = (*scan).numberOfOrderBys as usize;
            (*scan).xs_recheckorderby = norderbys > 1;
            if norderbys > 1 {
                let values = std::slice::from_raw_parts_mut((*scan).xs_orderbyvals, norderbys);
                let nulls = std::slice::from_raw_parts_mut((*scan).xs_orderbynulls, norderbys);
                for i in 0..norderbys {
                    values[i] = Datum::from(0i32);
                    nulls[i] = i < state.order_key;
                }
                if state.order_key < norderbys {
                    match distance {
                        Some(d) => values[state.order_key] = Datum::from(d as i32),
                        None => nulls[state.order_key] = true, // a NULL fingerprint
                    }
                }
            }
        }
        true
    }
}

/// The rows a bitmap scan without a key adds to the bitmap at a time.
const BITMAP_BATCH: usize = 4096;

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amgetbitmap(scan: pg_sys::IndexScanDesc, tbm: *mut pg_sys::TIDBitmap) -> i64 {
    unsafe {
        let state = state_of(scan);
        let index = (*scan).indexRelation;
        if super::codes::is_codes(index) {
            return super::codes::scan::getbitmap(scan, &mut state.codes, tbm);
        }
        if state.balls.is_empty() {
            // No key (a partial index's predicate is the query's only condition): every row,
            // added a batch at a time (the bitmap keeps to work_mem).
            let mut ordered = Ordered::new(index, None);
            let mut batch = Vec::with_capacity(BITMAP_BATCH);
            let mut n = 0;
            loop {
                let next = ordered.next_tid(index);
                if next.is_none() || batch.len() == BITMAP_BATCH {
                    pg_sys::tbm_add_tuples(tbm, batch.as_mut_ptr(), batch.len() as i32, false);
                    n += batch.len() as i64;
                    batch.clear();
                    pgrx::check_for_interrupts!();
                }
                let Some((tid, _)) = next else { return n };
                batch.push(tid);
            }
        }
        // The matches, a batch at a time (the bitmap keeps to work_mem).
        let mut batch = Vec::with_capacity(BITMAP_BATCH);
        let mut n = 0;
        search::search_fingerprints(index, &state.balls, &mut |_, tid| {
            if batch.len() == BITMAP_BATCH {
                pg_sys::tbm_add_tuples(tbm, batch.as_mut_ptr(), batch.len() as i32, false);
                n += batch.len() as i64;
                batch.clear();
            }
            batch.push(tid);
        });
        pg_sys::tbm_add_tuples(tbm, batch.as_mut_ptr(), batch.len() as i32, false);
        n + batch.len() as i64
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
