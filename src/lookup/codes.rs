//! Codes of any length (`bit(n)`, `crate::codes`) in the planner: the radius tests and orders a
//! `simhash` index of `bit` codes (operator class `simhash_bit_ops`) answers, in the forms users
//! write.
//!
//! - **`simhash_hamming(code, q) <= k`** (or `<`, or commuted): `simhash_hamming` returns the domain
//!   `simhash_distance`, so the comparison carries the planner support function
//!   (`super::support`), which hands it here: when `code` is a `bit` column with a `simhash` index,
//!   or an expression with one of its own (`simhash_code(hash)`, `super::expression`), the test
//!   becomes `code <@ simhash_code_ball(q, k)`, the index's operator. Exact for every input
//!   (both raise 22026 for unequal lengths; NULL for NULL), so nothing else is kept.
//! - **pgvector's `code <~> q <= k`** (its `hamming_distance(bit, bit)`, float8, under pg_catalog's
//!   float8 comparison, to which no support function of ours can be attached): the planner hook
//!   finds it among a table's restrictions and offers index paths on the same index with the
//!   clause `code <@ simhash_code_ball(q, floor(k))` as their index condition, keeping the original
//!   as a filter (an exact one: the same rows); in a join, `a.code <~> b.code <= k`, a path
//!   parameterized by the other side, for the inner side of a nested loop. pgvector's operator is
//!   recognised by its function:
//!   `hamming_distance(bit, bit) → float8`, a member of extension `vector`; never by name alone.
//! - **`ORDER BY simhash_hamming(code, q)`** and pgvector's **`ORDER BY code <~> q`**: the hook
//!   offers the index's ordered scan (`code <-> simhash_code_ball(q, 0)`, integer, or
//!   `code <~> simhash_code_ball(q, 0)`, float8, whichever order the query's sort key has) with the
//!   query's own sort keys, carrying the radius tests the index answers (as `super::order_path`
//!   does for simhash64).

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::PgList;

use super::catalog::{CodeObjects, ColumnIndexes, ExtensionObjects};
use crate::pg::nodes::{call_of, copy, int4_const, strip_relabel};

/// The ordering strategies of `simhash_bit_ops`: `<->` (integer) and `<~>` (float8).
const ORDER_BY_INTEGER: i16 = 2;
const ORDER_BY_FLOAT: i16 = 3;

/// The support function's rewrite of `simhash_hamming(a, b) <= radius`: `col <@ ball(other,
/// radius)` for each operand that is a `bit` column of this query level with a `simhash` index and
/// whose other operand is not a column of the same row (both, ANDed, in a join of two such
/// columns); else `expr <@ ball(other, radius)` for each operand that is an indexed expression of
/// one table (`super::expression`); `None` to leave the test as written.
///
/// # Safety
///
/// Called by the support function with the planner's state and the call's arguments.
pub(super) unsafe fn rewrite_hamming_test(
    root: *mut pg_sys::PlannerInfo,
    a: *mut Node,
    b: *mut Node,
    radius: u32,
    ours: &ExtensionObjects,
    codes: &CodeObjects,
) -> Option<*mut Node> {
    unsafe {
        let rtable = (*(*root).parse).rtable;
        let mut tests = PgList::<Node>::new();
        for (probed, other) in [(a, b), (b, a)] {
            let Some(var) = column(probed) else { continue };
            if column(other).is_some_and(|o| (*o).varno == (*var).varno) {
                continue;
            }
            let Some(relid) = relation_of(rtable, var) else { continue };
            if has_code_index(relid, (*var).varattno, ours) {
                tests.push(within_ball(probed, other, radius, codes));
            }
        }
        if tests.is_empty() {
            // an expression with an index of its own, `simhash_code(hash)` (`super::expression`)
            for (probed, other) in super::expression::indexed_expressions(root, a, b, ours) {
                tests.push(within_ball(probed, other, radius, codes));
            }
        }
        match tests.len() {
            0 => None,
            1 => tests.get_ptr(0),
            _ => Some(pg_sys::make_andclause(tests.into_pg()).cast()),
        }
    }
}

/// A column of this query level (under any relabelling).
unsafe fn column(node: *mut Node) -> Option<*mut pg_sys::Var> {
    unsafe {
        let var = strip_relabel(node);
        ((*var).type_ == NodeTag::T_Var && (*(var as *mut pg_sys::Var)).varlevelsup == 0)
            .then_some(var as *mut pg_sys::Var)
    }
}

