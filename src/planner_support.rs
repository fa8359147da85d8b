//! The planner support function that turns a radius test into index probes.
//!
//! `<~>` returns the domain `simhash_distance`; the comparison operators `simhash_distance <= k`,
//! `< k`, and their commuted forms `k >= simhash_distance`, `k > simhash_distance` are PostgreSQL's
//! own integer comparisons with this function attached as SUPPORT. When the planner simplifies
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

use std::ffi::CStr;
use std::ptr::null_mut;

use pgrx::datum::Internal;
use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

/// A built-in boolean operator: its OID and its function's (stable catalog OIDs; pg_operator.dat
/// names no symbol for int4 <=).
type BuiltinOperator = (u32, u32);
const INT4_EQ: BuiltinOperator = (pg_sys::Int4EqualOperator, pg_sys::F_INT4EQ);
const INT4_LE: BuiltinOperator = (523, pg_sys::F_INT4LE);
const ARRAY_OVERLAP: BuiltinOperator = (pg_sys::OID_ARRAY_OVERLAP_OP, pg_sys::F_ARRAYOVERLAP);

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
        if node.is_null() || (*node).type_ != NodeTag::T_SupportRequestSimplify || !crate::ENABLE_REWRITE.get() {
            return None;
        }
        let request = node as *mut pg_sys::SupportRequestSimplify;
        // Without planner state (expression_planner(): defaults, constraints) there is no table to probe.
        let root = (*request).root;
        if root.is_null() || (*root).parse.is_null() {
            return None;
        }
        let fcall = (*request).fcall;
        let test = RadiusTest::of((*fcall).funcid)?;
        let args = PgList::<Node>::from_pg((*fcall).args);
        let (distance, bound) =
            if test.commuted { (args.get_ptr(1)?, args.get_ptr(0)?) } else { (args.get_ptr(0)?, args.get_ptr(1)?) };

        // Only a constant, non-NULL bound. (All-constant calls were folded before we are asked.)
        let radius = u32::try_from(test.radius(const_integer(bound)?)?).ok()?;
        let segment_radius = simhash_core::probes::segment_radius(radius)?;

        // The distance must be exactly our hamming(simhash64, simhash64), from our schema.
        let ours = ExtensionObjects::lookup(pg_sys::get_func_namespace((*fcall).funcid))?;
        let (hamming_fn, hamming_args) = call_of(distance)?;
        if hamming_fn != ours.hamming {
            return None;
        }
        let hamming_args = PgList::<Node>::from_pg(hamming_args);
        let (a, b) = (hamming_args.get_ptr(0)?, hamming_args.get_ptr(1)?);

        // Each operand is copied into several places, so it must be cheap to evaluate repeatedly.
        if !ours.is_cheap(a) || !ours.is_cheap(b) {
            return None;
        }
        // A candidate test per operand that is a column with indexes: in a join both sides may be,
        // and whichever the planner puts on the inner side probes its indexes with the other's value.
        // The exact test comes first in the AND, so a candidate test only runs on true matches.
        let mut candidate_tests = Vec::new();
        for (probed, index, other) in probe_targets((*(*root).parse).rtable, a, b, &ours) {
            let test = match index {
                // Symmetric: one test serves both sides.
                IndexKind::SegmentBtrees if segment_radius == 0 => {
                    if candidate_tests.iter().any(|(kind, _)| *kind == index) {
                        continue;
                    }
                    let mut any_equal = PgList::<Node>::new();
                    for n in 0..simhash_core::SEGMENTS as i32 {
                        any_equal.push(operator_call(INT4_EQ, segment_of(a, n, &ours), segment_of(b, n, &ours)));
                    }
                    pg_sys::make_orclause(any_equal.into_pg()).cast::<Node>()
                }
                IndexKind::SegmentBtrees => {
                    let mut any_probe = PgList::<Node>::new();
                    for n in 0..simhash_core::SEGMENTS as i32 {
                        let probes = segment_probes_of(other, n, segment_radius, &ours);
                        any_probe.push(int4_equal_any(segment_of(probed, n, &ours), probes));
                    }
                    pg_sys::make_orclause(any_probe.into_pg()).cast()
                }
                IndexKind::BandsGin => {
                    let mut bands_args = PgList::<Node>::new();
                    bands_args.push(copy(probed));
                    let bands = function_call(ours.bands, pg_sys::INT4ARRAYOID, bands_args);
                    operator_call(ARRAY_OVERLAP, bands, band_probes_of(other, segment_radius, &ours))
                }
            };
            candidate_tests.push((index, test));
        }
        if candidate_tests.is_empty() {
            return None;
        }

        let as_int4 = pg_sys::makeRelabelType(
            copy(distance).cast(),
            pg_sys::INT4OID,
            -1,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
        );
        let exact = operator_call(INT4_LE, as_int4.cast(), int4_const(radius as i32).cast());

        // The exact test first: in a select list the AND is evaluated in this order.
        let mut all = PgList::<Node>::new();
        all.push(exact);
        for (_, test) in candidate_tests {
            all.push(test);
        }
        Some(pg_sys::make_andclause(all.into_pg()).cast())
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
        if self.strict {
            k.checked_sub(1)
        } else {
            Some(k)
        }
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

