//! Finding the extension's own objects and the indexes a fingerprint column has.
//!
//! The rewrite, the radius scan and the near-duplicate constraint all ask the same question: does
//! this column have the four segment B-trees `(simhash_segment(col, n))` (which INCLUDE the column,
//! for the radius scan), or a GIN index on `simhash_bands(col)`? [`ColumnIndexes::of`] answers it
//! from the relation's index list, accepting only valid, non-partial indexes with the default
//! operator class (whose operators the rewrite emits).

use std::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Node, NodeTag, Oid};
use pgrx::PgList;

use crate::pg::nodes::{const_integer, strip_relabel};

/// The number of 16-bit segments of a fingerprint, and of segment indexes.
pub(crate) const SEGMENTS: usize = simhash_core::SEGMENTS as usize;

/// The extension's own objects in its schema, found through the system caches: exact signatures,
/// and no permission check (a user may query a view without USAGE on the extension's schema).
pub(crate) struct ExtensionObjects {
    pub simhash64: Oid,
    pub hamming: Oid,
    pub segment: Oid,
    pub segment_probes: Oid,
    pub bands: Oid,
    pub band_probes: Oid,
    /// The text -> fingerprint functions: simhash(text), simhash(text, int), simhash_ngrams,
    /// minhash64 (memoized per backend, see `crate::fingerprint::text`).
    pub text_fingerprints: [Oid; 4],
    /// The `simhash` index access method and what its radius test is made of:
    /// `col <@ ROW(q, k)::simhash_ball` (`None` for catalogs of a version without it).
    pub own_index: Option<OwnIndex>,
    /// The objects of `bit(n)` codes (`crate::codes`; `None` for catalogs of a version without them).
    pub codes: Option<CodeObjects>,
}

/// The objects of binary codes of any length (`crate::codes`, sql/simhash.sql).
#[derive(Clone, Copy)]
pub(crate) struct CodeObjects {
    /// `simhash_hamming(bit, bit)`.
    pub hamming: Oid,
    pub ball_type: Oid,
    /// The operator `bit <@ simhash_code_ball` and its function.
    pub within: Oid,
    pub within_function: Oid,
}

/// The objects of the `simhash` index access method (src/index/).
#[derive(Clone, Copy)]
pub(crate) struct OwnIndex {
    pub access_method: Oid,
    pub ball_type: Oid,
    /// The operator `simhash64 <@ simhash_ball` and its function.
    pub within: Oid,
    pub within_function: Oid,
}

impl ExtensionObjects {
    /// # Safety
    ///
    /// In a backend, inside a transaction (it reads the system caches).
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
                own_index: own_index(schema, simhash64),
                codes: code_objects(schema),
            })
        }
    }
}

