//! Reading rows with a dirty snapshot for the recheck: the rows within k of a fingerprint (or code)
//! through the column's simhash index (`crate::index::rows_within`, for codes
//! `crate::index::code_rows_within`) or its four segment B-trees
//! (`crate::lookup::segment_scan`, the distance checked in the index tuple), or every row of the
//! table in one pass.

use std::ops::ControlFlow;

use crate::lookup::catalog::SEGMENTS;
use pgrx::pg_sys::{self, Oid};

use super::value::Fingerprint;
use crate::lookup::catalog::SegmentIndex;
use crate::lookup::segment_scan::SegmentScan;

/// The index the recheck reads: the column's simhash index, else its four segment B-trees.
#[derive(Clone, Copy)]
pub(super) enum RecheckIndex {
    Own(Oid),
    SegmentBtrees([SegmentIndex; SEGMENTS]),
}

impl RecheckIndex {
    /// The index of column `attnum` of table `relid` the recheck reads (`schema` is the
    /// extension's), if it has one.
    pub(super) fn of(schema: Oid, relid: Oid, attnum: i32) -> Option<RecheckIndex> {
        let indexes = crate::lookup::catalog::column_indexes(schema, relid, attnum as i16)?;
        indexes.own_index().map(RecheckIndex::Own).or_else(|| indexes.segment_btrees().map(RecheckIndex::SegmentBtrees))
    }
}

/// Calls `visit(tuple, value, distance)` for each row that `snapshot` sees whose column is within
/// `k` of `fp`, right after the visibility check (a dirty snapshot's xmin/xmax describe that row),
/// through `index` or else a sequential scan; stops when `visit` breaks.
///
/// # Safety
///
/// Inside a transaction; `rel` is open (with at least RowExclusiveLock, as the recheck holds) and
/// `index` is an index of its column `attnum`.
pub(super) unsafe fn for_each_within<F: Fingerprint>(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    attnum: i32,
    fp: &F,
    k: u32,
    snapshot: pg_sys::Snapshot,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, F, u32) -> ControlFlow<()>,
) {
    unsafe {
        let mut near = |tuple: pg_sys::HeapTuple, value: Option<F>| {
            let Some(value) = value else { return ControlFlow::Continue(()) };
            let distance = value.distance(fp);
            if distance <= k {
                visit(tuple, value, distance)
            } else {
                ControlFlow::Continue(())
            }
        };
        let (indexes, fp) = match (index, fp.as_simhash()) {
            (Some(RecheckIndex::Own(oid)), _) => {
                return for_each_in_own_index(rel, oid, attnum, fp, k, snapshot, &mut near)
            }
            (Some(RecheckIndex::SegmentBtrees(indexes)), Some(fp)) => (indexes, fp),
            _ => return for_each_row(rel, attnum, snapshot, &mut near),
        };
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        'segments: for (n, segment_index) in indexes.into_iter().enumerate() {
            let mut scan = SegmentScan::begin(rel, segment_index, n as i32, snapshot, fp, k);
            // index_getnext_slot, with the distance checked on the index tuple first (SegmentScan).
            // A dirty snapshot can see several versions of a HOT chain: the fetch then asks to be
            // called again for the same TID (xs_heap_continue, read only after a fetch set it).
            let mut heap_continue = false;
            loop {
                if !heap_continue && scan.next().is_none() {
                    break;
                }
                let found = pg_sys::index_fetch_heap(scan.scan(), slot);
                heap_continue = (*scan.scan()).xs_heap_continue;
                if found && row_of_slot(slot, attnum, (*rel).rd_att, &mut near).is_break() {
                    break 'segments;
                }
            }
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}

/// [`for_each_within`] through the simhash index `oid`: its TIDs of the rows within `k` of `fp`
/// (read at once, the pages unlocked before the table is read), each fetched with `snapshot`.
/// Should VACUUM remove a row and its TID be reused in between, the row found there is checked
/// like any other (`near` tests the distance of the table's value).
unsafe fn for_each_in_own_index<F: Fingerprint>(
    rel: pg_sys::Relation,
    oid: Oid,
    attnum: i32,
    fp: &F,
    k: u32,
    snapshot: pg_sys::Snapshot,
    near: &mut dyn FnMut(pg_sys::HeapTuple, Option<F>) -> ControlFlow<()>,
) {
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
        let tids = F::index_rows_within(index, fp, k);
        pg_sys::index_close(index, pg_sys::NoLock as i32);
        for_each_fetched(rel, attnum, snapshot, &tids, &mut |_, tuple, value| near(tuple, value));
    }
}

