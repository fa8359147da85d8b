//! Scans: `fp <@ simhash_ball(q, k)` reads the buckets `simhash_core::buckets` names, checks the
//! distance of every entry there and reports each row once, all at the first call (the matches are
//! few), sorted by TID so that the table is read in order. A radius beyond what the segments answer
//! reads every bucket of segment 0.
//!
//! `ORDER BY fp <~> q` (with `amgettuple`) returns the rows nearest first. With a radius test too,
//! its matches are sorted by distance. Without one, the buckets are read ring by ring around the
//! query (`simhash_core::nearest`), one segment's ring at a time as rows are asked for, so that
//! `LIMIT n` reads only the rings that hold the nearest rows; the rows whose fingerprint is NULL
//! come last (as `NULLS LAST`, the order of the sort the index replaces).
//!
//! The answers are computed ahead of the table reads, with no page pinned in between, so only MVCC
//! snapshots are accepted (as pgvector's scans do): a row VACUUM removed in between cannot be
//! visible to the scan's snapshot.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::buckets::{
    for_each_asked, for_each_near, for_each_within, probes_by_bucket, reported_in, segment_value, Askers,
    MAX_PROBED_RADIUS,
};
use simhash_core::nearest::{ring_buckets, Nearest, Step};

use super::chain::{self, ChainSlot};
use super::dense::{self, Dense, UNRESOLVED};
use super::dense_read;
use super::entries::Entries;
use super::SEGMENTS;
use super::{meta, page};
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

