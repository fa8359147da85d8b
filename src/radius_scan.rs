//! The radius scan: an access path of our own for `fp <~> q <= k` that checks the distance inside
//! the index, so the table is read only for rows that are really within `k`.
//!
//! With four covering B-trees `(simhash_segment(fp, n)) INCLUDE (fp)`, the BitmapOr of the planner
//! rewrite still reads the table block of every candidate (every row that shares a probed segment
//! value), though almost none is a match: at k = 9 over 10 million rows, some 80,000 candidates in
//! 40,000 blocks for a handful of matches. This custom scan probes the same B-trees itself, reads the
//! fingerprint from each index tuple (as an index-only scan would), and fetches from the table only
//! the rows within `k`, sorted by block, where the whole WHERE clause is checked as usual.
//!
//! The planner is offered it (set_rel_pathlist_hook) for a scan of a table whose restrictions hold
//! the exact test the rewrite emits, `(fp <~> q)::integer <= k` with `k` from 0 to 11 and `q` free of
//! the table's columns, when all four segment B-trees of `fp` include `fp`; it competes on cost with
//! the BitmapOr and the sequential scan. `simhash.enable_radius_scan = off` withdraws it.

use std::ffi::CStr;
use std::mem::size_of;
use std::ptr::null_mut;

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

use crate::planner_support::{
    call_of, const_integer, covering_segment_btrees, strip_relabel, ExtensionObjects, SegmentIndex,
};
use crate::segment_scan::SegmentScan;

const NAME: &CStr = c"SimHash Radius Scan";

/// The callback tables PostgreSQL keeps pointers to; they hold only a name and functions.
struct Methods<T>(T);
// SAFETY: immutable after initialisation, and backends are single-threaded.
unsafe impl<T> Sync for Methods<T> {}

static PATH_METHODS: Methods<pg_sys::CustomPathMethods> = Methods(pg_sys::CustomPathMethods {
    CustomName: NAME.as_ptr(),
    PlanCustomPath: Some(plan_path),
    ReparameterizeCustomPathByChild: Some(reparameterize_by_child),
});

static SCAN_METHODS: Methods<pg_sys::CustomScanMethods> =
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

static mut PREVIOUS_HOOK: pg_sys::set_rel_pathlist_hook_type = None;

/// Installs the planner hook; called once per backend from `_PG_init`.
pub(crate) fn init() {
    unsafe {
        PREVIOUS_HOOK = pg_sys::set_rel_pathlist_hook;
        pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
        // So that a plan containing the scan can be read back (parallel workers, plan copies).
        pg_sys::RegisterCustomScanMethods(&SCAN_METHODS.0);
    }
}

// ------------------------------------------------------------------------------------------------
// Planning
// ------------------------------------------------------------------------------------------------

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    unsafe {
        if let Some(previous) = PREVIOUS_HOOK {
            previous(root, rel, rti, rte);
        }
        if crate::ENABLE_RADIUS_SCAN.get() {
            offer_path(root, rel, rte);
        }
    }
}

/// The custom private list of the path and the plan: the radius, then per segment the index oid and
/// the fingerprint's attribute number in its tuples, then (path only) the functions whose calls mark
/// the rewrite's candidate tests.
const PRIVATE_RADIUS: usize = 0;
const PRIVATE_INDEXES: usize = 1;
const PRIVATE_COLUMNS: usize = 5;
const PRIVATE_CANDIDATE_FUNCTIONS: usize = 9;

