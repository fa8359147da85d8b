//! `ORDER BY fp <~> q` served by a `simhash` index, as `ORDER BY fp <-> q` is.
//!
//! `<~>` returns the domain `simhash_distance`. PostgreSQL sorts a domain as its base type and so
//! wraps the sort key in a RelabelType to `integer`, which its matching of an `ORDER BY` against an
//! index's ordering operators (`match_clause_to_ordering_op`) does not look through: the query
//! sorted the whole table. `fp <~> q` and `fp <-> q` (the index's ordering operator) are the same
//! distance, so for each `simhash` index on the column the planner hook offers the index path the
//! planner builds for `ORDER BY fp <-> q`, with the query's own sort keys: no Sort above it, and
//! EXPLAIN shows `Order By: (fp <-> q)`. The path carries the radius tests an index path on the
//! same index already answers (the planner's own), so `WHERE fp <~> q <= k ORDER BY fp <~> q` is
//! served as with `<->`.

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::PgList;

use super::catalog::ExtensionObjects;
use crate::pg::nodes::strip_relabel;

/// The strategy of the ordering operator `<->` in the `simhash` operator class.
const ORDER_BY_STRATEGY: i16 = 2;

/// Adds, for each `simhash` index of `rel` that can give the query's order, an ordered index path.
///
/// # Safety
///
/// Called from `set_rel_pathlist_hook` with its arguments, for a plain table.
pub(super) unsafe fn offer(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo) {
    unsafe {
        let pathkeys = PgList::<pg_sys::PathKey>::from_pg((*root).query_pathkeys);
        if pathkeys.is_empty() {
            return;
        }
        // Only where some sort key is a `<~>` of ours (the planner serves `<->` itself).
        let Some(ours) = pathkeys.iter_ptr().find_map(|pathkey| our_hamming(pathkey, rel)) else {
            return;
        };
        let Some(own) = ours.own_index else { return };
        for index in PgList::<pg_sys::IndexOptInfo>::from_pg((*rel).indexlist).iter_ptr() {
            // (a partial index only where the query implies its predicate, as the planner's own paths)
            let partial_unusable = !(*index).indpred.is_null() && !(*index).predOK;
            if (*index).relam != own.access_method
                || !(*index).amcanorderbyop
                || (*index).nkeycolumns < 1
                || partial_unusable
            {
                continue;
            }
            let (opfamily, input_type) = (*(*index).opfamily, *(*index).opcintype);
            let ordering = pg_sys::get_opfamily_member(opfamily, input_type, input_type, ORDER_BY_STRATEGY);
            if ordering == pg_sys::InvalidOid {
                continue;
            }
            let sort_family = pg_sys::get_op_opfamily_sortfamily(ordering, opfamily);
            let mut orderbys = PgList::<Node>::new();
            let mut columns: *mut pg_sys::List = std::ptr::null_mut();
            for pathkey in pathkeys.iter_ptr() {
                let Some(orderby) = ordering_by(root, rel, index, pathkey, &ours, ordering, sort_family) else {
                    break;
                };
                orderbys.push(orderby);
                columns = pg_sys::lappend_int(columns, 0);
            }
            if orderbys.len() != pathkeys.len() {
                continue;
            }
            add_ordered_path(root, rel, index, orderbys.into_pg(), columns);
        }
    }
}

/// Adds to `rel` the plain index path on `index` ordered by `orderbys` (one per query sort key,
/// `columns` their index columns), with the query's own sort keys and the radius tests the
/// planner's paths on that index answer.
///
/// # Safety
///
/// Called from `set_rel_pathlist_hook`; `index` is one of `rel`'s.
pub(super) unsafe fn add_ordered_path(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    index: *mut pg_sys::IndexOptInfo,
    orderbys: *mut pg_sys::List,
    columns: *mut pg_sys::List,
) {
    unsafe {
        let path = pg_sys::create_index_path(
            root,
            index,
            answered_clauses(rel, index),
            orderbys,
            columns,
            (*root).query_pathkeys,
            pg_sys::ScanDirection::ForwardScanDirection,
            false,
            std::ptr::null_mut(),
            1.0,
            false,
        );
        pg_sys::add_path(rel, path.cast());
    }
}

/// The extension's objects, if a member of `pathkey`'s class is a `<~>` of ours.
unsafe fn our_hamming(pathkey: *mut pg_sys::PathKey, rel: *mut pg_sys::RelOptInfo) -> Option<ExtensionObjects> {
    unsafe {
        let distances = members(pathkey, rel).filter(|&op| (*op).opresulttype != pg_sys::INT4OID);
        for op in distances {
            let function = pg_sys::get_opcode((*op).opno);
            if let Some(ours) = ExtensionObjects::lookup(pg_sys::get_func_namespace(function)) {
                if function == ours.hamming {
                    return Some(ours);
                }
            }
        }
        None
    }
}

