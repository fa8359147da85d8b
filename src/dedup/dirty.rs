//! Reading rows with a dirty snapshot for the recheck: the rows within k of a fingerprint through the
//! four segment B-trees (`crate::lookup::segment_scan`, the distance checked in the index tuple),
//! or every row of the table in one pass.

use std::ops::ControlFlow;

use crate::lookup::catalog::SEGMENTS;
use pgrx::pg_sys::{self};

use crate::lookup::catalog::SegmentIndex;
use crate::lookup::segment_scan::SegmentScan;

/// Calls `visit(tuple, value, distance)` for each row that `snapshot` sees whose column is within
/// `k` of `fp`, right after the visibility check (a dirty snapshot's xmin/xmax describe that row),
/// through the segment B-trees or else a sequential scan; stops when `visit` breaks.
///
/// # Safety
///
/// Inside a transaction; `rel` is open (with at least RowExclusiveLock, as the recheck holds) and
/// `indexes` are its segment B-trees.
pub(super) unsafe fn for_each_within(
    rel: pg_sys::Relation,
    indexes: Option<[SegmentIndex; SEGMENTS]>,
    attnum: i32,
    fp: u64,
    k: u32,
    snapshot: pg_sys::Snapshot,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, u64, u32) -> ControlFlow<()>,
) {
    unsafe {
        let mut near = |tuple: pg_sys::HeapTuple, value: Option<u64>| {
            let Some(value) = value else { return ControlFlow::Continue(()) };
            let distance = simhash_core::hamming(value, fp);
            if distance <= k {
                visit(tuple, value, distance)
            } else {
                ControlFlow::Continue(())
            }
        };
        let Some(indexes) = indexes else {
            for_each_row(rel, attnum, snapshot, &mut near);
            return;
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

/// A dirty snapshot (InitDirtySnapshot): its visibility routine reports the writers still in
/// progress of the row it last judged in `xmin` (inserter) and `xmax` (deleter).
pub(super) fn dirty_snapshot() -> pg_sys::SnapshotData {
    // SAFETY: SnapshotData is plain data; a dirty snapshot needs only its type set.
    let mut snapshot: pg_sys::SnapshotData = unsafe { std::mem::zeroed() };
    snapshot.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_DIRTY;
    snapshot
}

/// Calls `visit(tuple, value)` with the row in `slot` and its column `attnum` (`None` if NULL).
unsafe fn row_of_slot<R>(
    slot: *mut pg_sys::TupleTableSlot,
    attnum: i32,
    tupdesc: pg_sys::TupleDesc,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, Option<u64>) -> R,
) -> R {
    unsafe {
        let mut should_free = false;
        let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
        let mut is_null = false;
        let value = pg_sys::heap_getattr(tuple, attnum as _, tupdesc, &mut is_null).value() as u64;
        let result = visit(tuple, (!is_null).then_some(value));
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
pub(super) unsafe fn for_each_row(
    rel: pg_sys::Relation,
    attnum: i32,
    snapshot: pg_sys::Snapshot,
    visit: &mut dyn FnMut(pg_sys::HeapTuple, Option<u64>) -> ControlFlow<()>,
) {
    unsafe {
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_STRAT;
        let scan = pg_sys::heap_beginscan(rel, snapshot, 0, std::ptr::null_mut(), std::ptr::null_mut(), flags);
        let mut rows = 0u64;
        while pg_sys::heap_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            rows += 1;
            if rows.is_multiple_of(4096) {
                pg_sys::check_for_interrupts!();
            }
            if row_of_slot(slot, attnum, (*rel).rd_att, visit).is_break() {
                break;
            }
        }
        pg_sys::heap_endscan(scan);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
    }
}