/// An ordered scan over the whole index, one segment's ring of buckets at a time (TIDs as
/// `tid_order` keys).
struct Ordered {
    meta: page::Meta,
    /// The built part (format 5), read value by value: the rings are those of whole segment
    /// values; the buckets of the rows inserted since are read by theirs (`Nearest::offer_in`).
    built: Option<Dense>,
    query: u64,
    /// The rows met: (`tid_order` key, fingerprint); the key [`UNRESOLVED`] for a row of the
    /// built part met in segment 1 to 3, whose TID (with those of the other rows of that
    /// fingerprint) is looked up in segment 0 only when its distance comes out.
    nearest: Nearest<(u64, u64)>,
    ready: Vec<(u64, u64)>,
    /// The distance of the rows in `ready` (`None`: the rows whose fingerprint is NULL).
    ready_distance: Option<u32>,
    next: usize,
    nulls_done: bool,
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
        if !keys.is_null() && nkeys > 0 {
            std::ptr::copy(keys, (*scan).keyData, nkeys as usize);
        }
        if !orderbys.is_null() && norderbys > 0 {
            std::ptr::copy(orderbys, (*scan).orderByData, norderbys as usize);
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
        if !state.searched {
            match state.order {
                // No key at all (a partial index whose predicate is the query's only condition,
                // a scan priced out by amcostestimate): every row.
                None if state.balls.is_empty() => state.nearest = Some(Box::new(Ordered::new(index, None))),
                None => match collect(index, &state.balls) {
                    Some(found) => state.results = found.into_iter().map(|(_, tid)| tid).collect(),
                    None => state.fall_back(index, None),
                },
                // A radius test too: its matches, by distance.
                Some(order) if !state.balls.is_empty() => match collect(index, &state.balls) {
                    Some(found) => {
                        let query = order.unwrap_or(0);
                        let mut found: Vec<(u32, u64)> = found
                            .into_iter()
                            .map(|(fp, tid)| (simhash_core::hamming(fp, query), crate::pg::tid::tid_order(&tid)))
                            .collect();
                        super::memory::sort_interruptibly(&mut found, |&found| found);
                        state.results = found.iter().map(|&(_, key)| crate::pg::tid::tid_of_order(key)).collect();
                        state.distances = found.into_iter().map(|(d, _)| d).collect();
                    }
                    None => state.fall_back(index, order),
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
        search_fingerprints(index, &state.balls, &mut |_, tid| {
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

/// The TIDs of the rows in every ball, ascending, or an ERROR (54000) when they take more than
/// `work_mem`.
pub(super) unsafe fn search(index: pg_sys::Relation, balls: &[Ball]) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        let Some(found) = collect(index, balls) else { too_many(index) };
        found.into_iter().map(|(_, tid)| tid).collect()
    }
}

/// The ERROR (54000) of a lookup whose matches do not fit in `work_mem`.
unsafe fn too_many(index: pg_sys::Relation) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!(
            "more than {} rows of simhash index \"{}\" are within the radius: more than work_mem holds",
            match_budget(),
            unsafe { crate::pg::names::relation_name(index) }
        ),
        None,
        Some("Use a smaller radius, or raise work_mem.".into()),
    )
}

/// The matches a scan holds at most: `work_mem` of them (16 bytes each).
fn match_budget() -> usize {
    (unsafe { pg_sys::work_mem } as usize * 1024 / 16).max(1024)
}

/// The rows in every ball: fingerprint and TID, by TID; `None` when they take more than `work_mem`.
unsafe fn collect(index: pg_sys::Relation, balls: &[Ball]) -> Option<Vec<(u64, pg_sys::ItemPointerData)>> {
    unsafe {
        let budget = match_budget();
        let mut found = Vec::new();
        let mut over = false;
        search_fingerprints(index, balls, &mut |fp, tid| {
            if over {
            } else if found.len() < budget {
                super::memory::push(&mut found, (fp, tid));
            } else {
                over = true;
                found = Vec::new();
            }
        });
        if over {
            return None;
        }
        super::memory::sort_interruptibly(&mut found, |(_, tid)| crate::pg::tid::tid_order(tid));
        found.dedup_by_key(|(_, tid)| crate::pg::tid::tid_order(tid));
        Some(found)
    }
}

/// Fingerprints of the built part met in segments 1 to 3 whose TIDs are looked up in segment 0
/// together (`dense_read::rows_of`), at most.
const UNRESOLVED_AT_ONCE: usize = 1 << 16;

/// Calls `found(fp, tid)` for each row in every ball, once, in no particular order.
unsafe fn search_fingerprints(
    index: pg_sys::Relation,
    balls: &[Ball],
    found: &mut dyn FnMut(u64, pg_sys::ItemPointerData),
) {
    unsafe {
        // A NULL ball, or none at all (the operator class has no other strategy), matches nothing.
        let Some(balls) = balls.iter().copied().collect::<Option<Vec<(u64, i32)>>>() else {
            return;
        };
        // Probe with the smallest ball; check all.
        let Some(&(query, radius)) = balls.iter().min_by_key(|ball| ball.1) else {
            return;
        };
        if radius < 0 {
            return;
        }
        let k = radius.min(64) as u32;
        let meta = meta::load_meta(index);

        let in_all = |fp: u64| balls.iter().all(|&ball| within(fp, ball));
        let built = Dense::of(&meta);
        if k <= MAX_PROBED_RADIUS {
            // The built part: the matches of segment 0 with their TIDs, those of the others'
            // (reported there) by their fingerprints, whose rows segment 0 gives after.
            if let Some(built) = built {
                // (a fingerprint's entries come one after the other: a batch holds all of them)
                let mut unresolved = Vec::new();
                for segment in 0..SEGMENTS {
                    dense_near(index, &built, segment, query, k, |fp, tid| {
                        if in_all(fp) && reported_in(fp, query, segment, k) {
                            match tid {
                                Some(tid) if dense::is_live(&tid) => found(fp, tid),
                                Some(_) => {}
                                None => {
                                    if unresolved.len() >= UNRESOLVED_AT_ONCE && unresolved.last() != Some(&fp) {
                                        dense_read::rows_of(index, &built, &mut unresolved, &mut *found);
                                        unresolved.clear();
                                    }
                                    super::memory::push(&mut unresolved, fp);
                                }
                            }
                        }
                    });
                }
                dense_read::rows_of(index, &built, &mut unresolved, &mut *found);
            }
            for segment in 0..SEGMENTS {
                let probes = probes_by_bucket(query, segment, k, meta.bits).unwrap_or_default();
                let (buckets, values): (Vec<u32>, Vec<Vec<u16>>) = probes.into_iter().unzip();
                chain::read_buckets(index, &meta, segment, &buckets, Some(&values), |i, entries, sorted| {
                    // Of a page's sorted entries only those with a probed segment value, within k.
                    let mut found = |fp: u64, tid: pg_sys::ItemPointerData| {
                        if in_all(fp) && reported_in(fp, query, segment, k) {
                            found(fp, tid);
                        }
                    };
                    let (bits, values) = (meta.bits, &values[i]);
                    match entries {
                        Entries::Packed(packed) => for_each_near(
                            packed,
                            sorted,
                            values,
                            bits,
                            segment,
                            query,
                            k,
                            |e| e.fp,
                            |e| found(e.fp, e.tid),
                        ),
                        Entries::Apart(apart) => for_each_near(
                            apart.fps,
                            sorted,
                            values,
                            bits,
                            segment,
                            query,
                            k,
                            |&fp| fp,
                            |fp| found(*fp, apart.tid_of(fp)),
                        ),
                    }
                });
            }
        } else {
            if let Some(built) = built {
                dense_read::read_values(index, &built, 0, 0, simhash_core::dense::VALUES, |fp, tid| {
                    if let Some(tid) = tid.filter(|tid| dense::is_live(tid) && in_all(fp)) {
                        found(fp, tid);
                    }
                });
            }
            let buckets: Vec<u32> = (0..1u32 << meta.bits).collect();
            chain::read_buckets(index, &meta, 0, &buckets, None, |_, entries, _| {
                for (fp, tid) in entries.iter() {
                    if in_all(fp) {
                        found(fp, tid);
                    }
                }
            });
        }
    }
}

/// Calls `found(fp, tid)` for each entry of the built part, in the runs of segment `n` that a
/// lookup of `query` within `k` (at most `MAX_PROBED_RADIUS`) reads, that is within `k` of
/// `query`; `tid` is the entry's TID in segment 0 (perhaps of a removed row: `dense::is_live`),
/// `None` in the others.
unsafe fn dense_near(
    index: pg_sys::Relation,
    built: &Dense,
    n: u32,
    query: u64,
    k: u32,
    mut found: impl FnMut(u64, Option<pg_sys::ItemPointerData>),
) {
    unsafe {
        let Some(radii) = simhash_core::probes::segment_radii(k) else { return };
        let values = simhash_core::probes::segment_probes(segment_value(query, n), radii[n as usize]);
        let runs = dense_read::runs(index, built, n, &values);
        dense_read::read_runs(index, built, n, &runs, |part| {
            part.near(values[part.run], n, query, k, |i, fp| found(fp, part.tids.map(|tids| tids.get(i))));
        });
    }
}

/// For each of `queries`, the rows within `k` (at most `MAX_PROBED_RADIUS`): (position in
/// `queries`, TID) pairs, each once, in no particular order. Each page of a probed bucket is read
/// once for all the queries, each of its entries checked against the queries that probe its value
/// (`simhash_core::buckets::for_each_asked`).
pub(super) unsafe fn search_many(
    index: pg_sys::Relation,
    queries: &[u64],
    k: u32,
) -> Vec<(usize, pg_sys::ItemPointerData)> {
    unsafe {
        let meta = meta::load_meta(index);
        let mut results = Vec::new();
        // (at most about work_mem of matches, 16 bytes each)
        let budget = match_budget();
        let mut askers = Askers::default();
        let built = Dense::of(&meta);
        // The matches of the built part's segments 1 to 3, by fingerprint: (fingerprint, query).
        let mut unresolved: Vec<(u64, u32)> = Vec::new();
        for segment in 0..SEGMENTS {
            if askers.fill(queries, segment, k).is_none() {
                error!("simhash index: a batched lookup takes radii up to {MAX_PROBED_RADIUS}, not {k}");
            }
            if let Some(built) = built {
                // Each run read once for the queries that ask for its value.
                let (values, askers_of): (Vec<u16>, Vec<Vec<u32>>) =
                    askers.values().map(|(value, qs)| (value, qs.collect())).unzip();
                let runs = dense_read::runs(index, &built, segment, &values);
                dense_read::read_runs(index, &built, segment, &runs, |part| {
                    let value = values[part.run];
                    for &q in &askers_of[part.run] {
                        let query = queries[q as usize];
                        part.near(value, segment, query, k, |i, fp| {
                            if !reported_in(fp, query, segment, k) {
                                return;
                            }
                            match part.tids.map(|tids| tids.get(i)) {
                                Some(tid) if dense::is_live(&tid) => {
                                    super::memory::push(&mut results, (q as usize, tid))
                                }
                                Some(_) => {}
                                None => super::memory::push(&mut unresolved, (fp, q)),
                            }
                            if results.len() + unresolved.len() > budget {
                                too_many(index);
                            }
                        });
                    }
                });
            }
            let buckets = askers.buckets(meta.bits);
            chain::read_buckets(index, &meta, segment, &buckets, None, |i, entries, sorted| {
                let mut found = |fp: u64, q: u32, tid: &dyn Fn() -> pg_sys::ItemPointerData| {
                    let query = queries[q as usize];
                    if simhash_core::hamming(fp, query) <= k && reported_in(fp, query, segment, k) {
                        super::memory::push(&mut results, (q as usize, tid()));
                        if results.len() + unresolved.len() > budget {
                            too_many(index);
                        }
                    }
                };
                let (bucket, bits) = (buckets[i], meta.bits);
                match entries {
                    Entries::Packed(packed) => {
                        let value = |e: &page::Entry| segment_value(e.fp, segment);
                        for_each_asked(packed, sorted, &askers, bucket, bits, value, |e, q| found(e.fp, q, &|| e.tid))
                    }
                    Entries::Apart(apart) => {
                        let value = |fp: &u64| segment_value(*fp, segment);
                        for_each_asked(apart.fps, sorted, &askers, bucket, bits, value, |fp, q| {
                            found(*fp, q, &|| apart.tid_of(fp))
                        })
                    }
                }
            });
        }
        if let (Some(built), false) = (built, unresolved.is_empty()) {
            super::memory::sort_interruptibly(&mut unresolved, |&pair| pair);
            unresolved.dedup();
            let mut fps: Vec<u64> = unresolved.iter().map(|&(fp, _)| fp).collect();
            dense_read::rows_of(index, &built, &mut fps, |fp, tid| {
                let from = unresolved.partition_point(|&(f, _)| f < fp);
                for &(_, q) in unresolved[from..].iter().take_while(|&&(f, _)| f == fp) {
                    super::memory::push(&mut results, (q as usize, tid));
                }
                if results.len() > budget {
                    too_many(index);
                }
            });
        }
        results
    }
}

fn out_of_memory() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        "out of memory for the rows of an ordered simhash index scan".into(),
        None,
        None,
    )
}

impl Ordered {
    /// An ordered scan of `index` by distance from `query` (`None`: NULL, any order).
    unsafe fn new(index: pg_sys::Relation, query: Option<u64>) -> Ordered {
        let meta = unsafe { meta::load_meta(index) };
        if !meta.indexes_nulls() {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("simhash index \"{}\" was built by simhash 0.3.0 and cannot serve ORDER BY", unsafe {
                    crate::pg::names::relation_name(index)
                }),
                None,
                Some("REINDEX the index.".into()),
            );
        }
        let query = query.unwrap_or(0);
        // The rows waiting take 8 bytes each: at most about work_mem of them.
        let budget = unsafe { pg_sys::work_mem } as usize * 1024 / 16;
        let built = Dense::of(&meta);
        let bits = if built.is_some() { simhash_core::SEGMENT_BITS } else { meta.bits };
        Ordered {
            meta,
            built,
            query,
            nearest: Nearest::new(query, bits, budget),
            ready: Vec::new(),
            ready_distance: None,
            next: 0,
            nulls_done: false,
        }
    }

