//! The radius scan, executor half: probes the four covering segment B-trees for the query
//! fingerprint (`segment_scan`), keeps the TIDs of the index tuples within the radius, sorted by
//! table position, then fetches those rows, where the whole WHERE clause is checked as usual.
//! The planning half is `radius_path`.

use std::ffi::CStr;
use std::mem::size_of;
use std::ptr::null_mut;

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

use crate::lookup::catalog::SEGMENTS;

use super::catalog::SegmentIndex;
use super::segment_scan::SegmentScan;
use super::shape::is_candidate_test;
use crate::pg::nodes::integer_at;
use crate::pg::tid::tid_order;

pub(crate) const NAME: &CStr = c"SimHash Radius Scan";

/// The callback tables PostgreSQL keeps pointers to; they hold only a name and functions.
pub(crate) struct Methods<T>(pub T);
// SAFETY: immutable after initialisation, and backends are single-threaded.
unsafe impl<T> Sync for Methods<T> {}

pub(crate) static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> =
    Methods(pg_sys::CustomScanMethods { CustomName: NAME.as_ptr(), CreateCustomScanState: Some(create_state) });

static EXEC_METHODS: Methods<pg_sys::CustomExecMethods> = Methods(pg_sys::CustomExecMethods {
    CustomName: NAME.as_ptr(),
    BeginCustomScan: Some(begin),
    ExecCustomScan: Some(exec),
    EndCustomScan: Some(end),
    ReScanCustomScan: Some(rescan),
    MarkPosCustomScan: None,
    RestrPosCustomScan: None,
    EstimateDSMCustomScan: None,
    InitializeDSMCustomScan: None,
    ReInitializeDSMCustomScan: None,
    InitializeWorkerCustomScan: None,
    ShutdownCustomScan: None,
    ExplainCustomScan: Some(explain),
});

/// The custom private list of the path and the plan: the radius, then per segment the index oid and
/// the fingerprint's attribute number in its tuples, then (path only) the functions whose calls mark
/// the rewrite's candidate tests.
const PRIVATE_RADIUS: usize = 0;
const PRIVATE_INDEXES: usize = PRIVATE_RADIUS + 1;
const PRIVATE_COLUMNS: usize = PRIVATE_INDEXES + SEGMENTS;
pub(crate) const PRIVATE_CANDIDATE_FUNCTIONS: usize = PRIVATE_COLUMNS + SEGMENTS;

#[pg_guard]
pub(crate) unsafe extern "C-unwind" fn plan_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    best_path: *mut pg_sys::CustomPath,
    tlist: *mut pg_sys::List,
    clauses: *mut pg_sys::List,
    _custom_plans: *mut pg_sys::List,
) -> *mut pg_sys::Plan {
    unsafe {
        let private = PgList::<Node>::from_pg((*best_path).custom_private);
        let candidate_functions = [
            Oid::from(integer_at(&private, PRIVATE_CANDIDATE_FUNCTIONS) as u32),
            Oid::from(integer_at(&private, PRIVATE_CANDIDATE_FUNCTIONS + 1) as u32),
        ];
        // The rewrite's candidate tests are implied by the exact test, which this scan answers: leave
        // them out of the qual (and of EXPLAIN's long probe arrays).
        let mut quals = PgList::<Node>::new();
        for clause in PgList::<Node>::from_pg(pg_sys::extract_actual_clauses(clauses, false)).iter_ptr() {
            if !is_candidate_test(clause, &candidate_functions) {
                quals.push(clause);
            }
        }
        let scan = pg_sys::palloc0(size_of::<pg_sys::CustomScan>()) as *mut pg_sys::CustomScan;
        (*scan).scan.plan.type_ = NodeTag::T_CustomScan;
        (*scan).scan.plan.targetlist = tlist;
        (*scan).scan.plan.qual = quals.into_pg();
        (*scan).scan.scanrelid = (*rel).relid;
        (*scan).flags = (*best_path).flags;
        let mut exprs = PgList::<Node>::new();
        exprs.push(private.get_ptr(PRIVATE_CANDIDATE_FUNCTIONS + 2).expect("query expression"));
        (*scan).custom_exprs = exprs.into_pg();
        let mut plan_private = PgList::<Node>::new();
        for i in 0..PRIVATE_CANDIDATE_FUNCTIONS {
            plan_private.push(private.get_ptr(i).expect("custom private list"));
        }
        (*scan).custom_private = plan_private.into_pg();
        (*scan).methods = &SCAN_METHODS.0;
        scan.cast()
    }
}

