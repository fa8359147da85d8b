//! `simhash_pairs` / `simhash_clusters` of a Citus table, found on the workers: each row is sent to
//! a work table distributed by key under each of its keys (`simhash_pair_keys`, a repartitioned
//! `INSERT ... SELECT` that moves rows between workers), each shard pairs the rows of each of its
//! keys (`simhash_key_pairs`, pushed down with the `GROUP BY` of the distribution column), and only
//! the pairs come back to the coordinator. `simhash_core::keyed_pairs` says why each pair within
//! `k` comes out exactly once.
//!
//! The work table is created in the table's schema and dropped before the call returns, in the
//! caller's transaction: no other session ever sees it, and an error leaves nothing behind.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use simhash_core::keyed_pairs::{self, KeyError, MAX_KEYED_RADIUS};

use crate::fingerprint::simhash64::SimHash64;
use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// `simhash_pair_keys(fp, k)`: the keys under which a fingerprint is paired with those within `k`
/// (`simhash_core::keyed_pairs::keys`).
#[pg_extern(sql = false)]
fn simhash_pair_keys(fp: SimHash64, k: i32) -> Vec<i32> {
    keyed_pairs::keys(fp.0, checked_radius(k)).unwrap_or_default()
}

/// `simhash_key_pairs(key, ids, fps, k)`: the pairs within `k` among the rows (ids[i], fps[i]) of one
/// key that are reported under that key, smaller id first. Rows with a NULL id or fingerprint, and
/// rows whose fingerprint does not have the key, are left out.
#[pg_extern(sql = false)]
fn simhash_key_pairs(
    key: i32,
    ids: Array<'_, i64>,
    // simhash64[] in SQL: the same 8-byte, by-value elements as int8[]
    fps: Array<'_, i64>,
    k: i32,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(distance, i32))> {
    let k = checked_radius(k);
    if ids.len() != fps.len() {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{} ids and {} fingerprints do not pair up", ids.len(), fps.len()),
            None,
            Some("Pass one id for each fingerprint, in the same order.".into()),
        );
    }
    let entries: Vec<(u64, i64)> = ids.iter().zip(fps.iter()).filter_map(|(id, fp)| Some((fp? as u64, id?))).collect();
    let mut pairs = Vec::new();
    let found =
        keyed_pairs::pairs_of_key(key, k, &entries, &mut |&a, &b, d| pairs.push((a.min(b), a.max(b), d as i32)));
    if let Err(KeyError::Key(key)) = found {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{key} is not a key of near-duplicate pairs within {k}"),
            None,
            Some("The keys are those simhash_pair_keys(fp, k) returns for the same k.".into()),
        );
    }
    TableIterator::new(pairs)
}

fn checked_radius(k: i32) -> u32 {
    if !(0..=MAX_KEYED_RADIUS as i32).contains(&k) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("radius {k} is out of range for near-duplicate pairs by key"),
            Some(format!("The radius must be between 0 and {MAX_KEYED_RADIUS}.")),
            None,
        );
    }
    k as u32
}

/// Numbers the work tables of one backend.
static WORK_TABLES: AtomicU32 = AtomicU32::new(0);

