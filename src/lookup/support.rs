//! The planner support function that turns a radius test into index probes (the shape it builds
//! is in `shape`).
//!
//! `<~>` returns the domain `simhash_distance`; the comparison operators `simhash_distance <= k`,
//! `< k`, and their commuted forms `k >= simhash_distance`, `k > simhash_distance` are PostgreSQL's
//! own integer comparisons with this function attached as SUPPORT (both live in the private schema
//! `simhash_internal`). When the planner simplifies
//! `fp <~> q <= k` with a constant `k` from 0 to 11, and `fp` is a column of a table that has the
//! segment indexes, the test becomes
//!
//! ```sql
//! (fp <~> q)::integer <= k AND (simhash_segment(fp, 0) = ANY(probes of q's segment 0) OR ... 3)
//! ```
//!
//! (plain `=` for k <= 3), which the four functional B-tree indexes `(simhash_segment(fp, n))` answer
//! with a BitmapOr; with a GIN index on `simhash_bands(fp)` instead, the candidate test is
//! `simhash_bands(fp) && band probes of q`. The probes are complete (`simhash_core::probes`), so both
//! forms give the same value as the original for every input, NULLs included. Where the rewrite does
//! not apply (no such index, `simhash.enable_rewrite` off, k > 11, expensive operands) the test runs as
//! written.

use std::ptr::null_mut;

use pgrx::datum::Internal;
use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

use super::catalog::{ColumnIndexes, ExtensionObjects, IndexKind};
use super::shape::{band_candidates, exact_test, segment_candidates, segments_equal};
use crate::pg::nodes::{call_of, const_integer, copy, func_name, int4_const, is_param_or_const, strip_relabel};

#[pg_extern(sql = false)]
fn simhash_distance_support(request: Internal) -> Internal {
    let node = request.unwrap().map_or(null_mut(), |d| d.cast_mut_ptr::<Node>());
    let rewritten = unsafe { rewrite_radius_test(node) }.unwrap_or(null_mut());
    // "No rewrite" must be a non-NULL Datum 0, not SQL NULL.
    Internal::from(Some(Datum::from(rewritten)))
}

/// The rewrite, or `None` to leave the expression alone.
unsafe fn rewrite_radius_test(node: *mut Node) -> Option<*mut Node> {
    unsafe {
        if node.is_null()
            || (*node).type_ != NodeTag::T_SupportRequestSimplify
            || !super::settings::ENABLE_REWRITE.get()
        {
            return None;
        }
        let request = node as *mut pg_sys::SupportRequestSimplify;
        // Without planner state (expression_planner(): defaults, constraints) there is no table to probe.
        let root = (*request).root;
        if root.is_null() || (*root).parse.is_null() {
            return None;
        }
        let fcall = (*request).fcall;
        let test = Comparison::of((*fcall).funcid)?;
        let args = PgList::<Node>::from_pg((*fcall).args);
        let (distance, bound) =
            if test.commuted { (args.get_ptr(1)?, args.get_ptr(0)?) } else { (args.get_ptr(0)?, args.get_ptr(1)?) };

        // Only a constant, non-NULL bound. (All-constant calls were folded before we are asked.)
        let radius = u32::try_from(test.radius(const_integer(bound)?)?).ok()?;
        // (the segment indexes answer radii up to 11; the extension's own index any radius)
        let segment_radius = simhash_core::probes::segment_radius(radius);

        // The distance must be exactly our hamming(simhash64, simhash64) (or simhash_hamming(bit,
        // bit)), from the extension's schema. (The comparison itself is in simhash_internal, so the
        // schema is hamming's.)
        let (hamming_fn, hamming_args) = call_of(distance)?;
        let ours = ExtensionObjects::lookup(pg_sys::get_func_namespace(hamming_fn))?;
        let hamming_args = PgList::<Node>::from_pg(hamming_args);
        let (a, b) = (hamming_args.get_ptr(0)?, hamming_args.get_ptr(1)?);
        // simhash_hamming(bit, bit): codes of any length (`super::codes`).
        if let Some(codes) = ours.codes.filter(|codes| codes.hamming == hamming_fn) {
            return super::codes::rewrite_hamming_test(root, a, b, radius, &ours, &codes);
        }
        if hamming_fn != ours.hamming {
            return None;
        }

        // Each operand is copied into several places, so it must be cheap to evaluate repeatedly.
        // (An operand that is an expression of the table's rows may still have a `simhash` index
        // of its own: `crate::lookup::expression`.)
        if !is_cheap(&ours, a) || !is_cheap(&ours, b) {
            // An operand that is the same for every row but costly (an embedding's
            // `simhash($1::real[])` in a generic plan) is still fine for the `simhash` index: its
            // test copies the operand once, into the ball, which a scan evaluates once.
            let rtable = (*(*root).parse).rtable;
            for (probed, index, other) in probe_targets(rtable, a, b, &ours) {
                if index == IndexKind::OwnIndex && is_row_independent(other) {
                    return within_ball(probed, other, radius, &ours);
                }
            }
            let mut tests = PgList::<Node>::new();
            for (probed, other) in super::expression::indexed_expressions(root, a, b, &ours) {
                tests.push(within_ball(probed, other, radius, &ours)?);
            }
            return match tests.len() {
                0 => None,
                1 => tests.get_ptr(0),
                _ => Some(pg_sys::make_andclause(tests.into_pg()).cast()),
            };
        }
        // A candidate test per operand that is a column with indexes: in a join both sides may be,
        // and whichever the planner puts on the inner side probes its indexes with the other's value.
        // The exact test comes first in the AND, so a candidate test only runs on true matches.
        let mut candidate_tests = Vec::new();
        let mut own_tests = PgList::<Node>::new();
        for (probed, index, other) in probe_targets((*(*root).parse).rtable, a, b, &ours) {
            if index == IndexKind::OwnIndex {
                // Exact on its own: `probed <@ ROW(other, k)::simhash_ball`.
                own_tests.push(within_ball(probed, other, radius, &ours)?);
                continue;
            }
            let Some(segment_radius) = segment_radius else { continue };
            let test = match index {
                // Symmetric: one test serves both sides.
                IndexKind::SegmentBtrees if segment_radius == 0 => {
                    if candidate_tests.iter().any(|(kind, _)| *kind == index) {
                        continue;
                    }
                    segments_equal(a, b, &ours)
                }
                IndexKind::SegmentBtrees => {
                    let radii = simhash_core::probes::segment_radii(radius)?;
                    segment_candidates(probed, other, radii, &ours)
                }
                IndexKind::BandsGin => band_candidates(probed, other, segment_radius, &ours),
                IndexKind::OwnIndex => continue,
            };
            candidate_tests.push((index, test));
        }
        if !own_tests.is_empty() {
            return Some(if own_tests.len() == 1 {
                own_tests.get_ptr(0)?
            } else {
                pg_sys::make_andclause(own_tests.into_pg()).cast()
            });
        }
        if candidate_tests.is_empty() {
            return None;
        }

        // The exact test first: in a select list the AND is evaluated in this order.
        let mut all = PgList::<Node>::new();
        all.push(exact_test(distance, radius));
        for (_, test) in candidate_tests {
            all.push(test);
        }
        Some(pg_sys::make_andclause(all.into_pg()).cast())
    }
}