/// The table of `var` in `rtable`, when it is a user column of a table whose type is `bit` or
/// `bit varying` (or a domain over one: the index of codes takes both; without `bit varying`, the
/// near-duplicate constraint's lookups on such a column scanned the table at every row).
unsafe fn relation_of(rtable: *mut pg_sys::List, var: *mut pg_sys::Var) -> Option<Oid> {
    unsafe {
        // (as `super::support::probe_targets`: a Var need not belong to this range table)
        if (*var).varno < 1 || (*var).varno as usize > PgList::<Node>::from_pg(rtable).len() || (*var).varattno < 1 {
            return None;
        }
        let rte = pg_sys::list_nth(rtable, (*var).varno - 1) as *mut pg_sys::RangeTblEntry;
        if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            return None;
        }
        // (InvalidOid when that table has no such column: getBaseType would fail on it)
        let atttype = pg_sys::get_atttype((*rte).relid, (*var).varattno);
        let base = if atttype == Oid::INVALID { Oid::INVALID } else { pg_sys::getBaseType(atttype) };
        (base == pg_sys::BITOID || base == pg_sys::VARBITOID).then_some((*rte).relid)
    }
}

/// Whether column `attno` of table `relid` has a valid, whole `simhash` index of its own.
unsafe fn has_code_index(relid: Oid, attno: i16, ours: &ExtensionObjects) -> bool {
    unsafe { ColumnIndexes::of(relid, attno, ours).is_some_and(|indexes| indexes.own_index().is_some()) }
}

/// `probed <@ ROW(other, radius)::simhash_code_ball`.
unsafe fn within_ball(probed: *mut Node, other: *mut Node, radius: u32, codes: &CodeObjects) -> *mut Node {
    unsafe {
        let call = pg_sys::make_opclause(
            codes.within,
            pg_sys::BOOLOID,
            false,
            copy(probed).cast(),
            ball(other, radius, codes).cast(),
            Oid::INVALID,
            Oid::INVALID,
        );
        (*(call as *mut pg_sys::OpExpr)).opfuncid = codes.within_function;
        call.cast()
    }
}

/// `ROW(center, radius)::simhash_code_ball` (the center relabelled to `bit varying`, the field's
/// type, as the parser does for `bit`).
unsafe fn ball(center: *mut Node, radius: u32, codes: &CodeObjects) -> *mut Node {
    unsafe {
        let mut row = pgrx::PgBox::<pg_sys::RowExpr>::alloc_node(NodeTag::T_RowExpr);
        let mut args = PgList::<Node>::new();
        let center = if pg_sys::exprType(center) == pg_sys::VARBITOID {
            copy(center)
        } else {
            pg_sys::makeRelabelType(
                copy(center).cast(),
                pg_sys::VARBITOID,
                -1,
                Oid::INVALID,
                pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
            )
            .cast()
        };
        args.push(center);
        args.push(int4_const(radius.min(i32::MAX as u32) as i32).cast());
        row.args = args.into_pg();
        row.row_typeid = codes.ball_type;
        row.row_format = pg_sys::CoercionForm::COERCE_EXPLICIT_CAST;
        row.location = -1;
        row.into_pg().cast()
    }
}

/// The arguments of a call of pgvector's `hamming_distance(bit, bit) → float8` (its `<~>`), found
/// by the function's membership in extension `vector`.
unsafe fn pgvector_hamming(node: *mut Node) -> Option<(*mut Node, *mut Node)> {
    unsafe {
        let node = strip_relabel(node);
        let (function, args) = call_of(node)?;
        let args = PgList::<Node>::from_pg(args);
        if args.len() != 2
            || pg_sys::get_func_rettype(function) != pg_sys::FLOAT8OID
            || [args.get_ptr(0)?, args.get_ptr(1)?].iter().any(|&arg| pg_sys::exprType(arg) != pg_sys::BITOID)
        {
            return None;
        }
        let vector = pg_sys::get_extension_oid(c"vector".as_ptr(), true);
        let name = crate::pg::nodes::func_name(function)?;
        (vector != Oid::INVALID
            && name == "hamming_distance"
            && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, function) == vector)
            .then(|| (args.get_ptr(0).unwrap(), args.get_ptr(1).unwrap()))
    }
}