    /// The next row and its distance, nearest first, then the rows whose fingerprint is NULL.
    unsafe fn next_tid(&mut self, index: pg_sys::Relation) -> Option<(pg_sys::ItemPointerData, Option<u32>)> {
        unsafe {
            loop {
                if let Some(&(key, _)) = self.ready.get(self.next) {
                    self.next += 1;
                    return Some((crate::pg::tid::tid_of_order(key), self.ready_distance));
                }
                self.next = 0;
                if let Some(distance) = self.nearest.pop_ready(&mut self.ready) {
                    self.ready_distance = Some(distance);
                    if let Some(built) = self.built.filter(|_| self.ready.iter().any(|&(key, _)| key == UNRESOLVED)) {
                        let mut fps: Vec<u64> =
                            self.ready.iter().filter(|&&(key, _)| key == UNRESOLVED).map(|&(_, fp)| fp).collect();
                        self.ready.retain(|&(key, _)| key != UNRESOLVED);
                        let ready = &mut self.ready;
                        dense_read::rows_of(index, &built, &mut fps, |fp, tid| {
                            super::memory::push(ready, (crate::pg::tid::tid_order(&tid), fp))
                        });
                        self.ready.sort_unstable();
                    }
                    continue;
                }
                if let Some(step) = self.nearest.begin() {
                    self.read(index, step);
                    self.nearest.end();
                } else if !self.nulls_done {
                    self.nulls_done = true;
                    self.ready.clear();
                    self.ready_distance = None;
                    chain::read_chain(index, &self.meta, ChainSlot::Nulls, |entries| {
                        for (_, tid) in entries.iter() {
                            super::memory::push(&mut self.ready, (crate::pg::tid::tid_order(&tid), 0));
                        }
                    });
                    self.ready.sort_unstable();
                } else {
                    return None;
                }
            }
        }
    }