/// Which comparison a support call is for, read from the function's name in sql/simhash.sql.
struct Comparison {
    /// `k > d` / `d < k` rather than `k >= d` / `d <= k`.
    strict: bool,
    /// The bound is the first argument (`k >= d`).
    commuted: bool,
}

impl Comparison {
    unsafe fn of(funcid: Oid) -> Option<Self> {
        let name = unsafe { func_name(funcid) }?;
        let (strict, commuted) = match name.as_str() {
            "simhash_distance_le" => (false, false),
            "simhash_distance_lt" => (true, false),
            "simhash_distance_le_commuted" => (false, true),
            "simhash_distance_lt_commuted" => (true, true),
            _ => return None,
        };
        Some(Comparison { strict, commuted })
    }

    /// The largest distance that passes, for a bound `k`.
    fn radius(&self, k: i64) -> Option<i64> {
        if self.strict {
            k.checked_sub(1)
        } else {
            Some(k)
        }
    }
}

/// Cheap enough to evaluate in several places, and a simhash64: a column, a constant, a
/// parameter, or `simhash()`, `simhash_ngrams()` or `minhash64()` whose arguments do not depend
/// on the row: constants and parameters, alone or in non-volatile expressions such as
/// `simhash($1, greatest(20, char_length($1) / 40))` in a generic plan (one text per execution,
/// which the backend's memo in `crate::fingerprint::text` fingerprints once). Anything else, sub-selects
/// included, would run once per copy, so those queries keep their original form.
unsafe fn is_cheap(ours: &ExtensionObjects, node: *mut Node) -> bool {
    unsafe {
        if pg_sys::getBaseType(pg_sys::exprType(node)) != ours.simhash64 {
            return false;
        }
        match (*node).type_ {
            NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                ours.text_fingerprints.contains(&(*f).funcid)
                    && PgList::<Node>::from_pg((*f).args).iter_ptr().all(|arg| is_row_independent(arg))
            }
            _ => is_plain_operand(node),
        }
    }
}

/// A column, a parameter or a non-NULL constant, possibly relabelled (a domain over simhash64).
unsafe fn is_plain_operand(node: *mut Node) -> bool {
    unsafe { (*strip_relabel(node)).type_ == NodeTag::T_Var || is_param_or_const(node) }
}

