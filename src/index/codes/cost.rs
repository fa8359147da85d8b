//! The cost of a scan of an index of codes: from its metapage (rows, layout, tail pages) and the
//! ball's radius when the plan knows it, the expected probes, candidates and checks of a lookup
//! (`simhash_core::code_index`), or a read of the whole code store when probing would cost more
//! (as the scan then does). `ORDER BY` alone starts as a lookup at radius 0 and costs in all a
//! read of the code store, of which `LIMIT n` pays a share (see [`estimate`]).

use pgrx::pg_sys::{self, Node, NodeTag};
use pgrx::PgList;
use simhash_core::code_index;

use super::meta::{self, CodesMeta};
use crate::pg::nodes::const_integer;

/// Without a constant radius, the estimate of a radius of 8.
const DEFAULT_RADIUS: u32 = 8;

/// The radius of the ball operand of an index clause, when it is known at plan time.
unsafe fn radius_of(clause: *mut Node) -> Option<i64> {
    unsafe {
        if clause.is_null() || (*clause).type_ != NodeTag::T_OpExpr {
            return None;
        }
        let args = PgList::<Node>::from_pg((*(clause as *mut pg_sys::OpExpr)).args);
        let ball = args.get_ptr(1)?;
        match (*ball).type_ {
            NodeTag::T_RowExpr => {
                let fields = PgList::<Node>::from_pg((*(ball as *mut pg_sys::RowExpr)).args);
                const_integer(fields.get_ptr(1)?)
            }
            NodeTag::T_FuncExpr => {
                let fields = PgList::<Node>::from_pg((*(ball as *mut pg_sys::FuncExpr)).args);
                const_integer(fields.get_ptr(1)?)
            }
            NodeTag::T_Const => {
                let constant = ball as *mut pg_sys::Const;
                // (only a composite is a ball: never read another constant as one)
                if !pg_sys::type_is_rowtype((*constant).consttype) {
                    return None;
                }
                if (*constant).constisnull {
                    return Some(-1);
                }
                super::ball_of((*constant).constvalue).map(|ball| i64::from(ball.radius))
            }
            _ => None,
        }
    }
}

/// The costs of a scan: (startup, total, selectivity, pages), or `None` for the generic estimate.
///
/// # Safety
///
/// `path` is an index path of an index of codes.
pub(in crate::index) unsafe fn estimate(path: *mut pg_sys::IndexPath) -> Option<(f64, f64, f64, f64)> {
    unsafe {
        let info = (*path).indexinfo;
        let index = pg_sys::index_open((*info).indexoid, pg_sys::NoLock as i32);
        let meta: CodesMeta = meta::load_meta(index);
        pg_sys::index_close(index, pg_sys::NoLock as i32);
        let rows = u64::from(meta.rows);
        let code_bytes = meta.code_bytes().max(1);
        let store_pages = (rows as f64 / meta::store_per_page(code_bytes) as f64).ceil() + f64::from(meta.tail_pages);
        let all_rows = rows as f64 + f64::from(meta.tail_pages) * meta::store_per_page(code_bytes) as f64;
        let (seq_page, random_page, cpu_tuple, cpu_operator) =
            (pg_sys::seq_page_cost, pg_sys::random_page_cost, pg_sys::cpu_index_tuple_cost, pg_sys::cpu_operator_cost);
        // A read of every code: its pages in order, a distance per row.
        let scan = store_pages * seq_page + all_rows * (cpu_tuple + cpu_operator);
        let clauses = PgList::<pg_sys::IndexClause>::from_pg((*path).indexclauses);
        let mut radius: Option<u32> = None;
        // The index conditions proper (`indexquals`): a clause the planner hook derived the condition
        // from (pgvector's `code <~> q <= k`, `crate::lookup::codes`) is not one itself.
        let quals = clauses.iter_ptr().flat_map(|clause| {
            PgList::<pg_sys::RestrictInfo>::from_pg((*clause).indexquals).iter_ptr().collect::<Vec<_>>()
        });
        for qual in quals {
            let r = radius_of((*qual).clause.cast()).unwrap_or(i64::from(DEFAULT_RADIUS));
            let r = r.clamp(-1, i64::from(meta.code_bits.max(1))) as i32;
            if r < 0 {
                return Some((0.0, 0.0, 0.0, 1.0));
            }
            radius = Some(radius.map_or(r as u32, |k| k.min(r as u32)));
        }
        // A lookup within `k`: (cost, selectivity, pages).
        let lookup = |k: u32| {
            let selectivity = (simhash_core::multi_index::uniform_share_within(meta.code_bits.max(1), k)
                + 1.0 / all_rows.max(1.0))
            .min(1.0);
            let matches = selectivity * all_rows;
            let tail = f64::from(meta.tail_pages);
            let probed = (rows > 0)
                .then(|| meta.layout())
                .and_then(|layout| layout.lookup(k, rows).map(|lookup| lookup.work))
                .filter(|&work| code_index::probing_pays(work, rows));
            let cost = match probed {
                // A probe: a directory position and a binary search in cached pages; a candidate
                // met: an ordinal; a check: a code-store page (random, a share of them cached) and
                // a distance.
                Some(work) => {
                    work.probes * (cpu_operator * 20.0)
                        + work.candidates * cpu_operator
                        + work.checks * (cpu_tuple + cpu_operator + 0.1 * random_page)
                        + tail * seq_page
                        + matches * cpu_tuple
                        + random_page
                }
                None => scan,
            };
            let pages = probed.map_or(store_pages, |work| (work.checks + 1.0).min(store_pages) + tail);
            (cost, selectivity, pages)
        };
        let Some(k) = radius else {
            // ORDER BY alone: the rows come nearest first, from rounds through the segments and
            // then passes over the code store. Started as the first round (radius 0), then priced
            // as a read of the code store spread over the rows, so that `LIMIT n` pays its share:
            // the shape of the simhash64 index's ordered scan (PostgreSQL's generic estimate), and
            // what an index of near-duplicates is for (its nearest rows are near). The rows of
            // uniform codes lie far (about 87 bits of 256): their first row then costs a read of
            // the code store, still less than the sequential scan and sort it replaces.
            let (first, _, _) = lookup(0);
            let first = first.min(scan);
            return Some((first, first + scan, 1.0, store_pages));
        };
        let (cost, selectivity, pages) = lookup(k);
        Some((cost, cost, selectivity, pages))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shares() {
        assert!((simhash_core::multi_index::uniform_share_within(8, 8) - 1.0).abs() < 1e-9);
        assert!((simhash_core::multi_index::uniform_share_within(4, 1) - 5.0 / 16.0).abs() < 1e-9);
        assert!(simhash_core::multi_index::uniform_share_within(256, 16) < 1e-40);
    }
}
