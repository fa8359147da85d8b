//! Planner nodes: reading the expressions PostgreSQL hands us (constants, calls, relabels) and
//! building the ones we hand back (calls, operators, constants), with the built-in operators the
//! rewrite emits.

use std::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

/// A built-in boolean operator: its OID and its function's (stable catalog OIDs; pg_operator.dat
/// names no symbol for int4 <=). These are the operators of the rewritten radius test
/// (`crate::lookup::shape`).
pub(crate) type BuiltinOperator = (u32, u32);
pub(crate) const INT4_EQ: BuiltinOperator = (pg_sys::Int4EqualOperator, pg_sys::F_INT4EQ);
pub(crate) const INT4_LE: BuiltinOperator = (523, pg_sys::F_INT4LE);
pub(crate) const ARRAY_OVERLAP: BuiltinOperator = (pg_sys::OID_ARRAY_OVERLAP_OP, pg_sys::F_ARRAYOVERLAP);

/// # Safety
///
/// In a backend; any `funcid` (an unknown one gives `None`).
pub(crate) unsafe fn func_name(funcid: Oid) -> Option<String> {
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// The value of a non-NULL integer constant (int2, int4, int8, or a domain over one of them:
/// `<= '3'` arrives as a `simhash_distance` constant).
pub(crate) unsafe fn const_integer(node: *mut Node) -> Option<i64> {
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
///
/// # Safety
///
/// `node` points to a valid expression node, which is only read.
pub(crate) unsafe fn call_of(node: *mut Node) -> Option<(Oid, *mut pg_sys::List)> {
    unsafe {
        match (*node).type_ {
            NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                Some(((*f).funcid, (*f).args))
            }
            NodeTag::T_OpExpr => {
                // Read, never write: the tree belongs to the caller.
                let op = node as *mut pg_sys::OpExpr;
                let funcid =
                    if (*op).opfuncid == Oid::INVALID { pg_sys::get_opcode((*op).opno) } else { (*op).opfuncid };
                Some((funcid, (*op).args))
            }
            _ => None,
        }
    }
}

/// # Safety
///
/// `node` points to a valid expression node, which is only read.
pub(crate) unsafe fn strip_relabel(mut node: *mut Node) -> *mut Node {
    unsafe {
        while (*node).type_ == NodeTag::T_RelabelType {
            node = (*(node as *mut pg_sys::RelabelType)).arg.cast();
        }
        node
    }
}

pub(crate) unsafe fn is_param_or_const(node: *mut Node) -> bool {
    unsafe {
        let node = strip_relabel(node);
        match (*node).type_ {
            NodeTag::T_Param => true,
            NodeTag::T_Const => !(*(node as *mut pg_sys::Const)).constisnull,
            _ => false,
        }
    }
}

/// # Safety
///
/// In a backend, in the memory context the new node is to live in (it is palloc'd); `args` are
/// valid nodes the new call takes over.
pub(crate) unsafe fn function_call(funcid: Oid, result_type: Oid, args: PgList<Node>) -> *mut Node {
    unsafe {
        pg_sys::makeFuncExpr(
            funcid,
            result_type,
            args.into_pg(),
            Oid::INVALID,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

/// `left OP right`, with the operator's function filled in (the planner expects it set).
///
/// # Safety
///
/// In a backend, in the memory context the new node is to live in; `left` and `right` are valid
/// nodes the new expression takes over.
pub(crate) unsafe fn operator_call((opno, funcid): BuiltinOperator, left: *mut Node, right: *mut Node) -> *mut Node {
    unsafe {
        let call = pg_sys::make_opclause(
            Oid::from_u32(opno),
            pg_sys::BOOLOID,
            false,
            left.cast(),
            right.cast(),
            Oid::INVALID,
            Oid::INVALID,
        );
        (*(call as *mut pg_sys::OpExpr)).opfuncid = Oid::from_u32(funcid);
        call.cast()
    }
}

/// `left = ANY(right)` for an int4 and an int4[].
///
/// # Safety
///
/// In a backend, in the memory context the new node is to live in; `left` and `right` are valid
/// nodes the new expression takes over.
pub(crate) unsafe fn int4_equal_any(left: *mut Node, right: *mut Node) -> *mut Node {
    unsafe {
        let mut args = PgList::<Node>::new();
        args.push(left);
        args.push(right);
        let mut any = PgBox::<pg_sys::ScalarArrayOpExpr>::alloc_node(NodeTag::T_ScalarArrayOpExpr);
        any.opno = Oid::from_u32(INT4_EQ.0);
        any.opfuncid = Oid::from_u32(INT4_EQ.1);
        any.useOr = true;
        any.args = args.into_pg();
        any.location = -1;
        any.into_pg().cast()
    }
}

/// # Safety
///
/// In a backend, in the memory context the new constant is to live in.
pub(crate) unsafe fn int4_array_const(values: impl Iterator<Item = i32>) -> *mut Node {
    unsafe {
        let datums: Vec<Datum> = values.map(Datum::from).collect();
        let array = pg_sys::construct_array(
            datums.as_ptr() as *mut Datum,
            datums.len() as i32,
            pg_sys::INT4OID,
            4,
            true,
            pg_sys::TYPALIGN_INT as _,
        );
        pg_sys::makeConst(pg_sys::INT4ARRAYOID, -1, Oid::INVALID, -1, Datum::from(array), false, false).cast()
    }
}

/// # Safety
///
/// In a backend, in the memory context the new constant is to live in.
pub(crate) unsafe fn int4_const(value: i32) -> *mut pg_sys::Const {
    unsafe { pg_sys::makeConst(pg_sys::INT4OID, -1, Oid::INVALID, 4, Datum::from(value), false, true) }
}

pub(crate) unsafe fn copy(node: *mut Node) -> *mut Node {
    unsafe { pg_sys::copyObjectImpl(node.cast()).cast() }
}

pub(crate) unsafe fn integer(value: i32) -> *mut Node {
    unsafe { pg_sys::makeInteger(value).cast() }
}

/// # Safety
///
/// `list` holds `Integer` nodes at least up to `i` (the custom private lists built by the radius
/// scan).
pub(crate) unsafe fn integer_at(list: &PgList<Node>, i: usize) -> i32 {
    unsafe { (*(list.get_ptr(i).expect("custom private list") as *mut pg_sys::Integer)).ival }
}

/// Field `n` (1-based) of a non-NULL composite value (`None` when the field is NULL), as the ball
/// types' operators read them.
///
/// # Safety
///
/// `composite` is a non-NULL value of a composite type with at least `n` fields.
pub(crate) unsafe fn composite_field(composite: Datum, n: i16) -> Option<Datum> {
    unsafe {
        let tuple = pg_sys::pg_detoast_datum(composite.cast_mut_ptr()) as pg_sys::HeapTupleHeader;
        let mut isnull = false;
        let field = pg_sys::GetAttributeByNum(tuple, n, &mut isnull);
        (!isnull).then_some(field)
    }
}