/// The same value for every row of one execution: constants and parameters, alone or combined by
/// non-volatile functions and operators; no column (of this query or an outer one), sub-select,
/// aggregate or window function.
unsafe fn is_row_independent(node: *mut Node) -> bool {
    unsafe { !refers_to_rows(node, null_mut()) && !pg_sys::contain_volatile_functions(node) }
}

/// Walker for [`is_row_independent`]: true at the first node whose value can change from row to row.
/// (Guarded: `expression_tree_walker` may raise an error, e.g. on a too deep expression.)
#[pg_guard]
unsafe extern "C-unwind" fn refers_to_rows(node: *mut Node, context: *mut std::ffi::c_void) -> bool {
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            NodeTag::T_Var
            | NodeTag::T_PlaceHolderVar
            | NodeTag::T_SubLink
            | NodeTag::T_SubPlan
            | NodeTag::T_AlternativeSubPlan
            | NodeTag::T_Aggref
            | NodeTag::T_GroupingFunc
            | NodeTag::T_WindowFunc
            | NodeTag::T_CurrentOfExpr => true,
            _ => pg_sys::expression_tree_walker(node, Some(refers_to_rows), context),
        }
    }
}

/// `probed <@ ROW(other, radius)::simhash_ball`: the radius test as the operator of the extension's
/// own index access method (src/index/), exact for every radius.
pub(super) unsafe fn within_ball(
    probed: *mut Node,
    other: *mut Node,
    radius: u32,
    ours: &ExtensionObjects,
) -> Option<*mut Node> {
    unsafe {
        let own = ours.own_index?;
        let mut row = pgrx::PgBox::<pg_sys::RowExpr>::alloc_node(NodeTag::T_RowExpr);
        let mut args = PgList::<Node>::new();
        // (the ball's center is a simhash64: a domain over it is relabeled, as the parser does)
        let center = if pg_sys::exprType(other) == ours.simhash64 {
            copy(other)
        } else {
            pg_sys::makeRelabelType(
                copy(other).cast(),
                ours.simhash64,
                -1,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
            )
            .cast()
        };
        args.push(center);
        args.push(int4_const(radius.min(64) as i32).cast());
        row.args = args.into_pg();
        row.row_typeid = own.ball_type;
        row.row_format = pg_sys::CoercionForm::COERCE_EXPLICIT_CAST;
        // (colnames stay NIL: the row is of a named composite type)
        row.location = -1;
        let call = pg_sys::make_opclause(
            own.within,
            pg_sys::BOOLOID,
            false,
            copy(probed).cast(),
            row.into_pg().cast(),
            Oid::INVALID,
            Oid::INVALID,
        );
        (*(call as *mut pg_sys::OpExpr)).opfuncid = own.within_function;
        Some(call.cast())
    }
}

/// The operands to probe through their table's indexes: (operand, index kind, other operand).
/// An operand qualifies when it is a column of this query level of a table (plain, partitioned or
/// materialised view) that has the indexes, and the other operand is not a column of the same row.
unsafe fn probe_targets(
    rtable: *mut pg_sys::List,
    a: *mut Node,
    b: *mut Node,
    ours: &ExtensionObjects,
) -> Vec<(*mut Node, IndexKind, *mut Node)> {
    unsafe {
        let column = |x: *mut Node| -> Option<*mut pg_sys::Var> {
            let var = strip_relabel(x);
            ((*var).type_ == NodeTag::T_Var && (*(var as *mut pg_sys::Var)).varlevelsup == 0)
                .then_some(var as *mut pg_sys::Var)
        };
        let rtable_length = PgList::<Node>::from_pg(rtable).len();
        let mut targets = Vec::new();
        for (probed, other) in [(a, b), (b, a)] {
            let Some(var) = column(probed) else { continue };
            // PostgreSQL may simplify a pulled-up subquery's quals with its parent's root
            // (convert_EXISTS_to_ANY), so a Var need not belong to this range table: check the bounds,
            // and below that the column really is a simhash64. A wrong guess only costs a useless
            // (still exact) rewrite.
            if (*var).varno < 1 || (*var).varno as usize > rtable_length || (*var).varattno < 1 {
                continue;
            }
            // Probing needs a value fixed while the table is scanned: not another column of the same row.
            if column(other).is_some_and(|o| (*o).varno == (*var).varno) {
                continue;
            }
            let rte = pg_sys::list_nth(rtable, (*var).varno - 1) as *mut pg_sys::RangeTblEntry;
            // (get_atttype is InvalidOid when that table has no such column: getBaseType fails on it)
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                || pg_sys::get_atttype((*rte).relid, (*var).varattno) == Oid::INVALID
                || pg_sys::getBaseType(pg_sys::get_atttype((*rte).relid, (*var).varattno)) != ours.simhash64
            {
                continue;
            }
            if let Some(kind) = ColumnIndexes::of((*rte).relid, (*var).varattno, ours).and_then(|i| i.kind()) {
                targets.push((probed, kind, other));
            }
        }
        targets
    }
}
