//! The planner support function that turns a radius test into a pigeonhole index lookup.
//!
//! `<~>` returns the domain `simhash_distance`; the comparison operators `simhash_distance <= int`,
//! `< int`, and their commuted forms `int >= simhash_distance`, `int > simhash_distance` are
//! PostgreSQL's own int4/int8 comparisons with this function attached as SUPPORT. When the planner
//! simplifies `a <~> b <= k` with a constant `k` (0 <= k <= 3), it is replaced by
//!
//! ```sql
//! (simhash_segment(a, 0) = simhash_segment(b, 0) OR ... OR simhash_segment(a, 3) = simhash_segment(b, 3))
//!   AND (a <~> b)::integer <= k
//! ```
//!
//! which the four functional B-tree indexes `(simhash_segment(fp, n))` answer with a BitmapOr; the
//! second conjunct keeps the result exact. Both forms give the same value for every input, NULLs
//! included, so where the rewrite does not apply the original test simply runs as written.

use std::ffi::CStr;
use std::ptr::null_mut;

use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::datum::Internal;
use pgrx::PgList;

/// `int4 = int4` and `int4 <= int4` (stable catalog OIDs; pg_operator.dat names only the first).
const INT4_EQ_OPERATOR: Oid = Oid::from_u32(pg_sys::Int4EqualOperator);
const INT4_LE_OPERATOR: Oid = Oid::from_u32(523);

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
        if node.is_null() || (*node).type_ != NodeTag::T_SupportRequestSimplify {
            return None;
        }
        let fcall = (*(node as *mut pg_sys::SupportRequestSimplify)).fcall;
        let test = RadiusTest::of((*fcall).funcid)?;
        let args = PgList::<Node>::from_pg((*fcall).args);
        let (distance, bound) = if test.commuted {
            (args.get_ptr(1)?, args.get_ptr(0)?)
        } else {
            (args.get_ptr(0)?, args.get_ptr(1)?)
        };

        // Only a constant, non-NULL bound. (All-constant calls were folded before we are asked.)
        let radius = test.radius(const_integer(bound)?)?;
        if !(0..=simhash_core::distance::PIGEONHOLE_RADIUS as i64).contains(&radius) {
            return None;
        }

        // The distance must be exactly our hamming(simhash64, simhash64), from our schema.
        let ours = ExtensionObjects::lookup(pg_sys::get_func_namespace((*fcall).funcid))?;
        let (hamming_fn, hamming_args) = call_of(distance)?;
        if hamming_fn != ours.hamming {
            return None;
        }
        let hamming_args = PgList::<Node>::from_pg(hamming_args);
        let (a, b) = (hamming_args.get_ptr(0)?, hamming_args.get_ptr(1)?);

        // Each operand is copied into five places, so it must be cheap to evaluate repeatedly.
        if !ours.is_cheap(a) || !ours.is_cheap(b) {
            return None;
        }
        let segment_fn = ours.segment;

        let mut any_segment_equal = PgList::<Node>::new();
        for n in 0..simhash_core::SEGMENTS as i32 {
            let equal = pg_sys::make_opclause(
                INT4_EQ_OPERATOR,
                pg_sys::BOOLOID,
                false,
                segment_of(a, n, segment_fn).cast(),
                segment_of(b, n, segment_fn).cast(),
                Oid::INVALID,
                Oid::INVALID,
            );
            (*(equal as *mut pg_sys::OpExpr)).opfuncid = Oid::from_u32(pg_sys::F_INT4EQ);
            any_segment_equal.push(equal.cast());
        }

        let as_int4 = pg_sys::makeRelabelType(
            copy(distance).cast(),
            pg_sys::INT4OID,
            -1,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
        );
        let exact = pg_sys::make_opclause(
            INT4_LE_OPERATOR,
            pg_sys::BOOLOID,
            false,
            as_int4.cast(),
            int4_const(radius as i32).cast(),
            Oid::INVALID,
            Oid::INVALID,
        );
        (*(exact as *mut pg_sys::OpExpr)).opfuncid = Oid::from_u32(pg_sys::F_INT4LE);

        // The exact test first: in a select list the AND is evaluated in this order.
        let mut both = PgList::<Node>::new();
        both.push(exact.cast());
        both.push(pg_sys::make_orclause(any_segment_equal.into_pg()).cast());
        Some(pg_sys::make_andclause(both.into_pg()).cast())
    }
}

/// Which comparison a support call is for, read from the function's name in sql/simhash.sql.
struct RadiusTest {
    /// `k > d` / `d < k` rather than `k >= d` / `d <= k`.
    strict: bool,
    /// The bound is the first argument (`k >= d`).
    commuted: bool,
}

impl RadiusTest {
    unsafe fn of(funcid: Oid) -> Option<Self> {
        let name = unsafe { func_name(funcid) }?;
        let (strict, commuted) = match name.as_str() {
            "simhash_distance_le" => (false, false),
            "simhash_distance_lt" => (true, false),
            "simhash_distance_le_commuted" => (false, true),
            "simhash_distance_lt_commuted" => (true, true),
            _ => return None,
        };
        Some(RadiusTest { strict, commuted })
    }

    /// The largest distance that passes, for a bound `k`.
    fn radius(&self, k: i64) -> Option<i64> {
        if self.strict { k.checked_sub(1) } else { Some(k) }
    }
}