/// The operator calls among the members of `pathkey`'s class that `rel` can use (under any
/// relabelling): for a partition, the members translated to it too.
unsafe fn members(
    pathkey: *mut pg_sys::PathKey,
    rel: *mut pg_sys::RelOptInfo,
) -> impl Iterator<Item = *mut pg_sys::OpExpr> {
    unsafe {
        crate::pg::compat::eclass_members((*pathkey).pk_eclass, (*rel).relids)
            .into_iter()
            .map(|member| strip_relabel((*member).em_expr.cast()))
            .filter(|&expr| (*expr).type_ == NodeTag::T_OpExpr)
            .map(|expr| expr as *mut pg_sys::OpExpr)
            .collect::<Vec<_>>()
            .into_iter()
    }
}

/// `index_column <-> q` for a sort key `fp <~> q` (or `q <~> fp`) ascending, with `fp` the index's
/// column and `q` fixed for the scan; `None` for any other sort key.
unsafe fn ordering_by(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    index: *mut pg_sys::IndexOptInfo,
    pathkey: *mut pg_sys::PathKey,
    ours: &ExtensionObjects,
    ordering: Oid,
    sort_family: Oid,
) -> Option<*mut Node> {
    unsafe {
        if !crate::pg::compat::pathkey_is_ascending(pathkey)
            || (*pathkey).pk_nulls_first
            || (*pathkey).pk_opfamily != sort_family
            || (*(*pathkey).pk_eclass).ec_has_volatile
        {
            return None;
        }
        // (a partition's ordered path takes the member translated to it, not its parent's)
        let ops = members(pathkey, rel).filter(|&op| pg_sys::get_opcode((*op).opno) == ours.hamming);
        let operands = ops.filter_map(|op| {
            let args = PgList::<Node>::from_pg((*op).args);
            Some((args.get_ptr(0)?, args.get_ptr(1)?))
        });
        for (column, query) in operands.flat_map(|(a, b)| [(a, b), (b, a)]) {
            let fixed = !pg_sys::contain_volatile_functions(query)
                && crate::pg::compat::bms_is_empty(pg_sys::pull_varnos(root, query));
            if fixed && pg_sys::match_index_to_operand(column, 0, index) {
                return Some(
                    pg_sys::make_opclause(
                        ordering,
                        pg_sys::INT4OID,
                        false,
                        pg_sys::copyObjectImpl(column.cast()).cast(),
                        pg_sys::copyObjectImpl(query.cast()).cast(),
                        pg_sys::InvalidOid,
                        pg_sys::InvalidOid,
                    )
                    .cast(),
                );
            }
        }
        None
    }
}

/// The clauses an index path of the planner's on `index` answers (a radius test `<@`), the most of
/// any such path of `rel`, plain or under a bitmap scan: the new path answers them too.
unsafe fn answered_clauses(rel: *mut pg_sys::RelOptInfo, index: *mut pg_sys::IndexOptInfo) -> *mut pg_sys::List {
    unsafe {
        let mut best: *mut pg_sys::List = std::ptr::null_mut();
        for path in PgList::<pg_sys::Path>::from_pg((*rel).pathlist).iter_ptr() {
            let index_path = match (*path).type_ {
                NodeTag::T_IndexPath => path as *mut pg_sys::IndexPath,
                NodeTag::T_BitmapHeapPath => {
                    let qual = (*(path as *mut pg_sys::BitmapHeapPath)).bitmapqual;
                    if (*qual).type_ != NodeTag::T_IndexPath {
                        continue;
                    }
                    qual as *mut pg_sys::IndexPath
                }
                _ => continue,
            };
            if (*index_path).indexinfo != index || !(*index_path).path.param_info.is_null() {
                continue;
            }
            let clauses = plain_scan_clauses((*index_path).indexclauses);
            if pg_sys::list_length(clauses) > pg_sys::list_length(best) {
                best = clauses;
            }
        }
        best
    }
}

/// The index clauses of `clauses` that a plain index scan takes: not `col <@ ANY(array)`, which
/// only a bitmap scan takes (the access method does not search arrays, so the executor expands the
/// array into one bitmap scan per element; a plain scan refuses it with XX000). A clause left out
/// stays a filter of the scan.
unsafe fn plain_scan_clauses(clauses: *mut pg_sys::List) -> *mut pg_sys::List {
    unsafe {
        let mut kept: *mut pg_sys::List = std::ptr::null_mut();
        for clause in PgList::<pg_sys::IndexClause>::from_pg(clauses).iter_ptr() {
            let quals = PgList::<pg_sys::RestrictInfo>::from_pg((*clause).indexquals);
            if quals.iter_ptr().all(|qual| (*(*qual).clause).type_ == NodeTag::T_OpExpr) {
                kept = pg_sys::lappend(kept, clause.cast());
            }
        }
        kept
    }
}
