//! The radius scan, planning half: an access path of our own for `fp <~> q <= k` that checks the
//! distance inside the index, so the table is read only for rows that are really within `k`.
//!
//! With four covering B-trees `(simhash_segment(fp, n)) INCLUDE (fp)`, the BitmapOr of the planner
//! rewrite still reads the table block of every candidate (every row that shares a probed segment
//! value), though almost none is a match: at k = 9 the candidates are about 4 x 137 / 65,536 of
//! the table, spread over as many blocks, for a handful of matches. This custom scan probes the
//! same B-trees itself, reads the fingerprint from each index tuple (as an index-only scan would),
//! and fetches from the table only the rows within `k`, sorted by block, where the whole WHERE
//! clause is checked as usual.
//!
//! The planner is offered it (set_rel_pathlist_hook) for a scan of a table whose restrictions hold
//! the exact test the rewrite emits, `(fp <~> q)::integer <= k` with `k` from 0 to 11 and `q` free of
//! the table's columns, when all four segment B-trees of `fp` include `fp`; it competes on cost with
//! the BitmapOr and the sequential scan. `simhash.enable_radius_scan = off` withdraws it.

//!
//! The executor half, from the chosen path's plan on, is `radius_exec`.

use std::ptr::null_mut;
use std::sync::OnceLock;

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;
use simhash_core::cost::{expected_matches, segment_probe_cost, CostUnits, IndexSize};

use super::catalog::{ColumnIndexes, ExtensionObjects, SEGMENTS};
use super::radius_exec::{plan_path, Methods, NAME, PRIVATE_CANDIDATE_FUNCTIONS, SCAN_METHODS};
use super::shape::match_exact_test;
use crate::pg::nodes::{integer, strip_relabel};

static PATH_METHODS: Methods<pg_sys::CustomPathMethods> = Methods(pg_sys::CustomPathMethods {
    CustomName: NAME.as_ptr(),
    PlanCustomPath: Some(plan_path),
    ReparameterizeCustomPathByChild: Some(reparameterize_by_child),
});

/// The hook that was installed before ours, called first.
static PREVIOUS_HOOK: OnceLock<pg_sys::set_rel_pathlist_hook_type> = OnceLock::new();

