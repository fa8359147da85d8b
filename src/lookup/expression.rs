//! A radius test on an indexed expression: with `CREATE INDEX ... USING simhash ((code::simhash64))`
//! (a pgvector `bit(64)` column) or `USING simhash ((minhash64(body)))` (no stored fingerprint),
//! `code::simhash64 <~> q <= k` becomes `code::simhash64 <@ simhash_ball(q, k)`; with `USING simhash
//! ((simhash_code(hash)))` (a `bytea` hash), `simhash_hamming(simhash_code(hash), q) <= k` becomes
//! `simhash_code(hash) <@ simhash_code_ball(q, k)`. The planner matches either to that index as it
//! matches any expression index (`match_index_to_operand`). The test is exact either way, so where
//! the index is not used the rewritten test gives the same rows.
//!
//! Only the `simhash` index serves expressions: the segment B-trees and the bands GIN index are
//! defined on a column (`crate::lookup::catalog`).

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::PgList;

use super::catalog::{is_whole_single_key_index, ExtensionObjects};
use crate::pg::nodes::strip_relabel;

/// Each `(probed, other)` of `(a, b)` and `(b, a)` whose first member is an expression (not a bare
/// column) of one table of the query with a valid `simhash` index, without a predicate, on that
/// very expression, and whose second member does not depend on that table's rows and is not
/// volatile: none, one, or in a join of two such expressions both. The caller makes `probed <@
/// ball(other, k)` of each (both, ANDed: one condition, counted once by `crate::pg::twin`).
///
/// # Safety
///
/// In the planner, with `root` the query's planner state.
pub(super) unsafe fn indexed_expressions(
    root: *mut pg_sys::PlannerInfo,
    a: *mut Node,
    b: *mut Node,
    ours: &ExtensionObjects,
) -> Vec<(*mut Node, *mut Node)> {
    unsafe {
        let Some(own) = ours.own_index else { return Vec::new() };
        let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg((*(*root).parse).rtable);
        let mut found = Vec::new();
        for (probed, other) in [(a, b), (b, a)] {
            // (a bare column is the column path's: `crate::lookup::support`, `crate::lookup::codes`)
            if (*strip_relabel(probed)).type_ == NodeTag::T_Var || pg_sys::contain_volatile_functions(probed) {
                continue;
            }
            // (the table's own view of it: `not_nulled`)
            let plain = not_nulled(probed);
            let mut varno = 0;
            if !pg_sys::bms_get_singleton_member(pg_sys::pull_varnos(root, plain), &mut varno) {
                continue;
            }
            if pg_sys::bms_is_member(varno, pg_sys::pull_varnos(root, other))
                || pg_sys::contain_volatile_functions(other)
            {
                continue;
            }
            let Some(rte) = rtable.get_ptr(varno as usize - 1) else { continue };
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                || crate::pg::citus::is_citus_table((*rte).relid)
                || !has_index_on(own.access_method, (*rte).relid, varno, plain)
            {
                continue;
            }
            found.push((probed, other));
        }
        found
    }
}

/// Whether table `relid` (the query's range table entry `varno`) has a valid index of the access
/// method `am`, on the single expression `expr` and without a predicate.
unsafe fn has_index_on(am: Oid, relid: Oid, varno: i32, expr: *mut Node) -> bool {
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return false;
        }
        let mut found = false;
        if (*(*rel).rd_rel).relhasindex {
            for index_oid in PgList::<Oid>::from_pg(pg_sys::RelationGetIndexList(rel)).iter_oid() {
                // (the planner takes the same lock on every index of the table moments later)
                let index = pg_sys::index_open(index_oid, pg_sys::AccessShareLock as i32);
                if is_whole_single_key_index(index, am) && (*(*index).rd_index).indkey.values.as_slice(1)[0] == 0 {
                    // An index's expressions name the table as range table entry 1 (as the planner's
                    // get_relation_info, renumber them for the query).
                    let indexed = PgList::<Node>::from_pg(pg_sys::RelationGetIndexExpressions(index)).get_ptr(0);
                    if let Some(indexed) = indexed {
                        if varno != 1 {
                            renumber(indexed, varno);
                        }
                        found = pg_sys::equal(strip_relabel(indexed).cast(), strip_relabel(expr).cast());
                    }
                }
                pg_sys::index_close(index, pg_sys::NoLock as i32);
                if found {
                    break;
                }
            }
        }
        pg_sys::RelationClose(rel);
        found
    }
}

/// `expr` as its table's scan sees it: on PostgreSQL 16 and later a column on the nullable side of
/// an outer join names that join (`varnullingrels`) until the planner finds the join reducible
/// (`WHERE f(p.x) <~> q <= k` of a `LEFT JOIN p` makes it an inner join, later than this rewrite):
/// a copy without those marks, to find its table and compare it with the index's expression (the
/// rewritten test keeps the expression as written). (Without
/// it, such a test on an indexed expression stayed a scan, while one on an indexed column did not.)
#[cfg(not(feature = "pg15"))]
unsafe fn not_nulled(expr: *mut Node) -> *mut Node {
    unsafe {
        let copy = crate::pg::nodes::copy(expr);
        clear_nulling(copy, std::ptr::null_mut());
        copy
    }
}

#[cfg(feature = "pg15")]
unsafe fn not_nulled(expr: *mut Node) -> *mut Node {
    expr
}

/// Walker for [`not_nulled`], in place. (Guarded, as [`set_varno`].)
#[cfg(not(feature = "pg15"))]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn clear_nulling(node: *mut Node, context: *mut std::ffi::c_void) -> bool {
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == NodeTag::T_Var {
            (*(node as *mut pg_sys::Var)).varnullingrels = std::ptr::null_mut();
            return false;
        }
        pg_sys::expression_tree_walker(node, Some(clear_nulling), context)
    }
}

/// Makes every column of `node` (an index expression, all of whose columns are its table's) a
/// column of range table entry `varno`, in place.
unsafe fn renumber(node: *mut Node, varno: i32) {
    unsafe {
        let mut varno = varno;
        set_varno(node, (&raw mut varno).cast());
    }
}

/// Walker for [`renumber`]. (Guarded: `expression_tree_walker` may raise an error, e.g. on a too
/// deep expression.)
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn set_varno(node: *mut Node, context: *mut std::ffi::c_void) -> bool {
    unsafe {
        if node.is_null() {
            return false;
        }
        if (*node).type_ == NodeTag::T_Var {
            let var = node as *mut pg_sys::Var;
            if (*var).varlevelsup == 0 {
                (*var).varno = *(context as *const i32);
                (*var).varnosyn = (*var).varno as _;
            }
            return false;
        }
        pg_sys::expression_tree_walker(node, Some(set_varno), context)
    }
}
