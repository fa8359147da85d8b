//! The shape of the rewritten radius test, built and matched in one place.
//!
//! The planner rewrite (`support`) turns `fp <~> q <= k` into
//!
//! ```sql
//! (fp <~> q)::integer <= k                                   -- the exact test
//!   AND (simhash_segment(fp, 0) = ANY(probes of q, 0) OR ... 3)  -- a candidate test
//! ```
//!
//! (`=` instead of `= ANY` for k <= 3, or `simhash_bands(fp) && band probes of q` for a GIN index).
//! The radius scan (`radius_path`) recognises that output: the exact test is an int4 `<=` whose left
//! side is an *implicit* cast of `hamming(a, b)` (so a user's own `::integer` is left alone) and
//! whose right side is a constant radius, and the candidate tests are ORs of operators whose first
//! argument calls `simhash_segment` or `simhash_bands`, which it leaves out of its qual since the
//! exact test implies them. Both directions live here, so a change to one shows beside the other.

use crate::lookup::catalog::SEGMENTS;
use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::PgList;

use super::catalog::ExtensionObjects;
use crate::pg::nodes::{
    call_of, const_integer, copy, function_call, int4_array_const, int4_const, int4_equal_any, operator_call,
    strip_relabel, ARRAY_OVERLAP, INT4_EQ, INT4_LE,
};

// ------------------------------------------------------------------------------------------------
// Building (the rewrite)
// ------------------------------------------------------------------------------------------------

/// The exact test `(distance)::integer <= radius`, the cast implicit (what [`match_exact_test`]
/// looks for).
///
/// # Safety
///
/// In a backend, in the planner's memory context; `distance` is a valid expression node (it is
/// copied).
pub(crate) unsafe fn exact_test(distance: *mut Node, radius: u32) -> *mut Node {
    unsafe {
        let as_int4 = pg_sys::makeRelabelType(
            copy(distance).cast(),
            pg_sys::INT4OID,
            -1,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
        );
        operator_call(INT4_LE, as_int4.cast(), int4_const(radius as i32).cast())
    }
}

/// For k <= 3: `simhash_segment(a, 0) = simhash_segment(b, 0) OR ... 3` (symmetric: it serves an
/// index on either side).
///
/// # Safety
///
/// In a backend, in the planner's memory context; `a` and `b` are valid expression nodes (they are
/// copied).
pub(crate) unsafe fn segments_equal(a: *mut Node, b: *mut Node, ours: &ExtensionObjects) -> *mut Node {
    unsafe {
        let mut any_equal = PgList::<Node>::new();
        for n in 0..SEGMENTS as i32 {
            any_equal.push(operator_call(INT4_EQ, segment_of(a, n, ours), segment_of(b, n, ours)));
        }
        pg_sys::make_orclause(any_equal.into_pg()).cast()
    }
}

/// `simhash_segment(probed, 0) = ANY(probes of other, 0) OR ... 3`, each segment probed within
/// its own radius of `radii` (`simhash_core::probes::segment_radii`).
///
/// # Safety
///
/// In a backend, in the planner's memory context; `probed` and `other` are valid expression nodes
/// (they are copied).
pub(crate) unsafe fn segment_candidates(
    probed: *mut Node,
    other: *mut Node,
    radii: [u32; 4],
    ours: &ExtensionObjects,
) -> *mut Node {
    unsafe {
        let mut any_probe = PgList::<Node>::new();
        for n in 0..SEGMENTS as i32 {
            let probes = segment_probes_of(other, n, radii[n as usize], ours);
            any_probe.push(int4_equal_any(segment_of(probed, n, ours), probes));
        }
        pg_sys::make_orclause(any_probe.into_pg()).cast()
    }
}

