//! Cost and selectivity: the index's cost estimate ([`amcostestimate`], PostgreSQL's generic one,
//! with the scans the index cannot serve priced out), and the planner's selectivity of
//! `fp <@ simhash_ball(q, k)`: the share of uniformly random fingerprints within `k` bits
//! (`simhash_core::probes::uniform_share_within`), the same model the radius scan's costs use; real
//! fingerprints cluster more, which the estimate does not know.

use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::prelude::*;
use pgrx::PgList;

use crate::pg::nodes::const_integer;

/// Without a constant radius (a parameter), the estimate of a radius of 7.
const DEFAULT_RADIUS: u32 = 7;

/// The radius of the ball operand (the second argument), when it is known at plan time.
unsafe fn radius_of(args: *mut pg_sys::List) -> Option<i64> {
    unsafe {
        let args = PgList::<Node>::from_pg(args);
        let ball = args.get_ptr(1)?;
        match (*ball).type_ {
            NodeTag::T_RowExpr => {
                let fields = PgList::<Node>::from_pg((*(ball as *mut pg_sys::RowExpr)).args);
                const_integer(fields.get_ptr(1)?)
            }
            NodeTag::T_Const => {
                let constant = ball as *mut pg_sys::Const;
                if (*constant).constisnull {
                    return Some(-1);
                }
                super::search::ball_of((*constant).constvalue).map(|(_, radius)| i64::from(radius))
            }
            _ => None,
        }
    }
}

fn selectivity(args: *mut pg_sys::List) -> f64 {
    let radius = unsafe { radius_of(args) }.unwrap_or(i64::from(DEFAULT_RADIUS));
    if radius < 0 {
        return 0.0;
    }
    simhash_core::probes::uniform_share_within(radius.min(64) as u32).clamp(0.0, 1.0)
}

/// The restriction selectivity; 1 for a join test whose twin counts it (an inner index scan's
/// test estimated as a restriction, `crate::pg::twin`).
#[pg_extern(sql = false)]
fn simhash_ball_sel(
    root: pgrx::datum::Internal,
    operator: pg_sys::Oid,
    args: pgrx::datum::Internal,
    _var_relid: i32,
) -> f64 {
    crate::pg::twin::once_of_twins(root, operator, args, selectivity)
}

/// The join selectivity: that of the radius, or 1 for a test whose twin counts it
/// (`crate::pg::twin`).
#[pg_extern(sql = false)]
fn simhash_ball_joinsel(
    root: pgrx::datum::Internal,
    operator: pg_sys::Oid,
    args: pgrx::datum::Internal,
    _join_type: i16,
    _join_info: pgrx::datum::Internal,
) -> f64 {
    crate::pg::twin::once_of_twins(root, operator, args, selectivity)
}

/// The cost of a scan of the index (`amcostestimate`).
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
        // (each condition counted in full: `crate::pg::twin::counting_alone`)
        crate::pg::twin::counting_alone(|| pg_sys::genericcostestimate(root, path, loop_count, &mut costs));
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
        // An index of codes: its own estimate, the penalties above kept.
        let info = (*path).indexinfo;
        if !(*info).opcintype.is_null() && *(*info).opcintype == pg_sys::BITOID {
            if let Some((startup, total, share, read)) = super::codes::cost::estimate(path) {
                let extra = f64::from(penalty) * pg_sys::disable_cost;
                *startup_cost = startup + extra;
                *total_cost = total + extra;
                *selectivity = share;
                *pages = read;
                *correlation = 0.0;
            }
        }
    }
}
