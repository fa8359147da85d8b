//! `simhash_pairs` / `simhash_clusters` of a table whose fingerprint column has a simhash index:
//! the pairs are read from the index a bucket or two at a time (`crate::index::pairs_within`), so
//! memory holds the pairs and the rows in them, not every row of the table. Each row in a pair is
//! fetched once, with the statement's snapshot, for its id; index entries of rows it does not see
//! drop out there.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;

use pgrx::pg_sys::{self, Oid};
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// What hears of the pairs of rows, a group of rows with one fingerprint at a time (their ids):
/// `on_pairs(a, None, 0)` means every two rows of `a`, `on_pairs(a, Some(b), distance)` every row of
/// `a` with every row of `b`.
pub(super) type OnIdPairs<'a> = &'a mut dyn FnMut(&[i64], Option<&[i64]>, u32);

/// A table read through its simhash index (open, with AccessShareLock, until `for_each_pair`).
pub(super) struct TableSource {
    rel: pg_sys::Relation,
    index: Oid,
    fp_attnum: i16,
    id_attnum: i16,
    /// The base type of the id column: int2, int4 or int8.
    id_type: Oid,
}

impl TableSource {
    /// The source for pairs within `k` of column `fp_column` of `tbl` with ids `id_column`, when
    /// its simhash index can serve them exactly as the query would: a plain table without
    /// children (or a populated materialized view; not a Citus table, whose indexes here are
    /// empty: `ColumnIndexes::of`), whose schema and two columns the user may
    /// read, without row-level security for the user, a stored integer id and a simhash64 column
    /// with a valid simhash index without a predicate that the statement's snapshot may use, and
    /// `k` at most 11. Else the query `SELECT id_column, fp_column FROM tbl` for the search in
    /// memory, which reports any error in the arguments as it always has.
    ///
    /// # Safety
    ///
    /// In a backend, inside a transaction; `fcinfo` is the call's.
    pub(super) unsafe fn of(
        tbl: Oid,
        fp_column: &CStr,
        id_column: &CStr,
        k: u32,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> Result<TableSource, String> {
        unsafe {
            // Locked first, so that what is read of the catalog below stays true until the end.
            let rel = crate::pg::names::open_relation(tbl, pg_sys::AccessShareLock);
            match Self::usable_index(rel, fp_column, id_column, k, fcinfo) {
                Some((index, fp_attnum, id_attnum, id_type)) => {
                    pgrx::debug1!(
                        "simhash: the pairs of column \"{}\" of \"{}\" are read through index \"{}\"",
                        fp_column.to_string_lossy(),
                        qualified_name(tbl),
                        crate::pg::names::rel_name(index)
                    );
                    Ok(TableSource { rel, index, fp_attnum, id_attnum, id_type })
                }
                None => {
                    pg_sys::relation_close(rel, pg_sys::NoLock as i32);
                    Err(format!(
                        "SELECT {}, {} FROM {}",
                        quote_identifier(&id_column.to_string_lossy()),
                        quote_identifier(&fp_column.to_string_lossy()),
                        qualified_name(tbl)
                    ))
                }
            }
        }
    }

    /// The index, the two columns and the id's type, if the index can serve (see [`Self::of`]).
    unsafe fn usable_index(
        rel: pg_sys::Relation,
        fp_column: &CStr,
        id_column: &CStr,
        k: u32,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> Option<(Oid, i16, i16, Oid)> {
        unsafe {
            let tbl = (*rel).rd_id;
            let form = &*(*rel).rd_rel;
            let relkind = form.relkind as u8;
            let plain = k <= simhash_core::buckets::MAX_PROBED_RADIUS
                && (relkind == pg_sys::RELKIND_RELATION || (relkind == pg_sys::RELKIND_MATVIEW && form.relispopulated))
                && !form.relhassubclass
                && pg_sys::ActiveSnapshotSet();
            if !plain {
                return None;
            }
            let fp_attnum = pg_sys::get_attnum(tbl, fp_column.as_ptr());
            let id_attnum = pg_sys::get_attnum(tbl, id_column.as_ptr());
            // (a virtual generated column, PostgreSQL 18, is computed by the query only)
            let stored = |attnum: i16| attnum > 0 && pg_sys::get_attgenerated(tbl, attnum) as u8 != b'v';
            if !stored(fp_attnum) || !stored(id_attnum) {
                return None;
            }
            let user = pg_sys::GetUserId();
            let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
            let ok = pg_sys::AclResult::ACLCHECK_OK;
            let readable = crate::pg::compat::may_use_schema(form.relnamespace, user)
                && (pg_sys::pg_class_aclcheck(tbl, user, select) == ok
                    || [fp_attnum, id_attnum]
                        .iter()
                        .all(|&attnum| pg_sys::pg_attribute_aclcheck(tbl, attnum, user, select) == ok));
            let row_security = pg_sys::check_enable_rls(tbl, Oid::INVALID, false)
                == pg_sys::CheckEnableRlsResult::RLS_ENABLED as core::ffi::c_int;
            let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
            let id_type = pg_sys::getBaseType(pg_sys::get_atttype(tbl, id_attnum));
            if !readable || row_security || !super::input::pair_columns_typed(tbl, id_attnum, fp_attnum, schema) {
                return None;
            }
            let index = crate::lookup::catalog::column_indexes(schema, tbl, fp_attnum)?.own_index()?;
            // An index built while a HOT chain changed the column holds only the chain's newest
            // value; until every snapshot is newer than the index, older snapshots must not use it
            // (as the planner decides, plancat.c).
            let opened = pg_sys::index_open(index, pg_sys::AccessShareLock as i32);
            let too_new = (*(*opened).rd_index).indcheckxmin
                && !pg_sys::TransactionIdPrecedes(
                    crate::pg::compat::heap_tuple_xmin((*(*opened).rd_indextuple).t_data),
                    pg_sys::TransactionXmin,
                );
            pg_sys::index_close(opened, pg_sys::NoLock as i32);
            (!too_new).then_some((index, fp_attnum, id_attnum, id_type))
        }
    }

    /// Calls `on_pairs(a, b, distance)` for the pairs of rows within `k` that the statement's
    /// snapshot sees, a group of rows with one fingerprint at a time (their ids): `b` `None`, every
    /// two rows of `a` (distance 0); else every row of `a` with every row of `b`. Closes the table.
    ///
    /// # Safety
    ///
    /// In a backend, inside a transaction, with an active snapshot.
    pub(super) unsafe fn for_each_pair(self, k: u32, on_pairs: OnIdPairs) {
        unsafe {
            let rel = self.rel;
            let index = pg_sys::index_open(self.index, pg_sys::AccessShareLock as i32);
            let snapshot = pg_sys::GetActiveSnapshot();
            let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
            let fetch = pg_sys::table_index_fetch_begin(rel);
            // The id of the row at each TID of a pair (None: not seen, or already reached through
            // another entry), and the rows reached.
            let mut ids: HashMap<u64, Option<i64>> = HashMap::new();
            let mut reached: HashSet<u64> = HashSet::new();
            let mut visible = |group: &[(u64, u64)], out: &mut Vec<i64>| {
                out.clear();
                for &(fp, key) in group {
                    let id = match ids.get(&key) {
                        Some(&id) => id,
                        None => {
                            let held = ids.len();
                            let what = &|| format!("the {held} rows in near-duplicate pairs");
                            super::granted(ids.try_reserve(1).and(reached.try_reserve(1)).ok(), what);
                            let id = self.fetch_id(fetch, slot, snapshot, fp, key, &mut reached);
                            ids.insert(key, id);
                            id
                        }
                    };
                    if let Some(id) = id {
                        let what = &|| format!("the ids of {} rows with one fingerprint", group.len());
                        super::granted(crate::memory::push(out, id), what);
                    }
                }
            };
            let (mut a_ids, mut b_ids) = (Vec::new(), Vec::new());
            crate::index::pairs_within(index, k, &mut |a, b, distance| {
                visible(a, &mut a_ids);
                match b {
                    None => on_pairs(&a_ids, None, distance),
                    Some(b) => {
                        visible(b, &mut b_ids);
                        on_pairs(&a_ids, Some(&b_ids), distance);
                    }
                }
            });
            pg_sys::table_index_fetch_end(fetch);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::index_close(index, pg_sys::NoLock as i32);
            pg_sys::relation_close(rel, pg_sys::NoLock as i32);
        }
    }

    /// The id of the row the index entry (`fp`, TID `key`) leads to, if `snapshot` sees one (the
    /// visible version of its HOT chain), it still has that fingerprint, and no other entry led
    /// to it before (`reached`).
    unsafe fn fetch_id(
        &self,
        fetch: *mut pg_sys::IndexFetchTableData,
        slot: *mut pg_sys::TupleTableSlot,
        snapshot: pg_sys::Snapshot,
        fp: u64,
        key: u64,
        reached: &mut HashSet<u64>,
    ) -> Option<i64> {
        unsafe {
            let mut tid = crate::pg::tid::tid_of_order(key);
            let (mut call_again, mut all_dead) = (false, false);
            if !pg_sys::table_index_fetch_tuple(fetch, &mut tid, snapshot, slot, &mut call_again, &mut all_dead) {
                return None;
            }
            let mut is_null = false;
            let value = pg_sys::slot_getattr(slot, self.fp_attnum.into(), &mut is_null);
            if is_null || value.value() as u64 != fp || !reached.insert(crate::pg::tid::tid_order(&tid)) {
                return None;
            }
            let id = pg_sys::slot_getattr(slot, self.id_attnum.into(), &mut is_null);
            if is_null {
                raise(
                    PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                    "near-duplicate pairs need a non-NULL id for every fingerprint".into(),
                    Some("The first column of the query is the row id.".into()),
                    None,
                );
            }
            Some(match self.id_type {
                pg_sys::INT2OID => i64::from(id.value() as i16),
                pg_sys::INT4OID => i64::from(id.value() as i32),
                _ => id.value() as i64,
            })
        }
    }
}