unsafe fn func_name(funcid: Oid) -> Option<String> {
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// The value of a non-NULL integer constant (int2, int4, int8, or a domain over one of them:
/// `<= '3'` arrives as a `simhash_distance` constant).
unsafe fn const_integer(node: *mut Node) -> Option<i64> {
    unsafe {
        if (*node).type_ != NodeTag::T_Const {
            return None;
        }
        let c = node as *mut pg_sys::Const;
        if (*c).constisnull {
            return None;
        }
        let datum = (*c).constvalue.value();
        match pg_sys::getBaseType((*c).consttype) {
            pg_sys::INT2OID => Some(datum as i16 as i64),
            pg_sys::INT4OID => Some(datum as i32 as i64),
            pg_sys::INT8OID => Some(datum as i64),
            _ => None,
        }
    }
}

/// The function and argument list of a function call or operator expression.
unsafe fn call_of(node: *mut Node) -> Option<(Oid, *mut pg_sys::List)> {
    unsafe {
        match (*node).type_ {
            NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                Some(((*f).funcid, (*f).args))
            }
            NodeTag::T_OpExpr => {
                // Read, never write: the tree belongs to the caller.
                let op = node as *mut pg_sys::OpExpr;
                let funcid = if (*op).opfuncid == Oid::INVALID { pg_sys::get_opcode((*op).opno) } else { (*op).opfuncid };
                Some((funcid, (*op).args))
            }
            _ => None,
        }
    }
}

/// The extension's own objects in its schema, found through the system caches: exact signatures,
/// and no permission check (a user may query a view without USAGE on the extension's schema).
struct ExtensionObjects {
    simhash64: Oid,
    hamming: Oid,
    segment: Oid,
    simhash_text: Oid,
}

impl ExtensionObjects {
    unsafe fn lookup(schema: Oid) -> Option<Self> {
        unsafe {
            let simhash64 = pg_sys::GetSysCacheOid(
                pg_sys::SysCacheIdentifier::TYPENAMENSP as i32,
                pg_sys::Anum_pg_type_oid as i16,
                Datum::from(c"simhash64".as_ptr()),
                Datum::from(schema.to_u32()),
                Datum::from(0),
                Datum::from(0),
            );
            if simhash64 == Oid::INVALID {
                return None;
            }
            Some(ExtensionObjects {
                simhash64,
                hamming: function_oid(schema, c"hamming", &[simhash64, simhash64])?,
                segment: function_oid(schema, c"simhash_segment", &[simhash64, pg_sys::INT4OID])?,
                simhash_text: function_oid(schema, c"simhash", &[pg_sys::TEXTOID])?,
            })
        }
    }

    /// Cheap enough to evaluate in several places, and a simhash64: a column, a constant, a
    /// parameter, or `simhash()` of a constant or parameter (one text per execution, which the
    /// backend's memo in `fingerprint.rs` fingerprints once). Anything else, sub-selects included,
    /// would run once per copy, so those queries keep their original form.
    unsafe fn is_cheap(&self, node: *mut Node) -> bool {
        unsafe {
            if pg_sys::getBaseType(pg_sys::exprType(node)) != self.simhash64 {
                return false;
            }
            match (*node).type_ {
                NodeTag::T_FuncExpr => {
                    let f = node as *mut pg_sys::FuncExpr;
                    (*f).funcid == self.simhash_text
                        && PgList::<Node>::from_pg((*f).args).iter_ptr().all(|arg| is_param_or_const(arg))
                }
                _ => is_plain_operand(node),
            }
        }
    }
}

/// A column, a parameter or a non-NULL constant, possibly relabelled (a domain over simhash64).
unsafe fn is_plain_operand(node: *mut Node) -> bool {
    unsafe {
        match (*node).type_ {
            NodeTag::T_Var => true,
            NodeTag::T_RelabelType => is_plain_operand((*(node as *mut pg_sys::RelabelType)).arg.cast()),
            _ => is_param_or_const(node),
        }
    }
}

unsafe fn is_param_or_const(node: *mut Node) -> bool {
    unsafe {
        match (*node).type_ {
            NodeTag::T_Param => true,
            NodeTag::T_Const => !(*(node as *mut pg_sys::Const)).constisnull,
            NodeTag::T_RelabelType => is_param_or_const((*(node as *mut pg_sys::RelabelType)).arg.cast()),
            _ => false,
        }
    }
}

unsafe fn function_oid(schema: Oid, name: &CStr, arg_types: &[Oid]) -> Option<Oid> {
    unsafe {
        let args = pg_sys::buildoidvector(arg_types.as_ptr(), arg_types.len() as i32);
        let oid = pg_sys::GetSysCacheOid(
            pg_sys::SysCacheIdentifier::PROCNAMEARGSNSP as i32,
            pg_sys::Anum_pg_proc_oid as i16,
            Datum::from(name.as_ptr()),
            Datum::from(args),
            Datum::from(schema.to_u32()),
            Datum::from(0),
        );
        (oid != Oid::INVALID).then_some(oid)
    }
}

/// `simhash_segment(x, n)`, folded to a constant when `x` is a constant.
unsafe fn segment_of(x: *mut Node, n: i32, segment_fn: Oid) -> *mut Node {
    unsafe {
        if (*x).type_ == NodeTag::T_Const {
            let fp = (*(x as *mut pg_sys::Const)).constvalue.value() as u64;
            let value = simhash_core::segment(fp, n).expect("n is a valid segment number");
            return int4_const(value as i32).cast();
        }
        let mut args = PgList::<Node>::new();
        args.push(copy(x));
        args.push(int4_const(n).cast());
        pg_sys::makeFuncExpr(
            segment_fn,
            pg_sys::INT4OID,
            args.into_pg(),
            Oid::INVALID,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

unsafe fn int4_const(value: i32) -> *mut pg_sys::Const {
    unsafe { pg_sys::makeConst(pg_sys::INT4OID, -1, Oid::INVALID, 4, Datum::from(value), false, true) }
}

unsafe fn copy(node: *mut Node) -> *mut Node {
    unsafe { pg_sys::copyObjectImpl(node.cast()).cast() }
}
