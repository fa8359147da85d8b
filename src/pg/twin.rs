//! Join selectivity of a radius test that the planner sees twice. A test of two columns,
//! `a <@ ball(b, k)`, is symmetric: `b <@ ball(a, k)` is the same condition. The rewrite of
//! `hamming(a, b) <= k` emits both when both columns have an index (each side probes its own),
//! and a user may write both; PostgreSQL multiplies the selectivities of the two clauses and so
//! counts the condition twice (a join of 1,000 x 1,000 rows estimated at 1 row instead of 13).
//! [`counted_by_twin`] lets the selectivity functions of both ball operators count it once.

use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::PgList;

use super::nodes::{const_integer, strip_relabel};

/// A column: `(varno, varattno)`.
type Column = (i32, i16);

/// The column of a column of this query level (under any relabelling).
unsafe fn column(node: *mut Node) -> Option<Column> {
    unsafe {
        let node = strip_relabel(node);
        if node.is_null() || (*node).type_ != NodeTag::T_Var {
            return None;
        }
        let var = node as *mut pg_sys::Var;
        ((*var).varlevelsup == 0 && (*var).varno > 0).then(|| ((*var).varno, (*var).varattno))
    }
}

/// The column tested and the ball's center column and constant radius of `column <@ ball(center,
/// radius)` (the ball a row constructor or a call with those two arguments).
unsafe fn test_of(args: *mut pg_sys::List) -> Option<(Column, Column, i64)> {
    unsafe {
        let args = PgList::<Node>::from_pg(args);
        if args.len() != 2 {
            return None;
        }
        let tested = column(args.get_ptr(0)?)?;
        let ball = args.get_ptr(1)?;
        let fields = match (*ball).type_ {
            NodeTag::T_RowExpr => PgList::<Node>::from_pg((*(ball as *mut pg_sys::RowExpr)).args),
            NodeTag::T_FuncExpr => PgList::<Node>::from_pg((*(ball as *mut pg_sys::FuncExpr)).args),
            _ => return None,
        };
        if fields.len() != 2 {
            return None;
        }
        let center = column(fields.get_ptr(0)?)?;
        let radius = const_integer(fields.get_ptr(1)?)?;
        (center.0 != tested.0).then_some((tested, center, radius))
    }
}

/// Whether the test `args` of operator `operator` (`a <@ ball(b, k)`, `a` and `b` columns of two
/// tables) has a twin among the query's join clauses, `b <@ ball(a, k2)` of the same operator,
/// that counts their one condition: of the two, the one with the smaller radius (the condition
/// both make), or on equal radii the one whose tested column comes first. Its selectivity is
/// then 1: the condition is counted once, by the twin.
///
/// # Safety
///
/// Called by a selectivity function with the planner's state (`root` may be NULL) and the
/// operator's arguments.
pub(crate) unsafe fn counted_by_twin(root: *mut pg_sys::PlannerInfo, operator: Oid, args: *mut pg_sys::List) -> bool {
    unsafe {
        if root.is_null() || args.is_null() || (*root).simple_rel_array.is_null() {
            return false;
        }
        let Some((tested, center, radius)) = test_of(args) else { return false };
        if tested.0 >= (*root).simple_rel_array_size {
            return false;
        }
        let rel = *(*root).simple_rel_array.add(tested.0 as usize);
        if rel.is_null() {
            return false;
        }
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).joininfo).iter_ptr() {
            let clause = (*rinfo).clause as *mut Node;
            if clause.is_null() || (*clause).type_ != NodeTag::T_OpExpr {
                continue;
            }
            let op = clause as *mut pg_sys::OpExpr;
            if (*op).opno != operator {
                continue;
            }
            if let Some((twin_tested, twin_center, twin_radius)) = test_of((*op).args) {
                if twin_tested == center && twin_center == tested {
                    return (radius, tested) > (twin_radius, twin_tested);
                }
            }
        }
        false
    }
}

/// The selectivity of the test `args` by `selectivity`, or 1 when its twin counts it: the body of
/// the restriction and join selectivity functions of both ball operators.
pub(crate) fn once_of_twins(
    root: pgrx::datum::Internal,
    operator: Oid,
    args: pgrx::datum::Internal,
    selectivity: fn(*mut pg_sys::List) -> f64,
) -> f64 {
    let root: *mut pg_sys::PlannerInfo = root.unwrap().map_or(std::ptr::null_mut(), |d: Datum| d.cast_mut_ptr());
    let args: *mut pg_sys::List = args.unwrap().map_or(std::ptr::null_mut(), |d: Datum| d.cast_mut_ptr());
    if unsafe { counted_by_twin(root, operator, args) } {
        return 1.0;
    }
    selectivity(args)
}