/// A radius test of pgvector's distance, `d <= k`, `d < k`, `k >= d` or `k > d` with a constant
/// `k`: the distance call and the largest distance that passes (`None` for NaN or a negative
/// bound, which no index lookup helps).
unsafe fn pgvector_radius_test(clause: *mut Node) -> Option<(*mut Node, u32)> {
    unsafe {
        if (*clause).type_ != NodeTag::T_OpExpr {
            return None;
        }
        let (function, args) = call_of(clause)?;
        let args = PgList::<Node>::from_pg(args);
        let (strict, commuted) = match function.to_u32() {
            pg_sys::F_FLOAT8LE => (false, false),
            pg_sys::F_FLOAT8LT => (true, false),
            pg_sys::F_FLOAT8GE => (false, true),
            pg_sys::F_FLOAT8GT => (true, true),
            _ => return None,
        };
        let (distance, bound) =
            if commuted { (args.get_ptr(1)?, args.get_ptr(0)?) } else { (args.get_ptr(0)?, args.get_ptr(1)?) };
        let bound = strip_relabel(bound);
        if (*bound).type_ != NodeTag::T_Const || (*(bound as *mut pg_sys::Const)).constisnull {
            return None;
        }
        let k = f64::from_bits((*(bound as *mut pg_sys::Const)).constvalue.value() as u64);
        let radius = if strict { k.ceil() - 1.0 } else { k.floor() };
        if radius.is_nan() || radius < 0.0 {
            return None;
        }
        pgvector_hamming(distance)?;
        Some((distance, radius.min(f64::from(simhash_core::multi_index::MAX_CODE_BITS)) as u32))
    }
}

/// The `simhash` indexes of `bit` codes of `rel` that may serve a plain (unparameterized) scan,
/// each with the objects of the extension that defined its operator class.
unsafe fn code_indexes(rel: *mut pg_sys::RelOptInfo) -> Vec<(*mut pg_sys::IndexOptInfo, CodeObjects)> {
    unsafe {
        let access_method = pg_sys::get_index_am_oid(c"simhash".as_ptr(), true);
        if access_method == Oid::INVALID {
            return Vec::new();
        }
        let mut found = Vec::new();
        for index in PgList::<pg_sys::IndexOptInfo>::from_pg((*rel).indexlist).iter_ptr() {
            let partial_unusable = !(*index).indpred.is_null() && !(*index).predOK;
            if (*index).relam != access_method
                || (*index).nkeycolumns != 1
                || *(*index).opcintype != pg_sys::BITOID
                || partial_unusable
            {
                continue;
            }
            // The operator class is in the extension's schema, beside the objects it names.
            let Some(schema) = crate::pg::names::opfamily_namespace(*(*index).opfamily) else { continue };
            if let Some(codes) = ExtensionObjects::lookup(schema).and_then(|ours| ours.codes) {
                found.push((index, codes));
            }
        }
        found
    }
}

/// Offers, for each restriction of `rel` that is pgvector's `code <~> q <= k` over an indexed `bit`
/// column with a fixed `q`, a plain and a bitmap index path on that index.
///
/// # Safety
///
/// Called from `set_rel_pathlist_hook` with its arguments, for a plain table.
pub(super) unsafe fn offer_pgvector_radius_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo) {
    unsafe {
        if (*rel).indexlist.is_null() || (*rel).baserestrictinfo.is_null() {
            return;
        }
        let mut found = Vec::new();
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).baserestrictinfo).iter_ptr() {
            if (*rinfo).pseudoconstant || !pg_sys::restriction_is_securely_promotable(rinfo, rel) {
                continue;
            }
            if let Some((distance, radius)) = pgvector_radius_test((*rinfo).clause.cast()) {
                found.push((rinfo, distance, radius));
            }
        }
        if found.is_empty() {
            return;
        }
        for (index, codes) in code_indexes(rel) {
            let mut clauses = PgList::<pg_sys::IndexClause>::new();
            for &(rinfo, distance, radius) in &found {
                let Some((column, query)) = fixed_operands(root, index, distance) else { continue };
                clauses.push(index_clause(root, rinfo, within_ball(column, query, radius, &codes)));
            }
            if !clauses.is_empty() {
                add_index_paths(root, rel, index, clauses.into_pg(), std::ptr::null_mut());
            }
        }
    }
}

