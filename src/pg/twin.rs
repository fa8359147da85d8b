//! Join selectivity of a radius test that the planner sees twice. A test of two columns,
//! `a <@ ball(b, k)`, is symmetric: `b <@ ball(a, k)` is the same condition. The rewrite of
//! `hamming(a, b) <= k` emits both when both columns have an index (each side probes its own), or
//! both indexed expressions of two tables (`f(a.x) <@ ball(g(b.y), k)` and its mirror), and a user
//! may write both; PostgreSQL multiplies the selectivities of the two clauses and so counts the
//! condition twice (a join of 1,000 x 1,000 rows estimated at 1 row instead of 13).
//! [`counted_by_twin`] lets the selectivity functions of both ball operators count it once.

use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::PgList;

use super::nodes::{const_integer, strip_relabel};

/// An operand of a test: the one table of this query level it reads (its range table index)
/// and the operand itself (a column, or an expression of that table's columns).
type Operand = (i32, *mut Node);

/// The table of `node` when it reads columns of exactly one table of this query level.
unsafe fn operand(root: *mut pg_sys::PlannerInfo, node: *mut Node) -> Option<Operand> {
    unsafe {
        let node = strip_relabel(node);
        if node.is_null() {
            return None;
        }
        if (*node).type_ == NodeTag::T_Var {
            let var = node as *mut pg_sys::Var;
            return ((*var).varlevelsup == 0 && (*var).varno > 0).then_some(((*var).varno, node));
        }
        let mut varno = 0;
        (pg_sys::bms_get_singleton_member(pg_sys::pull_varnos(root, node), &mut varno) && varno > 0)
            .then_some((varno, node))
    }
}

/// The operand tested and the ball's center and constant radius of `tested <@ ball(center,
/// radius)` (the ball a row constructor or a call with those two arguments), when the two read
/// two different tables.
unsafe fn test_of(root: *mut pg_sys::PlannerInfo, args: *mut pg_sys::List) -> Option<(Operand, Operand, i64)> {
    unsafe {
        let args = PgList::<Node>::from_pg(args);
        if args.len() != 2 {
            return None;
        }
        let tested = operand(root, args.get_ptr(0)?)?;
        let ball = args.get_ptr(1)?;
        let fields = match (*ball).type_ {
            NodeTag::T_RowExpr => PgList::<Node>::from_pg((*(ball as *mut pg_sys::RowExpr)).args),
            NodeTag::T_FuncExpr => PgList::<Node>::from_pg((*(ball as *mut pg_sys::FuncExpr)).args),
            _ => return None,
        };
        if fields.len() != 2 {
            return None;
        }
        let center = operand(root, fields.get_ptr(0)?)?;
        let radius = const_integer(fields.get_ptr(1)?)?;
        (center.0 != tested.0).then_some((tested, center, radius))
    }
}

/// Whether two operands are the same (a column, or equal expressions).
unsafe fn same(a: Operand, b: Operand) -> bool {
    unsafe { a.0 == b.0 && pg_sys::equal(a.1.cast(), b.1.cast()) }
}

/// Whether the test `args` of operator `operator` (`a <@ ball(b, k)`, `a` and `b` columns or
/// expressions of two tables) has a twin among the query's join clauses, `b <@ ball(a, k2)` of the
/// same operator, that counts their one condition: of the two, the one with the smaller radius
/// (the condition both make), or on equal radii the one whose tested operand's table comes first.
/// Its selectivity is then 1: the condition is counted once, by the twin.
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
        let Some((tested, center, radius)) = test_of(root, args) else { return false };
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
            if let Some((twin_tested, twin_center, twin_radius)) = test_of(root, (*op).args) {
                if same(twin_tested, center) && same(twin_center, tested) {
                    // (the two tested operands read different tables: the order is strict)
                    return (radius, tested.0) > (twin_radius, twin_tested.0);
                }
            }
        }
        false
    }
}

thread_local! {
    /// Set while an index's cost estimate computes the selectivity of its own conditions: there a
    /// test is alone, not beside its twin, and counts in full.
    static ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (an index's cost estimate of its conditions) with every test counted in full, its
/// twin's counting set aside: the twin rule is for a clause list that holds both tests (a join's,
/// or a parameterized path's rows), while an inner index scan that probes with one of them reads
/// as many rows as that test passes. (Once, without this, the side whose twin counted was
/// estimated to read every row of its index, so a join restricted on the other side scanned
/// the whole table instead of probing its index.)
pub(crate) fn counting_alone<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            ALONE.with(|alone| alone.set(self.0));
        }
    }
    // (reset on the way out, an error's unwinding included)
    let _reset = Reset(ALONE.with(|alone| alone.replace(true)));
    f()
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
    if !ALONE.with(|alone| alone.get()) && unsafe { counted_by_twin(root, operator, args) } {
        return 1.0;
    }
    selectivity(args)
}
