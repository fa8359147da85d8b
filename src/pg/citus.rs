//! Citus, when it is installed: whether a table's rows live in shards (on other nodes, or beside
//! it), so that its own relation and indexes on this node do not hold them (they are empty, or
//! hold stale rows from before the table was distributed).

use pgrx::pg_sys::{self, Datum, Oid};

/// Whether `relid` is a table in Citus' metadata (`pg_dist_partition`: distributed, reference or
/// Citus local), whose rows are in its shards, so that only a query through Citus' executor reads
/// them all, and the indexes of this relation are empty. A shard itself is not in the metadata.
/// Read with a catalog scan, not SPI: the planner asks too.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn is_citus_table(relid: Oid) -> bool {
    unsafe {
        // pg_dist_partition exists where the citus extension has been created.
        let catalog = pg_sys::get_relname_relid(c"pg_dist_partition".as_ptr(), Oid::from(pg_sys::PG_CATALOG_NAMESPACE));
        if catalog == Oid::INVALID {
            return false;
        }
        // (None if DROP EXTENSION citus committed since the name was looked up)
        let rel = pg_sys::try_relation_open(catalog, pg_sys::AccessShareLock as i32);
        if rel.is_null() {
            return false;
        }
        // Citus' own unique index on logicalrelid, as Citus reads it; a scan of the table without it.
        let index = pg_sys::get_relname_relid(
            c"pg_dist_partition_logical_relid_index".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
        // logicalrelid, its first column (and the index's)
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as u16,
            Oid::from(pg_sys::F_OIDEQ),
            Datum::from(relid),
        );
        let scan = pg_sys::systable_beginscan(rel, index, index != Oid::INVALID, std::ptr::null_mut(), 1, &mut key);
        let found = !pg_sys::systable_getnext(scan).is_null();
        pg_sys::systable_endscan(scan);
        pg_sys::relation_close(rel, pg_sys::AccessShareLock as i32);
        found
    }
}