/// The index condition `test` derived from the query's clause `rinfo`, which stays as a filter
/// (exact, so it drops no row the index returns).
unsafe fn index_clause(
    root: *mut pg_sys::PlannerInfo,
    rinfo: *mut pg_sys::RestrictInfo,
    test: *mut Node,
) -> *mut pg_sys::IndexClause {
    unsafe {
        let derived = crate::pg::compat::make_simple_restrictinfo(root, test.cast(), (*rinfo).security_level);
        let mut clause = pgrx::PgBox::<pg_sys::IndexClause>::alloc_node(NodeTag::T_IndexClause);
        clause.rinfo = rinfo;
        clause.indexquals = pg_sys::lappend(std::ptr::null_mut(), derived.cast());
        clause.lossy = true;
        clause.indexcol = 0;
        clause.into_pg()
    }
}

/// Adds a plain and a bitmap scan of `index` with `clauses` to `rel`'s paths, parameterized by
/// `outer` (NULL: none).
unsafe fn add_index_paths(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    index: *mut pg_sys::IndexOptInfo,
    clauses: *mut pg_sys::List,
    outer: *mut pg_sys::Bitmapset,
) {
    unsafe {
        let path = pg_sys::create_index_path(
            root,
            index,
            clauses,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            pg_sys::ScanDirection::ForwardScanDirection,
            false,
            outer,
            1.0,
            false,
        );
        pg_sys::add_path(rel, path.cast());
        let bitmap = pg_sys::create_bitmap_heap_path(root, rel, path.cast(), outer, 1.0, 0);
        pg_sys::add_path(rel, bitmap.cast());
    }
}

/// Offers, for each join clause of `rel` that is pgvector's `code <~> other.code <= k` (or with an
/// expression of other tables in place of `other.code`) over an indexed `bit` column, a plain and
/// a bitmap index path parameterized by the other side: the inner side of a nested loop, probing
/// the index once per outer row.
///
/// # Safety
///
/// Called from `set_rel_pathlist_hook` with its arguments, for a plain table.
pub(super) unsafe fn offer_pgvector_join_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo) {
    unsafe {
        if (*rel).indexlist.is_null() || (*rel).joininfo.is_null() {
            return;
        }
        let mut found = Vec::new();
        for rinfo in PgList::<pg_sys::RestrictInfo>::from_pg((*rel).joininfo).iter_ptr() {
            // (as for a restriction, not a test of ours, which is not leakproof, below a security
            // policy of the table that it could run before)
            if !pg_sys::restriction_is_securely_promotable(rinfo, rel) {
                continue;
            }
            if let Some((distance, radius)) = pgvector_radius_test((*rinfo).clause.cast()) {
                found.push((rinfo, distance, radius));
            }
        }
        if found.is_empty() {
            return;
        }
        for (index, codes) in code_indexes(rel) {
            for &(rinfo, distance, radius) in &found {
                let Some((column, query, outer)) = index_operands(root, index, distance) else { continue };
                if super::radius_path::join_param_info(root, rel, rinfo, outer).is_none() {
                    continue;
                }
                let clause = index_clause(root, rinfo, within_ball(column, query, radius, &codes));
                add_index_paths(root, rel, index, pg_sys::lappend(std::ptr::null_mut(), clause.cast()), outer);
            }
        }
    }
}

/// For a distance call `f(a, b)`: the operand that is `index`'s column, the other (nothing
/// volatile, no column of the index's table), and the tables that other reads (empty: it is fixed
/// for the scan; else the scan is the inner side of a join).
unsafe fn index_operands(
    root: *mut pg_sys::PlannerInfo,
    index: *mut pg_sys::IndexOptInfo,
    distance: *mut Node,
) -> Option<(*mut Node, *mut Node, *mut pg_sys::Bitmapset)> {
    unsafe {
        let (_, args) = call_of(strip_relabel(distance))?;
        let args = PgList::<Node>::from_pg(args);
        let (a, b) = (args.get_ptr(0)?, args.get_ptr(1)?);
        for (column, query) in [(a, b), (b, a)] {
            if pg_sys::contain_volatile_functions(query) {
                continue;
            }
            let outer = pg_sys::pull_varnos(root, query);
            if !pg_sys::bms_is_member((*(*index).rel).relid as i32, outer)
                && pg_sys::match_index_to_operand(column, 0, index)
            {
                return Some((column, query, outer));
            }
        }
        None
    }
}