/// The extension's own objects in its schema, found through the system caches: exact signatures,
/// and no permission check (a user may query a view without USAGE on the extension's schema).
pub(crate) struct ExtensionObjects {
    simhash64: Oid,
    pub hamming: Oid,
    pub segment: Oid,
    segment_probes: Oid,
    pub bands: Oid,
    band_probes: Oid,
    /// The text -> fingerprint functions: simhash(text), simhash(text, int), simhash_ngrams,
    /// minhash64 (memoized per backend, see `fingerprint.rs`).
    text_fingerprints: [Oid; 4],
}

impl ExtensionObjects {
    pub(crate) unsafe fn lookup(schema: Oid) -> Option<Self> {
        unsafe {
            let simhash64 = simhash64_type(schema);
            if simhash64 == Oid::INVALID {
                return None;
            }
            Some(ExtensionObjects {
                simhash64,
                hamming: function_oid(schema, c"hamming", &[simhash64, simhash64])?,
                segment: function_oid(schema, c"simhash_segment", &[simhash64, pg_sys::INT4OID])?,
                segment_probes: function_oid(
                    schema,
                    c"simhash_segment_probes",
                    &[simhash64, pg_sys::INT4OID, pg_sys::INT4OID],
                )?,
                bands: function_oid(schema, c"simhash_bands", &[simhash64])?,
                band_probes: function_oid(schema, c"simhash_band_probes", &[simhash64, pg_sys::INT4OID])?,
                text_fingerprints: [
                    function_oid(schema, c"simhash", &[pg_sys::TEXTOID])?,
                    function_oid(schema, c"simhash", &[pg_sys::TEXTOID, pg_sys::INT4OID])?,
                    function_oid(schema, c"simhash_ngrams", &[pg_sys::TEXTOID, pg_sys::INT4OID])?,
                    function_oid(schema, c"minhash64", &[pg_sys::TEXTOID, pg_sys::INT4OID, pg_sys::INT4OID])?,
                ],
            })
        }
    }