    /// Reads the buckets of `step`, offering every entry.
    unsafe fn read(&mut self, index: pg_sys::Relation, step: Step) {
        unsafe {
            let (meta, query) = (self.meta, self.query);
            let nearest = &mut self.nearest;
            let mut within = Vec::new();
            let mut read = |segment: u32, buckets: &[u32]| {
                chain::read_buckets(index, &meta, segment, buckets, None, |_, entries, _| {
                    // (The cutoff only falls within a step: the page's skips only what offer would.)
                    let cutoff = nearest.cutoff();
                    let mut offer = |fp: u64, tid: &dyn Fn() -> pg_sys::ItemPointerData| {
                        nearest
                            .offer_in(segment, fp, meta.bits, || (crate::pg::tid::tid_order(&tid()), fp))
                            .unwrap_or_else(|_| out_of_memory());
                    };
                    match entries {
                        Entries::Packed(packed) => {
                            for_each_within(packed, query, cutoff, |e| e.fp, |e| offer(e.fp, &|| e.tid))
                        }
                        Entries::Apart(apart) => {
                            // The entries within the cutoff first, their TIDs requested from
                            // memory, then offered: many are kept while the cutoff is high, and
                            // their TIDs' reads then overlap.
                            within.clear();
                            for_each_within(
                                apart.fps,
                                query,
                                cutoff,
                                |&fp| fp,
                                |fp| {
                                    let i = apart.position(fp);
                                    apart.prefetch_tid(i);
                                    within.push(i);
                                },
                            );
                            for &i in within.iter() {
                                offer(apart.fps[i], &|| apart.tid(i));
                            }
                        }
                    }
                });
            };
            match step {
                Step::Ring { ring, segment } => read(segment, &ring_buckets(query, segment, ring, meta.bits)),
                Step::Rest => read(0, &(0..1u32 << meta.bits).collect::<Vec<u32>>()),
            }
            if let Some(built) = self.built {
                self.read_built(index, &built, step);
            }
        }
    }