/// [`index_operands`] whose other operand is fixed for the scan.
unsafe fn fixed_operands(
    root: *mut pg_sys::PlannerInfo,
    index: *mut pg_sys::IndexOptInfo,
    distance: *mut Node,
) -> Option<(*mut Node, *mut Node)> {
    unsafe {
        index_operands(root, index, distance)
            .filter(|&(_, _, outer)| crate::pg::compat::bms_is_empty(outer))
            .map(|(column, query, _)| (column, query))
    }
}

/// Offers, for a query ordered by `simhash_hamming(code, q)` or pgvector's `code <~> q` (all its
/// sort keys such distances to one indexed `bit` column), the index's ordered scan.
///
/// # Safety
///
/// Called from `set_rel_pathlist_hook` with its arguments, for a plain table.
pub(super) unsafe fn offer_order_paths(root: *mut pg_sys::PlannerInfo, rel: *mut pg_sys::RelOptInfo) {
    unsafe {
        let pathkeys = PgList::<pg_sys::PathKey>::from_pg((*root).query_pathkeys);
        if pathkeys.is_empty() || (*rel).indexlist.is_null() {
            return;
        }
        for (index, codes) in code_indexes(rel) {
            if !(*index).amcanorderbyop {
                continue;
            }
            let mut orderbys = PgList::<Node>::new();
            let mut columns: *mut pg_sys::List = std::ptr::null_mut();
            for pathkey in pathkeys.iter_ptr() {
                let Some(orderby) = ordering_by(root, rel, index, pathkey, &codes) else { break };
                orderbys.push(orderby);
                columns = pg_sys::lappend_int(columns, 0);
            }
            if orderbys.len() != pathkeys.len() {
                continue;
            }
            super::order_path::add_ordered_path(root, rel, index, orderbys.into_pg(), columns);
        }
    }
}

/// `column <-> ball(q, 0)` (integer order) or `column <~> ball(q, 0)` (float8 order) for an
/// ascending sort key `simhash_hamming(column, q)` or pgvector's `column <~> q`, `column` being
/// `index`'s; `None` for any other sort key.
unsafe fn ordering_by(
    root: *mut pg_sys::PlannerInfo,
    rel: *mut pg_sys::RelOptInfo,
    index: *mut pg_sys::IndexOptInfo,
    pathkey: *mut pg_sys::PathKey,
    codes: &CodeObjects,
) -> Option<*mut Node> {
    unsafe {
        if !crate::pg::compat::pathkey_is_ascending(pathkey)
            || (*pathkey).pk_nulls_first
            || (*(*pathkey).pk_eclass).ec_has_volatile
        {
            return None;
        }
        let (opfamily, input_type) = (*(*index).opfamily, *(*index).opcintype);
        // (a partition's ordered path takes the member translated to it, not its parent's)
        for member in crate::pg::compat::eclass_members((*pathkey).pk_eclass, (*rel).relids) {
            let expr = strip_relabel((*member).em_expr.cast());
            let (strategy, result_type) = match call_of(expr) {
                Some((function, _)) if function == codes.hamming => (ORDER_BY_INTEGER, pg_sys::INT4OID),
                Some(_) if pgvector_hamming(expr).is_some() => (ORDER_BY_FLOAT, pg_sys::FLOAT8OID),
                _ => continue,
            };
            let ordering = pg_sys::get_opfamily_member(opfamily, input_type, codes.ball_type, strategy);
            if ordering == Oid::INVALID
                || (*pathkey).pk_opfamily != pg_sys::get_op_opfamily_sortfamily(ordering, opfamily)
            {
                continue;
            }
            let Some((column, query)) = fixed_operands(root, index, expr) else { continue };
            return Some(
                pg_sys::make_opclause(
                    ordering,
                    result_type,
                    false,
                    copy(column).cast(),
                    ball(query, 0, codes).cast(),
                    Oid::INVALID,
                    Oid::INVALID,
                )
                .cast(),
            );
        }
        None
    }
}