    /// Cheap enough to evaluate in several places, and a simhash64: a column, a constant, a
    /// parameter, or `simhash()`, `simhash_ngrams()` or `minhash64()` whose arguments do not depend
    /// on the row: constants and parameters, alone or in non-volatile expressions such as
    /// `simhash($1, greatest(20, char_length($1) / 40))` in a generic plan (one text per execution,
    /// which the backend's memo in `fingerprint.rs` fingerprints once). Anything else, sub-selects
    /// included, would run once per copy, so those queries keep their original form.
    unsafe fn is_cheap(&self, node: *mut Node) -> bool {
        unsafe {
            if pg_sys::getBaseType(pg_sys::exprType(node)) != self.simhash64 {
                return false;
            }
            match (*node).type_ {
                NodeTag::T_FuncExpr => {
                    let f = node as *mut pg_sys::FuncExpr;
                    self.text_fingerprints.contains(&(*f).funcid)
                        && PgList::<Node>::from_pg((*f).args).iter_ptr().all(|arg| is_row_independent(arg))
                }
                _ => is_plain_operand(node),
            }
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

unsafe fn is_param_or_const(node: *mut Node) -> bool {
    unsafe {
        let node = strip_relabel(node);
        match (*node).type_ {
            NodeTag::T_Param => true,
            NodeTag::T_Const => !(*(node as *mut pg_sys::Const)).constisnull,
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

/// Which kind of index a column has that the rewrite can target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum IndexKind {
    /// Valid, non-partial B-tree indexes on `simhash_segment(col, n)` for all of n = 0..3.
    SegmentBtrees,
    /// A valid, non-partial GIN index on `simhash_bands(col)`.
    BandsGin,
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
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                || pg_sys::getBaseType(pg_sys::get_atttype((*rte).relid, (*var).varattno)) != ours.simhash64
            {
                continue;
            }
            if let Some(kind) = indexes_on_column((*rte).relid, (*var).varattno, ours) {
                targets.push((probed, kind, other));
            }
        }
        targets
    }
}

/// The index kind that column `attno` of table `relid` supports (B-trees preferred).
unsafe fn indexes_on_column(relid: Oid, attno: i16, ours: &ExtensionObjects) -> Option<IndexKind> {
    unsafe {
        let (segments, bands) = lookup_index_oids(relid, attno, ours)?;
        if segments.iter().all(|s| s.is_some()) {
            Some(IndexKind::SegmentBtrees)
        } else if bands {
            Some(IndexKind::BandsGin)
        } else {
            None
        }
    }
}

/// A B-tree on `simhash_segment(col, n)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentIndex {
    pub oid: Oid,
    /// Where `col` itself is stored in the index tuple (its 1-based attribute number there) when the
    /// index INCLUDEs it: then a probe can check the distance without visiting the table.
    pub column_in_index: Option<i32>,
}

/// The segment B-trees of column `attno` (by segment number) and whether it has a bands GIN index.
/// `None` when the relation does not exist.
unsafe fn lookup_index_oids(
    relid: Oid,
    attno: i16,
    ours: &ExtensionObjects,
) -> Option<([Option<SegmentIndex>; 4], bool)> {
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return None;
        }
        let relkind = (*(*rel).rd_rel).relkind as u8;
        let mut segments = [None; 4];
        let mut bands = false;
        if [pg_sys::RELKIND_RELATION, pg_sys::RELKIND_MATVIEW, pg_sys::RELKIND_PARTITIONED_TABLE].contains(&relkind) {
            for index_oid in PgList::<Oid>::from_pg(pg_sys::RelationGetIndexList(rel)).iter_oid() {
                // The planner takes the same lock on every index of the table moments later.
                let index = pg_sys::index_open(index_oid, pg_sys::AccessShareLock as i32);
                let form = (*index).rd_index;
                let usable = (*form).indisvalid
                    && (*form).indnkeyatts == 1
                    && (*form).indkey.values.as_slice(1)[0] == 0
                    && pg_sys::RelationGetIndexPredicate(index).is_null();
                if usable {
                    let am = (*(*index).rd_rel).relam;
                    // The operator class must be the default one, whose operators the rewrite emits
                    // (int4 = for B-trees, && of array_ops for GIN; not, say, intarray's gin__int_ops).
                    let opfamily = *(*index).rd_opfamily;
                    let default_family = |type_oid, am_oid| {
                        let opclass = pg_sys::GetDefaultOpClass(type_oid, am_oid);
                        opclass != Oid::INVALID && pg_sys::get_opclass_family(opclass) == opfamily
                    };
                    let expression = PgList::<Node>::from_pg(pg_sys::RelationGetIndexExpressions(index)).get_ptr(0);
                    match expression.and_then(|e| indexed_call(e, attno)) {
                        Some((f, Some(n)))
                            if am == pg_sys::BTREE_AM_OID
                                && f == ours.segment
                                && (0..4).contains(&n)
                                && default_family(pg_sys::INT4OID, pg_sys::BTREE_AM_OID) =>
                        {
                            // The column's place among the INCLUDE columns, if it is one of them.
                            let attributes = (*form).indkey.values.as_slice((*form).indnatts as usize);
                            let column_in_index =
                                (1..attributes.len()).find(|&i| attributes[i] == attno).map(|i| i as i32 + 1);
                            let found = SegmentIndex { oid: index_oid, column_in_index };
                            // Prefer a covering index when a segment has several.
                            if segments[n as usize].is_none_or(|s: SegmentIndex| s.column_in_index.is_none()) {
                                segments[n as usize] = Some(found);
                            }
                        }
                        Some((f, None))
                            if am == pg_sys::GIN_AM_OID
                                && f == ours.bands
                                && default_family(pg_sys::INT4ARRAYOID, pg_sys::GIN_AM_OID) =>
                        {
                            bands = true
                        }
                        _ => {}
                    }
                }
                // Keep the lock, as the planner does for the indexes it considers.
                pg_sys::index_close(index, pg_sys::NoLock as i32);
            }
        }
        pg_sys::RelationClose(rel);
        Some((segments, bands))
    }
}

/// For an index expression `f(col)` or `f(col, n)` on column `attno`: `f` and the constant `n`.
unsafe fn indexed_call(expression: *mut Node, attno: i16) -> Option<(Oid, Option<i32>)> {
    unsafe {
        if (*expression).type_ != NodeTag::T_FuncExpr {
            return None;
        }
        let call = expression as *mut pg_sys::FuncExpr;
        let args = PgList::<Node>::from_pg((*call).args);
        // A domain-typed column appears as RelabelType(Var).
        let column = strip_relabel(args.get_ptr(0)?);
        if (*column).type_ != NodeTag::T_Var || (*(column as *mut pg_sys::Var)).varattno != attno {
            return None;
        }
        let n = match args.get_ptr(1) {
            None => None,
            Some(arg) => Some(const_integer(arg)? as i32),
        };
        (args.len() <= 2).then_some(((*call).funcid, n))
    }
}