/// Which of `fingerprints` have a row of another transaction within `k` (committed or not), found
/// through the simhash index `oid` for many fingerprints at once (each bucket read once per
/// thousand of them), each candidate row fetched with a dirty snapshot. Like the one pass over the
/// table, rows of others written after the index was read may be missed: their writers recheck
/// after writing them, and then see ours.
///
/// # Safety
///
/// Inside a transaction; `rel` is open (with at least RowExclusiveLock) and `oid` is a simhash
/// index of its column `attnum`.
pub(super) unsafe fn suspects_through_index(
    rel: pg_sys::Relation,
    oid: Oid,
    attnum: i32,
    fingerprints: &[u64],
    k: u32,
    ours: &super::pending::Ours,
) -> Vec<u64> {
    const BATCH: usize = simhash_core::cost::RECHECK_BATCH;
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as i32);
        let mut suspects = Vec::new();
        for batch in fingerprints.chunks(BATCH) {
            pg_sys::check_for_interrupts!();
            let mut candidates = crate::index::rows_within_each(index, batch, k);
            // In table order, for the heap reads.
            crate::memory::sort_interruptibly(&mut candidates, |(_, tid)| crate::pg::tid::tid_order(tid));
            let mut tids: Vec<pg_sys::ItemPointerData> =
                crate::memory::vec_with_room(candidates.len()).unwrap_or_else(|| {
                    crate::memory::constraint_out_of_memory(&format!(
                        "the {} rows of relation \"{}\" that the near-duplicate check at commit fetches",
                        candidates.len(),
                        crate::pg::names::relation_name(rel),
                    ))
                });
            tids.extend(candidates.iter().map(|&(_, tid)| tid));
            let mut suspect = vec![false; batch.len()];
            let mut dirty = dirty_snapshot();
            for_each_fetched::<u64>(rel, attnum, &mut dirty, &tids, &mut |i, tuple, value| {
                let q = candidates[i].0;
                let near = value.is_some_and(|value| simhash_core::hamming(value, batch[q]) <= k);
                if near && !ours.contains(tuple) {
                    suspect[q] = true;
                }
                ControlFlow::Continue(())
            });
            for fp in batch.iter().zip(suspect).filter_map(|(&fp, s)| s.then_some(fp)) {
                if crate::memory::push(&mut suspects, fp).is_none() {
                    crate::memory::constraint_out_of_memory(&format!(
                        "the near-duplicate recheck of {} values",
                        fingerprints.len()
                    ));
                }
            }
        }
        pg_sys::index_close(index, pg_sys::NoLock as i32);
        suspects
    }
}

/// Calls `visit(i, tuple, value)` with each version of the row at `tids[i]` that `snapshot` sees
/// (every version of the HOT chain a dirty snapshot sees, as index_fetch_heap does for non-MVCC
/// snapshots) and its column `attnum`; stops when `visit` breaks.
unsafe fn for_each_fetched<F: Fingerprint>(
    rel: pg_sys::Relation,
    attnum: i32,
    snapshot: pg_sys::Snapshot,
    tids: &[pg_sys::ItemPointerData],
    visit: &mut dyn FnMut(usize, pg_sys::HeapTuple, Option<F>) -> ControlFlow<()>,
) {
    unsafe {
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let fetch = pg_sys::table_index_fetch_begin(rel);
        'rows: for (i, &root) in tids.iter().enumerate() {
            let mut tid = root;
            let mut call_again = false;
            loop {
                let mut all_dead = false;
                let found =
                    pg_sys::table_index_fetch_tuple(fetch, &mut tid, snapshot, slot, &mut call_again, &mut all_dead);
                if found
                    && row_of_slot(slot, attnum, (*rel).rd_att, &mut |tuple, value| visit(i, tuple, value)).is_break()
                {
                    break 'rows;
                }
                if !call_again {
                    break;
                }
            }
        }
        pg_sys::table_index_fetch_end(fetch);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}

/// A copy of the row version `row` of the deferred check if it is still stored (this transaction
/// wrote it and has not deleted or updated it, nor rolled it back) with the fingerprint it was
/// written with; `None` if it is gone. `blocks`: the table's size in blocks.
///
/// # Safety
///
/// Inside a transaction; `rel` is open (with at least RowExclusiveLock).
pub(super) unsafe fn own_row<F: Fingerprint>(
    rel: pg_sys::Relation,
    attnum: i32,
    row: &super::pending::WrittenRow<F>,
    blocks: pg_sys::BlockNumber,
) -> Option<pg_sys::HeapTuple> {
    unsafe {
        fetch_row(rel, attnum, row.tid, blocks, &mut |tuple, value: Option<F>| {
            let xmin = (*(*tuple).t_data).t_choice.t_heap.t_xmin;
            value.as_ref() == Some(&row.fp) && xmin == row.xmin && super::pending::written_by_this_transaction(tuple)
        })
    }
}

