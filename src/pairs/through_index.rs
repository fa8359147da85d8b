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

/// A table read through its simhash index.
pub(super) struct TableSource {
    relid: Oid,
    index: Oid,
    fp_attnum: i16,
    id_attnum: i16,
    /// The base type of the id column: int2, int4 or int8.
    id_type: Oid,
}

impl TableSource {
    /// The source for pairs within `k` of column `fp_column` of `tbl` with ids `id_column`, when
    /// its simhash index can serve them: a plain table (or materialized view) whose two columns
    /// the user may read, without row-level security for the user, an integer id and a simhash64
    /// column with a valid simhash index without a predicate, and `k` at most 11. Else the query
    /// `SELECT id_column, fp_column FROM tbl` for the search in memory, which reports any error
    /// in the arguments as it always has.
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
            if pg_sys::get_rel_name(tbl).is_null() {
                raise(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                    format!("relation with OID {} does not exist", tbl.to_u32()),
                    None,
                    None,
                );
            }
            let query = format!(
                "SELECT {}, {} FROM {}",
                quote_identifier(&id_column.to_string_lossy()),
                quote_identifier(&fp_column.to_string_lossy()),
                qualified_name(tbl)
            );
            let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
            let relkind = pg_sys::get_rel_relkind(tbl) as u8;
            let fp_attnum = pg_sys::get_attnum(tbl, fp_column.as_ptr());
            let id_attnum = pg_sys::get_attnum(tbl, id_column.as_ptr());
            let plain = k <= simhash_core::buckets::MAX_PROBED_RADIUS
                && [pg_sys::RELKIND_RELATION, pg_sys::RELKIND_MATVIEW].contains(&relkind)
                && fp_attnum > 0
                && id_attnum > 0
                && pg_sys::ActiveSnapshotSet();
            if !plain {
                return Err(query);
            }
            let user = pg_sys::GetUserId();
            let select = pg_sys::ACL_SELECT as pg_sys::AclMode;
            let readable = pg_sys::pg_class_aclcheck(tbl, user, select) == pg_sys::AclResult::ACLCHECK_OK
                || [fp_attnum, id_attnum].iter().all(|&attnum| {
                    pg_sys::pg_attribute_aclcheck(tbl, attnum, user, select) == pg_sys::AclResult::ACLCHECK_OK
                });
            let row_security = pg_sys::check_enable_rls(tbl, Oid::INVALID, false)
                == pg_sys::CheckEnableRlsResult::RLS_ENABLED as core::ffi::c_int;
            let id_type = pg_sys::getBaseType(pg_sys::get_atttype(tbl, id_attnum));
            let typed = [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&id_type)
                && pg_sys::getBaseType(pg_sys::get_atttype(tbl, fp_attnum))
                    == crate::lookup::catalog::simhash64_type(schema);
            if !readable || row_security || !typed {
                return Err(query);
            }
            let index = crate::lookup::catalog::column_indexes(schema, tbl, fp_attnum).and_then(|c| c.own_index());
            let Some(index) = index else { return Err(query) };
            pgrx::debug1!(
                "simhash: the pairs of column \"{}\" of \"{}\" are read through index \"{}\"",
                fp_column.to_string_lossy(),
                qualified_name(tbl),
                CStr::from_ptr(pg_sys::get_rel_name(index)).to_string_lossy()
            );
            Ok(TableSource { relid: tbl, index, fp_attnum, id_attnum, id_type })
        }
    }

    /// Calls `on_pair(id_a, id_b, distance)` once for each pair of rows within `k` that the
    /// statement's snapshot sees.
    ///
    /// # Safety
    ///
    /// In a backend, inside a transaction, with an active snapshot.
    pub(super) unsafe fn for_each_pair(&self, k: u32, on_pair: &mut dyn FnMut(i64, i64, u32)) {
        unsafe {
            let rel = pg_sys::table_open(self.relid, pg_sys::AccessShareLock as i32);
            let index = pg_sys::index_open(self.index, pg_sys::AccessShareLock as i32);
            let snapshot = pg_sys::GetActiveSnapshot();
            let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
            let fetch = pg_sys::table_index_fetch_begin(rel);
            // The id of the row at each TID of a pair (None: not seen, or already reached through
            // another entry), and the rows reached.
            let mut ids: HashMap<u64, Option<i64>> = HashMap::new();
            let mut reached: HashSet<u64> = HashSet::new();
            let mut id_of = |fp: u64, key: u64| -> Option<i64> {
                if let Some(&id) = ids.get(&key) {
                    return id;
                }
                let id = self.fetch_id(fetch, slot, snapshot, fp, key, &mut reached);
                ids.insert(key, id);
                id
            };
            crate::index::pairs_within(index, k, &mut |x, y, distance| {
                if let (Some(a), Some(b)) = (id_of(x.0, x.1), id_of(y.0, y.1)) {
                    on_pair(a, b, distance);
                }
            });
            pg_sys::table_index_fetch_end(fetch);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::index_close(index, pg_sys::NoLock as i32);
            pg_sys::table_close(rel, pg_sys::NoLock as i32);
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