/// Installs the planner hook; called once per backend from `_PG_init`.
pub(crate) fn init() {
    unsafe {
        if PREVIOUS_HOOK.set(pg_sys::set_rel_pathlist_hook).is_ok() {
            pg_sys::set_rel_pathlist_hook = Some(set_rel_pathlist);
            // So that a plan containing the scan can be read back (parallel workers, plan copies).
            pg_sys::RegisterCustomScanMethods(&SCAN_METHODS.0);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn set_rel_pathlist(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rti: pg_sys::Index,
    rte: *mut pg_sys::RangeTblEntry,
) {
    unsafe {
        if let Some(Some(previous)) = PREVIOUS_HOOK.get() {
            previous(root, rel, rti, rte);
        }
        if !is_plain_table(rel, rte) {
            return;
        }
        if super::settings::ENABLE_RADIUS_SCAN.get() {
            offer_path(root, rel, rte);
        }
        if super::settings::ENABLE_REWRITE.get() {
            super::codes::offer_pgvector_radius_paths(root, rel);
            super::codes::offer_pgvector_join_paths(root, rel);
            super::order_path::offer(root, rel);
            super::codes::offer_order_paths(root, rel);
        }
    }
}

/// Whether `rel` is a scan of a table or materialized view of its own (not of an inheritance parent).
unsafe fn is_plain_table(rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) -> bool {
    unsafe {
        (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
            && !(*rte).inh
            && [pg_sys::RELKIND_RELATION, pg_sys::RELKIND_MATVIEW].contains(&((*rte).relkind as u8))
            && matches!(
                (*rel).reloptkind,
                pg_sys::RelOptKind::RELOPT_BASEREL | pg_sys::RelOptKind::RELOPT_OTHER_MEMBER_REL
            )
    }
}

/// Adds the radius scan to `rel`'s paths if one of its restrictions is a radius test it can answer.
unsafe fn offer_path(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo, rte: *mut pg_sys::RangeTblEntry) {
    unsafe {
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
            if let Some(param_info) = join_param_info(root, rel, rinfo, test.outer) {
                add_radius_path(root, rel, rte, &test, param_info);
            }
        }
    }
}

/// The parameterization of a scan of `rel` that takes the join clause `rinfo` with the values of
/// the tables `outer` (those the clause's other side reads), or `None` where no scan may take it:
/// only a clause the planner itself would push into the scan (its own index paths:
/// `match_join_clauses_to_index`), parameterized by tables alone, and enforced by that scan. On
/// PostgreSQL 16 and later that leaves out both versions of the clause of an outer join that
/// commutes with another (once, `a LEFT JOIN b ... LEFT JOIN docs d ON d.fp <~> b.fp <= 3` crashed
/// the backend on 18, its radius scan parameterized by one of them).
///
/// # Safety
///
/// In `set_rel_pathlist_hook`, `rinfo` one of `rel`'s join clauses.
pub(super) unsafe fn join_param_info(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    rinfo: *mut pg_sys::RestrictInfo,
    outer: *mut pg_sys::Bitmapset,
) -> Option<*mut pg_sys::ParamPathInfo> {
    unsafe {
        if !pg_sys::join_clause_is_movable_to(rinfo, rel)
            || crate::pg::compat::bms_is_empty(outer)
            || !pg_sys::bms_is_subset(outer, (*root).all_baserels)
        {
            return None;
        }
        let param_info = pg_sys::get_baserel_parampathinfo(root, rel, outer);
        (!param_info.is_null() && pg_sys::list_member_ptr((*param_info).ppi_clauses, rinfo.cast()))
            .then_some(param_info)
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
        let indexes = ColumnIndexes::of((*rte).relid, (*test.column).varattno, &test.ours);
        let Some(indexes) = indexes.and_then(|i| i.covering_segment_btrees()) else {
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
    indexes: &[Oid; SEGMENTS],
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
unsafe fn probes_indexes(path: *mut pg_sys::Path, indexes: &[Oid; SEGMENTS]) -> bool {
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

/// A restriction `(fp <~> q)::integer <= k` as the rewrite emits it (`shape::match_exact_test`),
/// with `fp` a column of relation `relid`.
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
        let (funcid, a, b, radius) = match_exact_test(clause)?;
        let ours = ExtensionObjects::lookup(pg_sys::get_func_namespace(funcid))?;
        if funcid != ours.hamming {
            return None;
        }
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
                let outer = if crate::pg::compat::bms_is_empty(outer) { null_mut() } else { outer };
                return Some(RadiusTest { ours, column: var.cast(), query, radius, outer });
            }
        }
        None
    }
}

/// Startup and total cost: probing the four B-trees, all of it before the first row
/// (`simhash_core::cost::segment_probe_cost`), then a random table page per expected match.
unsafe fn cost(rel: *mut pg_sys::RelOptInfo, indexes: [Oid; SEGMENTS], radius: u32, rows: f64) -> (f64, f64) {
    unsafe {
        let units = CostUnits {
            cpu_operator: pg_sys::cpu_operator_cost,
            cpu_index_tuple: pg_sys::cpu_index_tuple_cost,
            cpu_tuple: pg_sys::cpu_tuple_cost,
            random_page: pg_sys::random_page_cost,
        };
        let mut startup = 0.0;
        for info in PgList::<pg_sys::IndexOptInfo>::from_pg((*rel).indexlist).iter_ptr() {
            if indexes.contains(&(*info).indexoid) {
                let size = IndexSize {
                    tuples: (*info).tuples,
                    pages: f64::from((*info).pages),
                    tree_height: (*info).tree_height,
                };
                startup += segment_probe_cost(size, radius, units);
            }
        }
        let matches = expected_matches((*rel).tuples, radius, rows);
        startup += (*rel).baserestrictcost.startup;
        let per_match = units.random_page + units.cpu_tuple + (*rel).baserestrictcost.per_tuple;
        (startup, startup + matches * per_match)
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
                crate::pg::compat::adjust_to_child(root, node, child_rel)
            } else {
                node
            });
        }
        private.into_pg()
    }
}