pub(crate) unsafe fn strip_relabel(mut node: *mut Node) -> *mut Node {
    unsafe {
        while (*node).type_ == NodeTag::T_RelabelType {
            node = (*(node as *mut pg_sys::RelabelType)).arg.cast();
        }
        node
    }
}

/// `simhash_segment(x, n)`, folded to a constant when `x` is a constant.
unsafe fn segment_of(x: *mut Node, n: i32, ours: &ExtensionObjects) -> *mut Node {
    unsafe {
        if let Some(fp) = const_fingerprint(x) {
            let value = simhash_core::segment(fp, n).expect("n is a valid segment number");
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
            let value = simhash_core::segment(fp, n).expect("n is a valid segment number");
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

/// The band keys to probe a GIN index with, constant-folded like `segment_probes_of`.
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

unsafe fn function_call(funcid: Oid, result_type: Oid, args: PgList<Node>) -> *mut Node {
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
unsafe fn operator_call((opno, funcid): BuiltinOperator, left: *mut Node, right: *mut Node) -> *mut Node {
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
unsafe fn int4_equal_any(left: *mut Node, right: *mut Node) -> *mut Node {
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

unsafe fn int4_array_const(values: impl Iterator<Item = i32>) -> *mut Node {
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

unsafe fn int4_const(value: i32) -> *mut pg_sys::Const {
    unsafe { pg_sys::makeConst(pg_sys::INT4OID, -1, Oid::INVALID, 4, Datum::from(value), false, true) }
}

unsafe fn copy(node: *mut Node) -> *mut Node {
    unsafe { pg_sys::copyObjectImpl(node.cast()).cast() }
}

/// Whether column `attno` of table `relid` has indexes a radius lookup can use (the four segment
/// B-trees or the bands GIN index); `schema` is the extension's.
pub(crate) fn has_lookup_indexes(schema: Oid, relid: Oid, attno: i16) -> bool {
    unsafe { ExtensionObjects::lookup(schema).is_some_and(|ours| indexes_on_column(relid, attno, &ours).is_some()) }
}

/// The four segment B-trees of column `attno` of table `relid` (segment 0 first), if it has all
/// four; `schema` is the extension's.
pub(crate) fn segment_btrees(schema: Oid, relid: Oid, attno: i16) -> Option<[Oid; 4]> {
    unsafe {
        let ours = ExtensionObjects::lookup(schema)?;
        let (segments, _) = lookup_index_oids(relid, attno, &ours)?;
        Some([segments[0]?.oid, segments[1]?.oid, segments[2]?.oid, segments[3]?.oid])
    }
}

/// The four segment B-trees of column `attno` of table `relid` (segment 0 first), if it has all
/// four; `schema` is the extension's.
pub(crate) fn segment_btree_indexes(schema: Oid, relid: Oid, attno: i16) -> Option<[SegmentIndex; 4]> {
    unsafe {
        let ours = ExtensionObjects::lookup(schema)?;
        let (segments, _) = lookup_index_oids(relid, attno, &ours)?;
        Some([segments[0]?, segments[1]?, segments[2]?, segments[3]?])
    }
}

/// The four segment B-trees of column `attno` of table `relid` if all four INCLUDE the column.
pub(crate) unsafe fn covering_segment_btrees(
    ours: &ExtensionObjects,
    relid: Oid,
    attno: i16,
) -> Option<[SegmentIndex; 4]> {
    unsafe {
        let (segments, _) = lookup_index_oids(relid, attno, ours)?;
        let all: [SegmentIndex; 4] = [segments[0]?, segments[1]?, segments[2]?, segments[3]?];
        all.iter().all(|s| s.column_in_index.is_some()).then_some(all)
    }
}

/// The oid of the `simhash64` type in the extension's `schema` (InvalidOid if there is none).
pub(crate) fn simhash64_type(schema: Oid) -> Oid {
    unsafe {
        pg_sys::GetSysCacheOid(
            pg_sys::SysCacheIdentifier::TYPENAMENSP as i32,
            pg_sys::Anum_pg_type_oid as i16,
            Datum::from(c"simhash64".as_ptr()),
            Datum::from(schema.to_u32()),
            Datum::from(0),
            Datum::from(0),
        )
    }
}