/// A copy of the row at `tid` if a dirty snapshot sees it there (committed or in progress, not
/// deleted) with a fingerprint at `distance` from `fp` (not a row that took the place of one
/// deleted since); `None` if it is gone. `blocks`: the table's size in blocks.
///
/// # Safety
///
/// As [`own_row`].
pub(super) unsafe fn stored_row<F: Fingerprint>(
    rel: pg_sys::Relation,
    attnum: i32,
    tid: pg_sys::ItemPointerData,
    (fp, distance): (&F, u32),
    blocks: pg_sys::BlockNumber,
) -> Option<pg_sys::HeapTuple> {
    unsafe {
        fetch_row(rel, attnum, tid, blocks, &mut |_, value: Option<F>| {
            value.is_some_and(|v| v.distance(fp) == distance)
        })
    }
}

/// A copy of the row version at `tid` that a dirty snapshot sees, if `wanted(tuple, value of
/// column attnum)` takes it.
unsafe fn fetch_row<F: Fingerprint>(
    rel: pg_sys::Relation,
    attnum: i32,
    mut tid: pg_sys::ItemPointerData,
    blocks: pg_sys::BlockNumber,
    wanted: &mut dyn FnMut(pg_sys::HeapTuple, Option<F>) -> bool,
) -> Option<pg_sys::HeapTuple> {
    unsafe {
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let mut dirty = dirty_snapshot();
        let mut copy = None;
        // (A table created in this transaction is truncated in place: its TIDs may lie past its
        // end, `blocks`.)
        if pgrx::itemptr::item_pointer_get_both(tid).0 < blocks
            && pg_sys::table_tuple_fetch_row_version(rel, &mut tid, &mut dirty, slot)
        {
            row_of_slot(slot, attnum, (*rel).rd_att, &mut |tuple, value| {
                if wanted(tuple, value) {
                    copy = Some(pg_sys::heap_copytuple(tuple));
                }
            });
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        copy
    }
}

/// A dirty snapshot (InitDirtySnapshot): its visibility routine reports the writers still in
/// progress of the row it last judged in `xmin` (inserter) and `xmax` (deleter).
pub(super) fn dirty_snapshot() -> pg_sys::SnapshotData {
    // SAFETY: SnapshotData is plain data; a dirty snapshot needs only its type set.
    let mut snapshot: pg_sys::SnapshotData = unsafe { std::mem::zeroed() };
    snapshot.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_DIRTY;
    snapshot
}

/// Calls `visit(tuple, value)` with the row in `slot` and its column `attnum` (`None` if NULL).
unsafe fn row_of_slot<F: Fingerprint, R>(
    slot: *mut pg_sys::TupleTableSlot,
    attnum: i32,
    tupdesc: pg_sys::TupleDesc,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, Option<F>) -> R,
) -> R {
    unsafe {
        let mut should_free = false;
        let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
        let mut is_null = false;
        let value = pg_sys::heap_getattr(tuple, attnum as _, tupdesc, &mut is_null);
        let result = visit(tuple, (!is_null).then(|| F::of_datum(value)));
        if should_free {
            pg_sys::heap_freetuple(tuple);
        }
        result
    }
}

/// Calls `visit(tuple, value)` for each row `snapshot` sees, in one sequential pass, right after
/// its visibility check; stops when `visit` breaks.
///
/// # Safety
///
/// Inside a transaction; `rel` is open (with at least RowExclusiveLock, as the recheck holds).
pub(super) unsafe fn for_each_row<F: Fingerprint>(
    rel: pg_sys::Relation,
    attnum: i32,
    snapshot: pg_sys::Snapshot,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, Option<F>) -> ControlFlow<()>,
) {
    unsafe {
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_STRAT;
        let scan = pg_sys::heap_beginscan(rel, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags);
        while pg_sys::heap_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            // (at every row: one row's visit may compare it with many pending rows)
            pg_sys::check_for_interrupts!();
            if row_of_slot(slot, attnum, (*rel).rd_att, visit).is_break() {
                break;
            }
        }
        pg_sys::heap_endscan(scan);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}