    /// Reads the built part for `step`: the runs of the segment values `ring` bits from the
    /// query's, or every entry of segment 0.
    unsafe fn read_built(&mut self, index: pg_sys::Relation, built: &Dense, step: Step) {
        unsafe {
            const BITS: u32 = simhash_core::SEGMENT_BITS;
            let query = self.query;
            let nearest = &mut self.nearest;
            let offer = |nearest: &mut Nearest<(u64, u64)>, n: u32, fp: u64, key: u64| {
                nearest.offer_in(n, fp, BITS, || (key, fp)).unwrap_or_else(|_| out_of_memory());
            };
            let (ring, n) = match step {
                Step::Ring { ring, segment } => (ring, segment),
                Step::Rest => {
                    dense_read::read_values(index, built, 0, 0, simhash_core::dense::VALUES, |fp, tid| {
                        if let Some(tid) = tid.filter(dense::is_live) {
                            offer(nearest, 0, fp, crate::pg::tid::tid_order(&tid));
                        }
                    });
                    return;
                }
            };
            let values: Vec<u16> = ring_buckets(query, n, ring, BITS).into_iter().map(|v| v as u16).collect();
            let runs = dense_read::runs(index, built, n, &values);
            dense_read::read_runs(index, built, n, &runs, |part| {
                // (the cutoff only falls within a step: a part skips only what offer would)
                part.near(values[part.run], n, query, nearest.cutoff(), |i, fp| {
                    match part.tids.map(|tids| tids.get(i)) {
                        Some(tid) if dense::is_live(&tid) => offer(nearest, n, fp, crate::pg::tid::tid_order(&tid)),
                        Some(_) => {}
                        None => offer(nearest, n, fp, UNRESOLVED),
                    }
                });
            });
        }
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
        // Priced out (as pgvector does), so that a sequential scan, whose own disabling counts
        // less, always wins over them: a scan with neither a radius test nor ORDER BY (a partial
        // index whose predicate the query implies), which reads the whole index; and an
        // index-only scan (chosen when the query needs no column at all), which the index cannot
        // serve (it returns no index tuples).
        let keyless = (*path).indexclauses.is_null() && (*path).indexorderbys.is_null();
        let index_only = (*path).path.pathtype == pg_sys::NodeTag::T_IndexOnlyScan;
        let penalty = i32::from(keyless) + 2 * i32::from(index_only);
        if penalty > 0 {
            *startup_cost += f64::from(penalty) * pg_sys::disable_cost;
            *total_cost += f64::from(penalty) * pg_sys::disable_cost;
            #[cfg(feature = "pg18")]
            {
                (*path).path.disabled_nodes += penalty;
            }
        }
        *selectivity = costs.indexSelectivity;
        *correlation = costs.indexCorrelation;
        *pages = costs.numIndexPages;
    }
}