/// Adds the radius scan to `rel`'s paths if one of its restrictions is a radius test it can answer.
unsafe fn offer_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    unsafe {
        let plain_table = (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
            && !(*rte).inh
            && [pg_sys::RELKIND_RELATION, pg_sys::RELKIND_MATVIEW].contains(&((*rte).relkind as u8))
            && matches!(
                (*rel).reloptkind,
                pg_sys::RelOptKind::RELOPT_BASEREL | pg_sys::RelOptKind::RELOPT_OTHER_MEMBER_REL
            );
        if !plain_table {
            return;
        }
        // A restriction with a fixed query value: one plain path.
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).baserestrictinfo).iter_ptr() {
            if let Some(test) = radius_test_of(root, (*rinfo).clause.cast(), (*rel).relid) {
                if test.outer.is_null() && add_radius_path(root, rel, rte, &test, null_mut()) {
                    break;
                }
            }
        }
        // A join clause `fp <~> other.fp <= k`: a path parameterized by the other side, for the inner
        // side of a nested loop that rescans it once per outer row.
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).joininfo).iter_ptr() {
            let Some(test) = radius_test_of(root, (*rinfo).clause.cast(), (*rel).relid) else { continue };
            if test.outer.is_null() {
                continue;
            }
            let param_info = pg_sys::get_baserel_parampathinfo(root, rel, test.outer);
            // Only where the clause is enforced by this scan (it is movable to it).
            if !param_info.is_null() && pg_sys::list_member_ptr((*param_info).ppi_clauses, rinfo.cast()) {
                add_radius_path(root, rel, rte, &test, param_info);
            }
        }
    }
}

/// Adds the path for `test` if the column has four covering segment B-trees.
unsafe fn add_radius_path(
    _root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rte: *mut pg_sys::RangeTblEntry,
    test: &RadiusTest,
    param_info: *mut pg_sys::ParamPathInfo,
) -> bool {
    unsafe {
        // Checked only here, for a table with a radius test: the hook runs for every table scan.
        if needs_other_system_columns(rel) {
            return false;
        }
        let Some(indexes) = covering_segment_btrees(&test.ours, (*rte).relid, (*test.column).varattno) else {
            return false;
        };
        let rows = if param_info.is_null() { (*rel).rows } else { (*param_info).ppi_rows };
        let (startup_cost, total_cost) = cost(rel, indexes.map(|s| s.oid), test.radius, rows);

        let path = pg_sys::palloc0(size_of::<pg_sys::CustomPath>()) as *mut pg_sys::CustomPath;
        (*path).path.type_ = NodeTag::T_CustomPath;
        (*path).path.pathtype = NodeTag::T_CustomScan;
        (*path).path.parent = rel;
        (*path).path.pathtarget = (*rel).reltarget;
        (*path).path.param_info = param_info;
        (*path).path.rows = rows;
        (*path).path.startup_cost = startup_cost;
        (*path).path.total_cost = total_cost;
        (*path).flags = pg_sys::CUSTOMPATH_SUPPORT_PROJECTION;
        let mut private = PgList::<Node>::new();
        private.push(integer(test.radius as i32));
        for index in &indexes {
            private.push(integer(index.oid.to_u32() as i32));
        }
        for index in &indexes {
            private.push(integer(index.column_in_index.expect("covering")));
        }
        private.push(integer(test.ours.segment.to_u32() as i32));
        private.push(integer(test.ours.bands.to_u32() as i32));
        private.push(pg_sys::copyObjectImpl(test.query.cast()).cast());
        (*path).custom_private = private.into_pg();
        (*path).methods = &PATH_METHODS.0;
        drop_dominated_bitmap_paths(rel, &indexes.map(|s| s.oid), param_info);
        pg_sys::add_path(rel, path.cast());
        true
    }
}