/// `simhash_bands(probed) && band probes of other`.
///
/// # Safety
///
/// In a backend, in the planner's memory context; `probed` and `other` are valid expression nodes
/// (they are copied).
pub(crate) unsafe fn band_candidates(
    probed: *mut Node,
    other: *mut Node,
    segment_radius: u32,
    ours: &ExtensionObjects,
) -> *mut Node {
    unsafe {
        let mut bands_args = PgList::<Node>::new();
        bands_args.push(copy(probed));
        let bands = function_call(ours.bands, pg_sys::INT4ARRAYOID, bands_args);
        operator_call(ARRAY_OVERLAP, bands, band_probes_of(other, segment_radius, ours))
    }
}

/// `simhash_segment(x, n)`, folded to a constant when `x` is a constant.
unsafe fn segment_of(x: *mut Node, n: i32, ours: &ExtensionObjects) -> *mut Node {
    unsafe {
        if let Some(fp) = const_fingerprint(x) {
            let value = simhash_core::segment(fp, n).expect("n < SEGMENTS");
            return int4_const(value as i32).cast();
        }
        let mut args = PgList::<Node>::new();
        args.push(copy(x));
        args.push(int4_const(n).cast());
        function_call(ours.segment, pg_sys::INT4OID, args)
    }
}

/// The values to probe segment `n` with: a constant array when `x` is a constant, else
/// `simhash_segment_probes(x, n, radius)`, computed once per scan.
unsafe fn segment_probes_of(x: *mut Node, n: i32, radius: u32, ours: &ExtensionObjects) -> *mut Node {
    unsafe {
        if let Some(fp) = const_fingerprint(x) {
            let value = simhash_core::segment(fp, n).expect("n < SEGMENTS");
            let probes = simhash_core::probes::segment_probes(value, radius);
            return int4_array_const(probes.into_iter().map(i32::from));
        }
        let mut args = PgList::<Node>::new();
        args.push(copy(x));
        args.push(int4_const(n).cast());
        args.push(int4_const(radius as i32).cast());
        function_call(ours.segment_probes, pg_sys::INT4ARRAYOID, args)
    }
}

/// The band keys to probe a GIN index with, constant-folded like [`segment_probes_of`].
unsafe fn band_probes_of(x: *mut Node, radius: u32, ours: &ExtensionObjects) -> *mut Node {
    unsafe {
        if let Some(fp) = const_fingerprint(x) {
            return int4_array_const(simhash_core::probes::band_probes(fp, radius).into_iter());
        }
        let mut args = PgList::<Node>::new();
        args.push(copy(x));
        args.push(int4_const(radius as i32).cast());
        function_call(ours.band_probes, pg_sys::INT4ARRAYOID, args)
    }
}

unsafe fn const_fingerprint(x: *mut Node) -> Option<u64> {
    unsafe {
        let x = strip_relabel(x);
        ((*x).type_ == NodeTag::T_Const && !(*(x as *mut pg_sys::Const)).constisnull)
            .then(|| (*(x as *mut pg_sys::Const)).constvalue.value() as u64)
    }
}

// ------------------------------------------------------------------------------------------------
// Matching (the radius scan)
// ------------------------------------------------------------------------------------------------

/// The parts of an exact test as [`exact_test`] builds it: the distance function (to be checked
/// against `hamming`), its two operands and the radius, which is one the probes can answer.
///
/// # Safety
///
/// `clause` points to a valid expression node, which is only read.
pub(crate) unsafe fn match_exact_test(clause: *mut Node) -> Option<(Oid, *mut Node, *mut Node, u32)> {
    unsafe {
        if (*clause).type_ != NodeTag::T_OpExpr || (*(clause as *mut pg_sys::OpExpr)).opno != Oid::from(INT4_LE.0) {
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
        let (funcid, args) = call_of((*(distance as *mut pg_sys::RelabelType)).arg.cast())?;
        let args = PgList::<Node>::from_pg(args);
        Some((funcid, args.get_ptr(0)?, args.get_ptr(1)?, radius))
    }
}

/// An OR of `simhash_segment(...) = ...` / `= ANY(...)`, or `simhash_bands(...) && ...`.
///
/// # Safety
///
/// `clause` points to a valid expression node, which is only read.
pub(crate) unsafe fn is_candidate_test(clause: *mut Node, functions: &[Oid; 2]) -> bool {
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
