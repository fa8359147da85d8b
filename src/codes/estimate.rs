//! The planner's selectivity of `code <@ simhash_code_ball(q, k)`: the share of uniformly random
//! codes of the query's length within `k` bits (`simhash_core::multi_index::uniform_share_within`),
//! the model `simhash_ball_sel` uses for simhash64. Real codes cluster more, which it does not know.

use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::prelude::*;
use pgrx::PgList;

use crate::pg::nodes::{const_integer, strip_relabel};

/// Without a constant radius (a parameter), the estimate of a radius of 5 % of the bits.
const DEFAULT_RADIUS_SHARE: f64 = 0.05;
/// Without a known length, that of a PDQ hash.
const DEFAULT_BITS: u32 = 256;

/// (length in bits, radius) of the operands, each when known at plan time; a NULL ball is `Some(-1)`.
unsafe fn operands(args: *mut pg_sys::List) -> (Option<u32>, Option<i64>) {
    unsafe {
        let args = PgList::<Node>::from_pg(args);
        // The column's declared length: bit(n) has typmod n.
        let column_bits = args.get_ptr(0).and_then(|code| {
            let code = strip_relabel(code);
            ((*code).type_ == NodeTag::T_Var && (*(code as *mut pg_sys::Var)).vartypmod > 0)
                .then(|| (*(code as *mut pg_sys::Var)).vartypmod as u32)
        });
        let Some(ball) = args.get_ptr(1) else { return (column_bits, None) };
        match (*ball).type_ {
            NodeTag::T_RowExpr => {
                let fields = PgList::<Node>::from_pg((*(ball as *mut pg_sys::RowExpr)).args);
                let center_bits = fields.get_ptr(0).and_then(|c| {
                    let c = strip_relabel(c);
                    ((*c).type_ == NodeTag::T_Const && !(*(c as *mut pg_sys::Const)).constisnull)
                        .then(|| super::code_of((*(c as *mut pg_sys::Const)).constvalue).bits)
                });
                (center_bits.or(column_bits), fields.get_ptr(1).and_then(|r| const_integer(r)))
            }
            NodeTag::T_Const => {
                let constant = ball as *mut pg_sys::Const;
                if (*constant).constisnull {
                    return (column_bits, Some(-1));
                }
                match super::ball_of((*constant).constvalue) {
                    Some(ball) => (Some(ball.bits), Some(i64::from(ball.radius))),
                    None => (column_bits, Some(-1)),
                }
            }
            _ => (column_bits, None),
        }
    }
}

fn selectivity(args: *mut pg_sys::List) -> f64 {
    let (bits, radius) = unsafe { operands(args) };
    let bits = bits.filter(|&b| b > 0).unwrap_or(DEFAULT_BITS).min(simhash_core::multi_index::MAX_CODE_BITS);
    let radius = radius.unwrap_or((f64::from(bits) * DEFAULT_RADIUS_SHARE) as i64);
    if radius < 0 {
        return 0.0;
    }
    simhash_core::multi_index::uniform_share_within(bits, radius.min(i64::from(bits)) as u32).clamp(0.0, 1.0)
}

/// The restriction selectivity; 1 for a join test whose twin counts it (an inner index scan's
/// test estimated as a restriction, `crate::pg::twin`).
#[pg_extern(sql = false)]
fn simhash_code_ball_sel(
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
fn simhash_code_ball_joinsel(
    root: pgrx::datum::Internal,
    operator: pg_sys::Oid,
    args: pgrx::datum::Internal,
    _join_type: i16,
    _join_info: pgrx::datum::Internal,
) -> f64 {
    crate::pg::twin::once_of_twins(root, operator, args, selectivity)
}