/// Removes from `rel`'s paths the bitmap heap scans with the same parameterization that probe any
/// of `indexes`. They descend the same B-trees as the radius scan and then read a table page for
/// every candidate, so the radius scan does strictly less work; but with a query fingerprint that
/// is not a constant (a join's outer row, a generic plan's parameter) PostgreSQL 15 costs the probe
/// array `= ANY(simhash_segment_probes(...))` as 10 values instead of 17 or 137, and would prefer
/// them at k >= 8. (The set_rel_pathlist hook may delete paths, says PostgreSQL.)
unsafe fn drop_dominated_bitmap_paths(
    rel: *mut pg_sys::RelOptInfo,
    indexes: &[Oid; 4],
    param_info: *mut pg_sys::ParamPathInfo,
) {
    unsafe {
        let required_outer =
            |info: *mut pg_sys::ParamPathInfo| if info.is_null() { null_mut() } else { (*info).ppi_req_outer };
        let ours = required_outer(param_info);
        let keep = |paths: *mut pg_sys::List| {
            let mut kept = PgList::<pg_sys::Path>::new();
            for path in PgList::<pg_sys::Path>::from_pg(paths).iter_ptr() {
                let dominated = (*path).type_ == NodeTag::T_BitmapHeapPath
                    && pg_sys::bms_equal(required_outer((*path).param_info), ours)
                    && probes_indexes((*(path as *mut pg_sys::BitmapHeapPath)).bitmapqual, indexes);
                if !dominated {
                    kept.push(path);
                }
            }
            kept.into_pg()
        };
        (*rel).pathlist = keep((*rel).pathlist);
        // Parallel bitmap scans too (partial paths are never parameterized): two processes do not
        // make up for reading a table page per candidate.
        if ours.is_null() {
            (*rel).partial_pathlist = keep((*rel).partial_pathlist);
        }
    }
}

/// Whether a bitmap tree (index paths under BitmapAnd/BitmapOr) scans one of `indexes`.
unsafe fn probes_indexes(path: *mut pg_sys::Path, indexes: &[Oid; 4]) -> bool {
    unsafe {
        let any = |quals: *mut pg_sys::List| {
            PgList::<pg_sys::Path>::from_pg(quals).iter_ptr().any(|p| probes_indexes(p, indexes))
        };
        match (*path).type_ {
            NodeTag::T_IndexPath => indexes.contains(&(*(*(path as *mut pg_sys::IndexPath)).indexinfo).indexoid),
            NodeTag::T_BitmapAndPath => any((*(path as *mut pg_sys::BitmapAndPath)).bitmapquals),
            NodeTag::T_BitmapOrPath => any((*(path as *mut pg_sys::BitmapOrPath)).bitmapquals),
            _ => false,
        }
    }
}

/// Whether the query reads a system column other than `ctid` and `tableoid` of `rel` (say `xmin`):
/// PostgreSQL 15 gives a custom scan a virtual tuple slot, which holds only those two.
unsafe fn needs_other_system_columns(rel: *mut pg_sys::RelOptInfo) -> bool {
    unsafe {
        let mut attnos: *mut pg_sys::Bitmapset = null_mut();
        pg_sys::pull_varattnos((*(*rel).reltarget).exprs.cast(), (*rel).relid, &mut attnos);
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).baserestrictinfo).iter_ptr() {
            pg_sys::pull_varattnos((*rinfo).clause.cast(), (*rel).relid, &mut attnos);
        }
        let mut member = -1;
        loop {
            member = pg_sys::bms_next_member(attnos, member);
            if member < 0 {
                return false;
            }
            let attno = member + pg_sys::FirstLowInvalidHeapAttributeNumber;
            if attno < 0 && attno != pg_sys::SelfItemPointerAttributeNumber && attno != pg_sys::TableOidAttributeNumber
            {
                return true;
            }
        }
    }
}

/// A restriction `(fp <~> q)::integer <= k` as the rewrite emits it (an implicit cast, so a user's
/// own `::integer` is left to the other scans), with `fp` a column of relation `relid`.
struct RadiusTest {
    ours: ExtensionObjects,
    column: *mut pg_sys::Var,
    query: *mut Node,
    radius: u32,
    /// The other relations whose columns the query value reads (NULL: none, a fixed value).
    outer: *mut pg_sys::Bitmapset,
}