/// # Safety
///
/// In a backend, inside a transaction (it reads the system caches).
pub(crate) unsafe fn function_oid(schema: Oid, name: &CStr, arg_types: &[Oid]) -> Option<Oid> {
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

/// The access method `simhash` and its operator, when the extension's catalog has them and the
/// access method is ours (its handler is the extension's).
unsafe fn own_index(schema: Oid, simhash64: Oid) -> Option<OwnIndex> {
    unsafe {
        let ball_type = type_oid(schema, c"simhash_ball");
        if ball_type == Oid::INVALID {
            return None;
        }
        let within = within_operator(schema, simhash64, ball_type)?;
        let access_method = pg_sys::get_index_am_oid(c"simhash".as_ptr(), true);
        if access_method == Oid::INVALID {
            return None;
        }
        Some(OwnIndex { access_method, ball_type, within, within_function: pg_sys::get_opcode(within) })
    }
}

/// The operator `<@ (left, ball_type)` of the extension's `schema`, a radius test.
unsafe fn within_operator(schema: Oid, left: Oid, ball_type: Oid) -> Option<Oid> {
    unsafe {
        let within = pg_sys::GetSysCacheOid(
            pg_sys::SysCacheIdentifier::OPERNAMENSP as i32,
            pg_sys::Anum_pg_operator_oid as i16,
            Datum::from(c"<@".as_ptr()),
            Datum::from(left.to_u32()),
            Datum::from(ball_type.to_u32()),
            Datum::from(schema.to_u32()),
        );
        (within != Oid::INVALID).then_some(within)
    }
}

/// The objects of `bit(n)` codes, when the extension's catalog has them all.
unsafe fn code_objects(schema: Oid) -> Option<CodeObjects> {
    unsafe {
        let ball_type = type_oid(schema, c"simhash_code_ball");
        if ball_type == Oid::INVALID {
            return None;
        }
        let within = within_operator(schema, pg_sys::BITOID, ball_type)?;
        Some(CodeObjects {
            hamming: function_oid(schema, c"simhash_hamming", &[pg_sys::BITOID, pg_sys::BITOID])?,
            ball_type,
            within,
            within_function: pg_sys::get_opcode(within),
        })
    }
}

/// The oid of the `simhash64` type in the extension's `schema` (InvalidOid if there is none).
pub(crate) fn simhash64_type(schema: Oid) -> Oid {
    type_oid(schema, c"simhash64")
}

/// The oid of type `name` in `schema` (InvalidOid if there is none).
fn type_oid(schema: Oid, name: &CStr) -> Oid {
    unsafe {
        pg_sys::GetSysCacheOid(
            pg_sys::SysCacheIdentifier::TYPENAMENSP as i32,
            pg_sys::Anum_pg_type_oid as i16,
            Datum::from(name.as_ptr()),
            Datum::from(schema.to_u32()),
            Datum::from(0),
            Datum::from(0),
        )
    }
}

/// Which kind of index a column has that the rewrite can target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IndexKind {
    /// Valid, non-partial B-tree indexes on `simhash_segment(col, n)` for all of n = 0..3.
    SegmentBtrees,
    /// A valid, non-partial GIN index on `simhash_bands(col)`.
    BandsGin,
    /// A valid, non-partial index of the extension's own access method on the column.
    OwnIndex,
}

/// A B-tree on `simhash_segment(col, n)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentIndex {
    pub oid: Oid,
    /// Where `col` itself is stored in the index tuple (its 1-based attribute number there) when the
    /// index INCLUDEs it: then a probe can check the distance without visiting the table.
    pub column_in_index: Option<i32>,
}

/// The indexes of a column that lookups can use.
pub(crate) struct ColumnIndexes {
    /// The B-tree on `simhash_segment(col, n)` for each n (a covering one when there are several).
    segments: [Option<SegmentIndex>; SEGMENTS],
    /// Whether there is a GIN index on `simhash_bands(col)`.
    bands: bool,
    /// An index of the `simhash` access method on the column itself, without a predicate.
    own: Option<Oid>,
}

impl ColumnIndexes {
    /// The indexes of column `attno` of table `relid` (`None` when the relation does not exist).
    ///
    /// # Safety
    ///
    /// In a backend, inside a transaction; the caller may hold any lock on the table (the indexes
    /// are opened with AccessShareLock, kept to the end of the transaction, as the planner does).
    pub(crate) unsafe fn of(relid: Oid, attno: i16, ours: &ExtensionObjects) -> Option<ColumnIndexes> {
        unsafe { Self::read(relid, attno, ours, false) }
    }

    /// The indexes defined on column `attno` of table `relid`, a Citus table's included: Citus
    /// creates them on each of its shards, where they serve the lookups that reach the shard.
    ///
    /// # Safety
    ///
    /// As [`Self::of`].
    pub(crate) unsafe fn defined(relid: Oid, attno: i16, ours: &ExtensionObjects) -> Option<ColumnIndexes> {
        unsafe { Self::read(relid, attno, ours, true) }
    }

