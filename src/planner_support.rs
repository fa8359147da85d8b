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

        // The distance must be our hamming() (the function behind <~>), from our schema.
        let schema = pg_sys::get_func_namespace((*fcall).funcid);
        let (hamming_fn, hamming_args) = call_of(distance)?;
        if !is_our_function(hamming_fn, schema, c"hamming") {
            return None;
        }
        let hamming_args = PgList::<Node>::from_pg(hamming_args);
        let (a, b) = (hamming_args.get_ptr(0)?, hamming_args.get_ptr(1)?);

        // Each operand is copied into five places, so it must be cheap to evaluate repeatedly.
        if !is_cheap(a, schema) || !is_cheap(b, schema) {
            return None;
        }
        let segment_fn = lookup_segment_function(schema, pg_sys::exprType(a))?;

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

        let mut both = PgList::<Node>::new();
        both.push(pg_sys::make_orclause(any_segment_equal.into_pg()).cast());
        both.push(exact.cast());
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

unsafe fn is_our_function(funcid: Oid, schema: Oid, name: &CStr) -> bool {
    unsafe {
        pg_sys::get_func_namespace(funcid) == schema
            && func_name(funcid).as_deref() == Some(name.to_str().expect("ASCII name"))
    }
}

/// The value of an int4 or int8 constant that is not NULL.
unsafe fn const_integer(node: *mut Node) -> Option<i64> {
    unsafe {
        if (*node).type_ != NodeTag::T_Const {
            return None;
        }
        let c = node as *mut pg_sys::Const;
        if (*c).constisnull {
            return None;
        }
        match (*c).consttype {
            pg_sys::INT4OID => Some((*c).constvalue.value() as i32 as i64),
            pg_sys::INT8OID => Some((*c).constvalue.value() as i64),
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
                let op = node as *mut pg_sys::OpExpr;
                pg_sys::set_opfuncid(op);
                Some(((*op).opfuncid, (*op).args))
            }
            _ => None,
        }
    }
}

/// Cheap enough to evaluate in several places: a column, a constant, a parameter, or `simhash()`
/// of such (memoised per backend, see `fingerprint.rs`). Sub-selects and other function calls are
/// not: duplicating them would run them once per copy, so those queries keep their original form.
unsafe fn is_cheap(node: *mut Node, schema: Oid) -> bool {
    unsafe {
        match (*node).type_ {
            NodeTag::T_Var | NodeTag::T_Param => true,
            NodeTag::T_Const => !(*(node as *mut pg_sys::Const)).constisnull,
            NodeTag::T_RelabelType => is_cheap((*(node as *mut pg_sys::RelabelType)).arg.cast(), schema),
            NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                is_our_function((*f).funcid, schema, c"simhash")
                    && PgList::<Node>::from_pg((*f).args).iter_ptr().all(|arg| is_cheap(arg, schema))
            }
            _ => false,
        }
    }
}

/// `schema.simhash_segment(simhash64, int4)`, looked up schema-qualified (never via search_path).
unsafe fn lookup_segment_function(schema: Oid, simhash64: Oid) -> Option<Oid> {
    unsafe {
        let schema_name = pg_sys::get_namespace_name(schema);
        if schema_name.is_null() {
            return None;
        }
        let mut name = PgList::<pg_sys::String>::new();
        name.push(pg_sys::makeString(schema_name));
        name.push(pg_sys::makeString(pg_sys::pstrdup(c"simhash_segment".as_ptr())));
        let arg_types = [simhash64, pg_sys::INT4OID];
        let oid = pg_sys::LookupFuncName(name.into_pg(), 2, arg_types.as_ptr(), true);
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