unsafe fn radius_test_of(
    root: *mut pg_sys::PlannerInfo,
    clause: *mut Node,
    relid: pg_sys::Index,
) -> Option<RadiusTest> {
    unsafe {
        if (*clause).type_ != NodeTag::T_OpExpr || (*(clause as *mut pg_sys::OpExpr)).opno != Oid::from(INT4_LE) {
            return None;
        }
        let args = PgList::<Node>::from_pg((*(clause as *mut pg_sys::OpExpr)).args);
        let (distance, bound) = (args.get_ptr(0)?, args.get_ptr(1)?);
        if (*distance).type_ != NodeTag::T_RelabelType
            || (*(distance as *mut pg_sys::RelabelType)).relabelformat != pg_sys::CoercionForm::COERCE_IMPLICIT_CAST
        {
            return None;
        }
        let radius = u32::try_from(const_integer(bound)?).ok()?;
        simhash_core::probes::segment_radius(radius)?;
        let (funcid, hamming_args) = call_of((*(distance as *mut pg_sys::RelabelType)).arg.cast())?;
        let ours = ExtensionObjects::lookup(pg_sys::get_func_namespace(funcid))?;
        if funcid != ours.hamming {
            return None;
        }
        let hamming_args = PgList::<Node>::from_pg(hamming_args);
        let (a, b) = (hamming_args.get_ptr(0)?, hamming_args.get_ptr(1)?);
        for (column, query) in [(a, b), (b, a)] {
            let var = strip_relabel(column);
            let is_our_column = (*var).type_ == NodeTag::T_Var
                && (*(var as *mut pg_sys::Var)).varno as pg_sys::Index == relid
                && (*(var as *mut pg_sys::Var)).varlevelsup == 0
                && (*(var as *mut pg_sys::Var)).varattno > 0;
            // The query value must be fixed for the whole scan: no column of this table (columns of
            // other tables make a parameterized path; outer-query references are parameters, and a
            // change of them rescans).
            if !is_our_column || pg_sys::contain_volatile_functions(query) {
                continue;
            }
            let outer = pg_sys::pull_varnos(root, query);
            if !pg_sys::bms_is_member(relid as i32, outer) {
                let outer = if pg_sys::bms_is_empty(outer) { null_mut() } else { outer };
                return Some(RadiusTest { ours, column: var.cast(), query, radius, outer });
            }
        }
        None
    }
}

/// int4 `<=` (pg_operator.dat names no symbol for it).
const INT4_LE: u32 = 523;

/// Startup and total cost. Probing (all of it before the first row): per probe one descent of the
/// B-tree, then the candidates' index tuples, as many as rows share the probed segment values
/// (uniform segments assumed), on as many leaf pages as they fill, read at random (the model of
/// PostgreSQL's own index scans, btcostestimate). Each match then costs a random table page.
/// The matches are estimated for uniform fingerprints, at least one: the planner's own estimate of
/// the exact test is a default third of the candidates, which would price this scan like the
/// BitmapOr it exists to beat.
unsafe fn cost(rel: *mut pg_sys::RelOptInfo, indexes: [Oid; 4], radius: u32, rows: f64) -> (f64, f64) {
    unsafe {
        let probes = simhash_core::probes::probes_per_segment(radius / 4) as f64;
        let (cpu_operator, cpu_index_tuple, cpu_tuple, random_page) =
            (pg_sys::cpu_operator_cost, pg_sys::cpu_index_tuple_cost, pg_sys::cpu_tuple_cost, pg_sys::random_page_cost);
        let mut startup = 0.0;
        for info in PgList::<pg_sys::IndexOptInfo>::from_pg((*rel).indexlist).iter_ptr() {
            if !indexes.contains(&(*info).indexoid) {
                continue;
            }
            let tuples = (*info).tuples.max(1.0);
            let pages = f64::from((*info).pages).max(1.0);
            let candidates = tuples * probes / 65536.0;
            let descent = (tuples.log2().ceil() + (f64::from((*info).tree_height.max(0)) + 1.0) * 50.0) * cpu_operator;
            let leaf_pages = (candidates * pages / tuples).ceil().max(1.0);
            startup += probes * descent + leaf_pages * random_page + candidates * (cpu_index_tuple + cpu_operator);
        }
        let matches = ((*rel).tuples * simhash_core::probes::uniform_share_within(radius)).clamp(1.0, rows.max(1.0));
        startup += (*rel).baserestrictcost.startup;
        let per_match = random_page + cpu_tuple + (*rel).baserestrictcost.per_tuple;
        (startup, startup + matches * per_match)
    }
}