    unsafe fn read(relid: Oid, attno: i16, ours: &ExtensionObjects, citus_shells: bool) -> Option<ColumnIndexes> {
        unsafe {
            let rel = pg_sys::RelationIdGetRelation(relid);
            if rel.is_null() {
                return None;
            }
            let relkind = (*(*rel).rd_rel).relkind as u8;
            let mut segments = [None; SEGMENTS];
            let mut bands = false;
            let mut own = None;
            // The indexes of a Citus table on this node do not hold its rows (empty, or stale rows
            // from before it was distributed): they are in its shards, each with indexes of its
            // own, which answer there when the test reaches them as written.
            let kinds = [pg_sys::RELKIND_RELATION, pg_sys::RELKIND_MATVIEW, pg_sys::RELKIND_PARTITIONED_TABLE];
            if kinds.contains(&relkind)
                && (*(*rel).rd_rel).relhasindex
                && (citus_shells || !crate::pg::citus::is_citus_table(relid))
            {
                for index_oid in PgList::<Oid>::from_pg(pg_sys::RelationGetIndexList(rel)).iter_oid() {
                    // The planner takes the same lock on every index of the table moments later.
                    let index = pg_sys::index_open(index_oid, pg_sys::AccessShareLock as i32);
                    let form = (*index).rd_index;
                    // The extension's own access method, on the column itself.
                    if let Some(own_index) = ours.own_index.filter(|_| own.is_none()) {
                        if is_whole_single_key_index(index, own_index.access_method)
                            && (*form).indkey.values.as_slice(1)[0] == attno
                        {
                            own = Some(index_oid);
                        }
                    }
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
            Some(ColumnIndexes { segments, bands, own })
        }
    }

    /// The kind of lookup the column supports: the own access method, then B-trees, then GIN.
    pub(crate) fn kind(&self) -> Option<IndexKind> {
        if self.own.is_some() {
            Some(IndexKind::OwnIndex)
        } else if self.segments.iter().all(|s| s.is_some()) {
            Some(IndexKind::SegmentBtrees)
        } else if self.bands {
            Some(IndexKind::BandsGin)
        } else {
            None
        }
    }

    /// The column's `simhash` index, if it has one.
    pub(crate) fn own_index(&self) -> Option<Oid> {
        self.own
    }

    /// The segment B-trees, segment 0 first, if the column has all four.
    pub(crate) fn segment_btrees(&self) -> Option<[SegmentIndex; SEGMENTS]> {
        let all = self.segments;
        Some([all[0]?, all[1]?, all[2]?, all[3]?])
    }

    /// The segment B-trees if all four INCLUDE the column (the radius scan reads it from them).
    pub(crate) fn covering_segment_btrees(&self) -> Option<[SegmentIndex; SEGMENTS]> {
        self.segment_btrees().filter(|all| all.iter().all(|s| s.column_in_index.is_some()))
    }
}

/// Whether `index` is a valid index of the access method `am` with one key column and no
/// predicate (one the rewrite may send a radius test to).
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn is_whole_single_key_index(index: pg_sys::Relation, am: Oid) -> bool {
    unsafe {
        let form = (*index).rd_index;
        (*(*index).rd_rel).relam == am
            && (*form).indisvalid
            && (*form).indnkeyatts == 1
            && pg_sys::RelationGetIndexPredicate(index).is_null()
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

/// Whether column `attno` of table `relid` has indexes a radius lookup can use (the four segment
/// B-trees or the bands GIN index); `schema` is the extension's.
pub(crate) fn has_lookup_indexes(schema: Oid, relid: Oid, attno: i16) -> bool {
    unsafe {
        ExtensionObjects::lookup(schema)
            .and_then(|ours| ColumnIndexes::of(relid, attno, &ours))
            .is_some_and(|indexes| indexes.kind().is_some())
    }
}

/// Whether column `attno` of table `relid` has indexes defined that lookups can use, on it or, for
/// a Citus table, on each of its shards (`simhash_indexed`); `schema` is the extension's.
pub(crate) fn has_lookup_indexes_defined(schema: Oid, relid: Oid, attno: i16) -> bool {
    unsafe {
        ExtensionObjects::lookup(schema)
            .and_then(|ours| ColumnIndexes::defined(relid, attno, &ours))
            .is_some_and(|indexes| indexes.kind().is_some())
    }
}

/// The indexes of column `attno` of table `relid` (`None` when the extension's objects or the
/// relation cannot be found); `schema` is the extension's.
pub(crate) fn column_indexes(schema: Oid, relid: Oid, attno: i16) -> Option<ColumnIndexes> {
    unsafe {
        let ours = ExtensionObjects::lookup(schema)?;
        ColumnIndexes::of(relid, attno, &ours)
    }
}