/// The pairs within `k` of column `fp_column` of Citus table `tbl`, with ids `id_column`, found on
/// the workers as the module says; `on_pair(id_a, id_b, distance)` hears each once, smaller id
/// first. `false` (and nothing heard) where this cannot run and the caller searches in memory as
/// for any table: a table not in Citus' metadata, columns the query form reports errors for, `k`
/// above 11, a read-only transaction or no CREATE privilege on the table's schema (the last three
/// with a NOTICE, as they cost the coordinator memory for every row).
///
/// # Safety
///
/// In a backend, inside a transaction; `fcinfo` is the call's.
pub(super) unsafe fn spread_pairs(
    tbl: Oid,
    fp_column: &CStr,
    id_column: &CStr,
    k: u32,
    fcinfo: pg_sys::FunctionCallInfo,
    on_pair: &mut dyn FnMut(i64, i64, u32),
) -> bool {
    unsafe {
        if !crate::pg::citus::is_citus_table(tbl) || !typed_columns(tbl, fp_column, id_column, fcinfo) {
            return false;
        }
        let on_coordinator = |why: &str| {
            notice!(
                "simhash: the pairs of Citus table \"{}\" are found on the coordinator, with all its rows in memory: {why}",
                qualified_name(tbl)
            );
            false
        };
        if k > MAX_KEYED_RADIUS {
            return on_coordinator(&format!("the workers find pairs within at most {MAX_KEYED_RADIUS}"));
        }
        if pg_sys::XactReadOnly || pg_sys::RecoveryInProgress() {
            return on_coordinator("the transaction is read-only, and the workers need a work table");
        }
        let namespace = pg_sys::get_rel_namespace(tbl);
        if !crate::pg::compat::may_create_in_schema(namespace, pg_sys::GetUserId()) {
            return on_coordinator("the workers need a work table in its schema, where the user may not create one");
        }
        let schema = CStr::from_ptr(pg_sys::get_namespace_name(namespace)).to_string_lossy().into_owned();
        let ext = CStr::from_ptr(pg_sys::get_namespace_name(pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid)))
            .to_string_lossy()
            .into_owned();
        let work = format!(
            "{}.{}",
            quote_identifier(&schema),
            quote_identifier(&format!(
                "simhash_pairs_{}_{}",
                { pg_sys::MyProcPid },
                WORK_TABLES.fetch_add(1, Ordering::Relaxed)
            ))
        );
        let ext = quote_identifier(&ext);
        pgrx::debug1!("simhash: the pairs of \"{}\" are found on the workers through {work}", qualified_name(tbl));
        run(&format!(
            "CREATE UNLOGGED TABLE {work} (key pg_catalog.int4 NOT NULL, id pg_catalog.int8 NOT NULL, fp {ext}.simhash64 NOT NULL)"
        ));
        run(&format!("SELECT pg_catalog.create_distributed_table('{work}', 'key', colocate_with => 'none')"));
        run(&format!(
            "INSERT INTO {work} (key, id, fp) SELECT pg_catalog.unnest({ext}.simhash_pair_keys(t.{fp}, {k})), t.{id}, t.{fp} \
             FROM {tbl} t WHERE t.{fp} IS NOT NULL",
            fp = quote_identifier(&fp_column.to_string_lossy()),
            id = quote_identifier(&id_column.to_string_lossy()),
            tbl = qualified_name(tbl),
        ));
        let pairs = format!(
            "SELECT (p.pair).id_a, (p.pair).id_b, (p.pair).distance FROM (\
             SELECT {ext}.simhash_key_pairs(w.key, pg_catalog.array_agg(w.id), pg_catalog.array_agg(w.fp), {k}) AS pair \
             FROM {work} w GROUP BY w.key) p"
        );
        Spi::connect(|client| {
            let mut cursor = client.open_cursor(pairs.as_str(), &[]);
            loop {
                let batch = cursor.fetch(10_000).unwrap_or_else(|e| spi_error(e));
                if batch.is_empty() {
                    break;
                }
                for row in batch {
                    let get = |c: usize| row.get::<i64>(c).ok().flatten().unwrap_or_default();
                    on_pair(get(1), get(2), row.get::<i32>(3).ok().flatten().unwrap_or_default() as u32);
                }
                // pgrx leaves fetched tables to the end of the SPI connection: free each batch now.
                pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable);
                pg_sys::check_for_interrupts!();
            }
        });
        run(&format!("DROP TABLE {work}"));
        true
    }
}

/// Whether both columns exist, are stored, the id an integer and the fingerprint a simhash64 (else
/// the query form reports the error).
unsafe fn typed_columns(tbl: Oid, fp_column: &CStr, id_column: &CStr, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    unsafe {
        let fp_attnum = pg_sys::get_attnum(tbl, fp_column.as_ptr());
        let id_attnum = pg_sys::get_attnum(tbl, id_column.as_ptr());
        if fp_attnum <= 0 || id_attnum <= 0 {
            return false;
        }
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let id_type = pg_sys::getBaseType(pg_sys::get_atttype(tbl, id_attnum));
        [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&id_type)
            && pg_sys::getBaseType(pg_sys::get_atttype(tbl, fp_attnum))
                == crate::lookup::catalog::simhash64_type(schema)
    }
}

fn run(statement: &str) {
    if let Err(e) = Spi::run(statement) {
        spi_error(e);
    }
}

fn spi_error(e: pgrx::spi::SpiError) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("simhash: a statement of the pairs on the workers failed: {e}"),
        None,
        None,
    )
}