unsafe fn integer(value: i32) -> *mut Node {
    unsafe { pg_sys::makeInteger(value).cast() }
}

unsafe fn integer_at(list: &PgList<Node>, i: usize) -> i32 {
    unsafe { (*(list.get_ptr(i).expect("custom private list") as *mut pg_sys::Integer)).ival }
}

#[pg_guard]
unsafe extern "C-unwind" fn plan_path(
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

/// For a partitionwise join: the path, parameterized by the outer side's (topmost) parent, is
/// copied for a child join; its query expression must then read the outer child's columns.
#[pg_guard]
unsafe extern "C-unwind" fn reparameterize_by_child(
    root: *mut pg_sys::PlannerInfo,
    custom_private: *mut pg_sys::List,
    child_rel: *mut pg_sys::RelOptInfo,
) -> *mut pg_sys::List {
    unsafe {
        let mut private = PgList::<Node>::new();
        for (i, node) in PgList::<Node>::from_pg(custom_private).iter_ptr().enumerate() {
            private.push(if i == PRIVATE_CANDIDATE_FUNCTIONS + 2 {
                pg_sys::adjust_appendrel_attrs_multilevel(
                    root,
                    node,
                    (*child_rel).relids,
                    (*child_rel).top_parent_relids,
                )
            } else {
                node
            });
        }
        private.into_pg()
    }
}

/// An OR of `simhash_segment(...) = ...` / `= ANY(...)`, or `simhash_bands(...) && ...`.
unsafe fn is_candidate_test(clause: *mut Node, functions: &[Oid; 2]) -> bool {
    unsafe {
        let starts_with_call = |node: *mut Node| {
            let args = match (*node).type_ {
                NodeTag::T_OpExpr => (*(node as *mut pg_sys::OpExpr)).args,
                NodeTag::T_ScalarArrayOpExpr => (*(node as *mut pg_sys::ScalarArrayOpExpr)).args,
                _ => return false,
            };
            let first = PgList::<Node>::from_pg(args).get_ptr(0);
            first.is_some_and(|f| {
                (*f).type_ == NodeTag::T_FuncExpr && functions.contains(&(*(f as *mut pg_sys::FuncExpr)).funcid)
            })
        };
        if (*clause).type_ == NodeTag::T_BoolExpr {
            let bool_expr = clause as *mut pg_sys::BoolExpr;
            (*bool_expr).boolop == pg_sys::BoolExprType::OR_EXPR
                && PgList::<Node>::from_pg((*bool_expr).args).iter_ptr().all(starts_with_call)
        } else {
            starts_with_call(clause)
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Execution
// ------------------------------------------------------------------------------------------------

#[repr(C)]
struct RadiusScanState {
    css: pg_sys::CustomScanState,
    query: *mut pg_sys::ExprState,
    radius: u32,
    indexes: [Oid; 4],
    columns: [i32; 4],
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
        for n in 0..4 {
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
        for n in 0..4 {
            let index = SegmentIndex { oid: (*state).indexes[n], column_in_index: Some((*state).columns[n]) };
            let mut scan = SegmentScan::begin(heap, index, n as i32, snapshot, query, (*state).radius);
            while let Some(tid) = scan.next() {
                found.push(*tid);
            }
            (*state).candidates += scan.checked;
            scan.end();
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

/// Table order: block, then line pointer.
fn tid_order(tid: &pg_sys::ItemPointerData) -> u64 {
    let block = (u64::from(tid.ip_blkid.bi_hi) << 16) | u64::from(tid.ip_blkid.bi_lo);
    (block << 16) | u64::from(tid.ip_posid)
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
        let names: Vec<String> = (*state)
            .indexes
            .iter()
            .map(|&oid| {
                let name = pg_sys::get_rel_name(oid);
                if name.is_null() {
                    oid.to_u32().to_string()
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                }
            })
            .collect();
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