#[repr(C)]
struct RadiusScanState {
    css: pg_sys::CustomScanState,
    query: *mut pg_sys::ExprState,
    radius: u32,
    indexes: [Oid; SEGMENTS],
    columns: [i32; SEGMENTS],
    /// The matches of this scan (or rescan), sorted by table position, in the query's memory.
    matches: *mut pg_sys::ItemPointerData,
    match_count: usize,
    match_capacity: usize,
    next: usize,
    probed: bool,
    /// The last fetch asked to be repeated for the same TID (non-MVCC snapshots only).
    call_again: bool,
    fetch: *mut pg_sys::IndexFetchTableData,
    /// The table's own kind of slot, which the fetch fills (the scan slot is a virtual one).
    table_slot: *mut pg_sys::TupleTableSlot,
    /// For EXPLAIN ANALYZE, summed over rescans.
    candidates: u64,
    matched: u64,
}

#[pg_guard]
unsafe extern "C-unwind" fn create_state(cscan: *mut pg_sys::CustomScan) -> *mut Node {
    unsafe {
        let state = pg_sys::palloc0(size_of::<RadiusScanState>()) as *mut RadiusScanState;
        (*state).css.ss.ps.type_ = NodeTag::T_CustomScanState;
        (*state).css.methods = &EXEC_METHODS.0;
        let private = PgList::<Node>::from_pg((*cscan).custom_private);
        (*state).radius = integer_at(&private, PRIVATE_RADIUS) as u32;
        for n in 0..SEGMENTS {
            (*state).indexes[n] = Oid::from(integer_at(&private, PRIVATE_INDEXES + n) as u32);
            (*state).columns[n] = integer_at(&private, PRIVATE_COLUMNS + n);
        }
        state.cast()
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn begin(node: *mut pg_sys::CustomScanState, estate: *mut pg_sys::EState, _eflags: i32) {
    unsafe {
        let state = node as *mut RadiusScanState;
        (*state).table_slot = pg_sys::table_slot_create((*node).ss.ss_currentRelation, &mut (*estate).es_tupleTable);
        let plan = (*node).ss.ps.plan as *mut pg_sys::CustomScan;
        let query = PgList::<pg_sys::Expr>::from_pg((*plan).custom_exprs).get_ptr(0).expect("query expression");
        (*state).query = pg_sys::ExecInitExpr(query, &mut (*node).ss.ps);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn exec(node: *mut pg_sys::CustomScanState) -> *mut pg_sys::TupleTableSlot {
    unsafe { pg_sys::ExecScan(&mut (*node).ss, Some(next_match), Some(recheck_match)) }
}

/// The next visible row among the matches, or an empty slot at the end.
#[pg_guard]
unsafe extern "C-unwind" fn next_match(ss: *mut pg_sys::ScanState) -> *mut pg_sys::TupleTableSlot {
    unsafe {
        let state = ss as *mut RadiusScanState;
        if !(*state).probed {
            probe(state);
            (*state).probed = true;
        }
        if (*state).fetch.is_null() {
            (*state).fetch = pg_sys::table_index_fetch_begin((*ss).ss_currentRelation);
        }
        let slot = (*state).table_slot;
        let snapshot = (*(*ss).ps.state).es_snapshot;
        loop {
            if !(*state).call_again {
                if (*state).next >= (*state).match_count {
                    return pg_sys::ExecClearTuple((*ss).ss_ScanTupleSlot);
                }
                (*state).next += 1;
            }
            let tid = (*state).matches.add((*state).next - 1);
            let mut all_dead = false;
            // Follows the HOT chain from the TID the index holds to the version the snapshot sees.
            let found = pg_sys::table_index_fetch_tuple(
                (*state).fetch,
                tid,
                snapshot,
                slot,
                &mut (*state).call_again,
                &mut all_dead,
            );
            if found {
                return as_scan_tuple(slot, (*ss).ss_ScanTupleSlot);
            }
        }
    }
}

/// Shows the row in `table_slot` through the virtual `scan_slot`, without copying: its values point
/// into the table page, which `table_slot` keeps pinned until the next fetch.
unsafe fn as_scan_tuple(
    table_slot: *mut pg_sys::TupleTableSlot,
    scan_slot: *mut pg_sys::TupleTableSlot,
) -> *mut pg_sys::TupleTableSlot {
    unsafe {
        pg_sys::ExecClearTuple(scan_slot);
        pg_sys::slot_getallattrs(table_slot);
        let natts = (*(*table_slot).tts_tupleDescriptor).natts as usize;
        std::ptr::copy_nonoverlapping((*table_slot).tts_values, (*scan_slot).tts_values, natts);
        std::ptr::copy_nonoverlapping((*table_slot).tts_isnull, (*scan_slot).tts_isnull, natts);
        pg_sys::ExecStoreVirtualTuple(scan_slot);
        // ctid and tableoid (UPDATE, DELETE, FOR UPDATE) are read from the slot itself.
        (*scan_slot).tts_tid = (*table_slot).tts_tid;
        (*scan_slot).tts_tableOid = (*table_slot).tts_tableOid;
        scan_slot
    }
}

/// EvalPlanQual: the qual, which holds the exact test, is checked again by ExecScan.
#[pg_guard]
unsafe extern "C-unwind" fn recheck_match(_ss: *mut pg_sys::ScanState, _slot: *mut pg_sys::TupleTableSlot) -> bool {
    true
}

/// Probes the four B-trees for the query fingerprint and keeps the TIDs of the index tuples within
/// the radius, sorted by table position and without duplicates (a row can be found in several).
unsafe fn probe(state: *mut RadiusScanState) {
    unsafe {
        (*state).match_count = 0;
        (*state).next = 0;
        (*state).call_again = false;
        let ps = &mut (*state).css.ss.ps;
        let mut isnull = false;
        let query = pg_sys::ExecEvalExprSwitchContext((*state).query, ps.ps_ExprContext, &mut isnull);
        if isnull {
            return; // NULL is within no radius
        }
        let query = query.value() as u64;
        let heap = (*state).css.ss.ss_currentRelation;
        let snapshot = (*ps.state).es_snapshot;
        let mut found: Vec<pg_sys::ItemPointerData> = Vec::new();
        for n in 0..SEGMENTS {
            let index = SegmentIndex { oid: (*state).indexes[n], column_in_index: Some((*state).columns[n]) };
            let mut scan = SegmentScan::begin(heap, index, n as i32, snapshot, query, (*state).radius);
            while let Some(tid) = scan.next() {
                found.push(*tid);
            }
            (*state).candidates += scan.checked;
        }
        found.sort_unstable_by_key(tid_order);
        found.dedup_by_key(|tid| tid_order(tid));
        (*state).matched += found.len() as u64;

        if found.len() > (*state).match_capacity {
            if !(*state).matches.is_null() {
                pg_sys::pfree((*state).matches.cast());
            }
            (*state).matches = pg_sys::MemoryContextAlloc(
                (*ps.state).es_query_cxt,
                found.len() * size_of::<pg_sys::ItemPointerData>(),
            )
            .cast();
            (*state).match_capacity = found.len();
        }
        if !found.is_empty() {
            std::ptr::copy_nonoverlapping(found.as_ptr(), (*state).matches, found.len());
        }
        (*state).match_count = found.len();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn rescan(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let state = node as *mut RadiusScanState;
        // Parameters in the query expression may have changed: probe again on the next fetch.
        (*state).probed = false;
        (*state).match_count = 0;
        (*state).next = 0;
        (*state).call_again = false;
        if !(*state).fetch.is_null() {
            pg_sys::table_index_fetch_reset((*state).fetch);
        }
        pg_sys::ExecScanReScan(&mut (*node).ss);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn end(node: *mut pg_sys::CustomScanState) {
    unsafe {
        let state = node as *mut RadiusScanState;
        if !(*state).fetch.is_null() {
            pg_sys::table_index_fetch_end((*state).fetch);
            (*state).fetch = null_mut();
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn explain(
    node: *mut pg_sys::CustomScanState,
    _ancestors: *mut pg_sys::List,
    es: *mut pg_sys::ExplainState,
) {
    unsafe {
        let state = node as *mut RadiusScanState;
        pg_sys::ExplainPropertyInteger(c"Radius".as_ptr(), null_mut(), i64::from((*state).radius), es);
        let names: Vec<String> = (*state).indexes.iter().map(|&oid| crate::pg::names::rel_name(oid)).collect();
        let names = std::ffi::CString::new(names.join(", ")).expect("relation names have no NUL");
        pg_sys::ExplainPropertyText(c"Segment Indexes".as_ptr(), names.as_ptr(), es);
        if (*es).analyze {
            pg_sys::ExplainPropertyInteger(
                c"Index Tuples Checked".as_ptr(),
                null_mut(),
                (*state).candidates as i64,
                es,
            );
            pg_sys::ExplainPropertyInteger(c"Rows Within Radius".as_ptr(), null_mut(), (*state).matched as i64, es);
        }
    }
}
