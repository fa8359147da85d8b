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
use simhash_core::pairs::Groups;

use super::granted;
use crate::fingerprint::simhash64::SimHash64;
use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// `simhash_pair_keys(fp, k)`: the keys under which a fingerprint is paired with those within `k`
/// (`simhash_core::keyed_pairs::keys`).
#[pg_extern(sql = false)]
fn simhash_pair_keys(fp: SimHash64, k: i32) -> Vec<i32> {
    keyed_pairs::keys(fp.0, checked_radius(k)).unwrap_or_default()
}

/// `simhash_key_pairs(key, ids, fps, k, links_only)`: the pairs within `k` among the rows (ids[i],
/// fps[i]) of one key that are reported under that key, smaller id first; with `links_only` only
/// enough of them to join the same groups (each copy of a fingerprint with its first copy, and the
/// first copies of two near fingerprints), for `simhash_clusters`. Rows with a NULL fingerprint,
/// and rows whose fingerprint does not have the key, are left out; a NULL id with a fingerprint is
/// an error, as in `simhash_pairs(query, k)`. At most `maintenance_work_mem` of pairs (else 54000).
#[pg_extern(sql = false)]
fn simhash_key_pairs(
    key: i32,
    ids: Array<'_, i64>,
    // simhash64[] in SQL: the same 8-byte, by-value elements as int8[]
    fps: Array<'_, i64>,
    k: i32,
    links_only: bool,
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
    let rows = &|| format!("the {} rows of key {key}", ids.len());
    let mut row_ids: Vec<i64> = granted(crate::memory::vec_with_room(ids.len()), rows);
    let mut row_fps: Vec<u64> = granted(crate::memory::vec_with_room(ids.len()), rows);
    for (n, (id, fp)) in ids.iter().zip(fps.iter()).enumerate() {
        if n % CHECK_EVERY == 0 {
            pgrx::check_for_interrupts!();
        }
        let Some(fp) = fp else { continue };
        let Some(id) = id else {
            raise(
                PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                "near-duplicate pairs need a non-NULL id for every fingerprint".into(),
                None,
                None,
            );
        };
        row_ids.push(id);
        row_fps.push(fp as u64);
    }
    let mut pairs = Vec::new();
    let mut push = super::pair_collector(&mut pairs);
    // With `links_only`, a pair only where it joins two groups: fewer than one per row, so no
    // budget, and room for them made first.
    let mut links = granted(crate::memory::vec_with_room(if links_only { row_ids.len() } else { 0 }), rows);
    // (the groups of the key's rows, by position)
    let mut groups = granted(Groups::numbered(row_ids.len()).ok(), rows);
    let id = |i: u32| row_ids[i as usize];
    let mut link = |x: u32, y: u32, d: u32| {
        let (rx, ry) = (groups.root(x as usize), groups.root(y as usize));
        if rx != ry {
            groups.union(rx, ry);
            links.push((id(x).min(id(y)), id(x).max(id(y)), d as i32));
        }
    };
    let mut on_pairs = |a: &[u32], b: Option<&[u32]>, d: u32| match (b, links_only) {
        (None, false) => {
            for (i, &x) in a.iter().enumerate() {
                for &y in &a[i + 1..] {
                    push(id(x), id(y), d);
                }
            }
        }
        (Some(b), false) => {
            for &x in a {
                for &y in b {
                    push(id(x), id(y), d);
                }
            }
        }
        (None, true) => a[1..].iter().for_each(|&y| link(a[0], y, d)),
        (Some(b), true) => link(a[0], b[0], d),
    };
    let found = keyed_pairs::pairs_of_key(key, k, &row_fps, &mut on_pairs, &mut || {
        pg_sys::check_for_interrupts!();
    });
    drop(push);
    if links_only {
        pairs = links;
    }
    match found {
        Ok(()) => {}
        Err(KeyError::Key(key)) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{key} is not a key of near-duplicate pairs within {k}"),
            None,
            Some("The keys are those simhash_pair_keys(fp, k) returns for the same k.".into()),
        ),
        Err(KeyError::OutOfMemory) => super::pairs_out_of_memory(&rows()),
        Err(KeyError::Radius(_)) => unreachable!("checked"),
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
/// first (with `links_only`, only enough of them to join the same groups: see
/// `simhash_key_pairs`). `false` (and nothing heard) where this cannot run and the caller searches
/// in memory as for any table: a table not in Citus' metadata, columns the query form reports
/// errors for; and, with a NOTICE as they cost the coordinator memory for every row: `k` above 11,
/// a read-only transaction, a node other than the coordinator, a table in a distributed (tenant)
/// schema, or no CREATE privilege on the table's schema.
///
/// # Safety
///
/// In a backend, inside a transaction; `fcinfo` is the call's.
pub(super) unsafe fn spread_pairs(
    tbl: Oid,
    fp_column: &CStr,
    id_column: &CStr,
    k: u32,
    links_only: bool,
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
        let too_far =
            (k > MAX_KEYED_RADIUS).then(|| format!("the workers find pairs within at most {MAX_KEYED_RADIUS}"));
        let functions = [
            "simhash_pair_keys({ext}.simhash64, pg_catalog.int4)",
            "simhash_key_pairs(pg_catalog.int4, pg_catalog.int8[], {ext}.simhash64[], pg_catalog.int4, pg_catalog.bool)",
        ];
        let (ext, work) = match work_table(tbl, too_far, &functions, "0.6.0", (*(*fcinfo).flinfo).fn_oid) {
            Ok(names) => names,
            Err(why) => return on_coordinator(&why),
        };
        run(&format!("CREATE UNLOGGED TABLE {work} (key pg_catalog.int4 NOT NULL, id pg_catalog.int8, fp {ext}.simhash64 NOT NULL)"));
        distribute_by_key(&work);
        run(&format!(
            "INSERT INTO {work} (key, id, fp) SELECT pg_catalog.unnest({ext}.simhash_pair_keys(t.{fp}::{ext}.simhash64, {k})), t.{id}, t.{fp} \
             FROM {tbl} t WHERE t.{fp} IS NOT NULL",
            fp = quote_identifier(&fp_column.to_string_lossy()),
            id = quote_identifier(&id_column.to_string_lossy()),
            tbl = qualified_name(tbl),
        ));
        let pairs = format!(
            "SELECT (p.pair).id_a, (p.pair).id_b, (p.pair).distance FROM (\
             SELECT {ext}.simhash_key_pairs(w.key, pg_catalog.array_agg(w.id), pg_catalog.array_agg(w.fp), {k}, {links_only}) AS pair \
             FROM {work} w GROUP BY w.key) p"
        );
        fetch_pairs(&pairs, on_pair);
        run(&format!("DROP TABLE {work}"));
        true
    }
}

/// The extension's schema (quoted) and the name of a new work table in the schema of Citus table
/// `tbl`, where its pairs can be found on the workers; else why not: `too_far` (the radius), a
/// read-only transaction, extension objects older than `since` (that lack one of `functions`, in
/// which `{ext}` stands for the extension's schema), a node other than the coordinator, a
/// distributed (tenant) schema, or no CREATE privilege on the schema.
///
/// # Safety
///
/// In a backend, inside a transaction; `function` is the calling function, of the extension.
pub(super) unsafe fn work_table(
    tbl: Oid,
    too_far: Option<String>,
    functions: &[&str],
    since: &str,
    function: Oid,
) -> Result<(String, String), String> {
    unsafe {
        if let Some(why) = too_far {
            return Err(why);
        }
        if pg_sys::XactReadOnly || pg_sys::RecoveryInProgress() {
            return Err("the transaction is read-only, and the workers need a work table".into());
        }
        let namespace = pg_sys::get_rel_namespace(tbl);
        // (Citus' functions and catalogs, named only here, where the table is in its metadata)
        let tenant_schemas =
            if pg_sys::get_relname_relid(c"pg_dist_schema".as_ptr(), Oid::from(pg_sys::PG_CATALOG_NAMESPACE))
                == Oid::INVALID
            {
                "false".to_string()
            } else {
                format!(
                    "EXISTS (SELECT FROM pg_catalog.pg_dist_schema WHERE schemaid OPERATOR(pg_catalog.=) {})",
                    namespace.to_u32()
                )
            };
        // The functions the workers run (a library newer than the extension's objects runs them
        // until ALTER EXTENSION simhash UPDATE).
        let ext = quote_identifier(&crate::pg::names::namespace_name(pg_sys::get_func_namespace(function)));
        let functions = functions
            .iter()
            .map(|f| {
                let f = format!("{ext}.{}", f.replace("{ext}", &ext));
                format!("pg_catalog.to_regprocedure({}) IS NOT NULL", crate::pg::names::quote_literal(&f))
            })
            .collect::<Vec<_>>()
            .join(" AND ");
        let facts = format!("SELECT pg_catalog.citus_is_coordinator(), {tenant_schemas}, {functions}");
        // (read-only: a fallback takes no transaction id)
        let (coordinator, tenant, updated) =
            Spi::connect(|client| client.select(&facts, Some(1), &[])?.first().get_three::<bool, bool, bool>())
                .unwrap_or_else(|e| spi_error(e));
        if updated != Some(true) {
            return Err(format!("the extension's objects predate {since}: run ALTER EXTENSION simhash UPDATE"));
        }
        if coordinator != Some(true) {
            return Err("this node is not the coordinator, where the work table is made".into());
        }
        if tenant == Some(true) {
            return Err("its schema is a distributed schema, where a work table would be a tenant's table".into());
        }
        if !crate::pg::compat::may_create_in_schema(namespace, pg_sys::GetUserId()) {
            return Err("the workers need a work table in its schema, where the user may not create one".into());
        }
        let schema = crate::pg::names::namespace_name(namespace);
        // Unique among this node's backends (the pid) and, for names made on other nodes or left
        // by anyone, very likely (the clock).
        let pid = pg_sys::MyProcPid;
        let clock =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let work = format!(
            "{}.{}",
            quote_identifier(&schema),
            quote_identifier(&format!("simhash_pairs_{pid}_{}_{clock:x}", WORK_TABLES.fetch_add(1, Ordering::Relaxed)))
        );
        pgrx::debug1!("simhash: the pairs of \"{}\" are found on the workers through {work}", qualified_name(tbl));
        Ok((ext, work))
    }
}

/// Distributes the new work table `work` by its column `key`.
pub(super) fn distribute_by_key(work: &str) {
    run(&format!(
        "SELECT pg_catalog.create_distributed_table({}, 'key', colocate_with => 'none')",
        crate::pg::names::quote_literal(work)
    ));
}

/// Calls `on_pair(id_a, id_b, distance)` for each row of `pairs`, a query of (id_a, id_b,
/// distance), read in batches.
pub(super) fn fetch_pairs(pairs: &str, on_pair: &mut dyn FnMut(i64, i64, u32)) {
    Spi::connect(|client| {
        let mut cursor = client.open_cursor(pairs, &[]);
        loop {
            let batch = cursor.fetch(10_000).unwrap_or_else(|e| spi_error(e));
            if batch.is_empty() {
                break;
            }
            for row in batch {
                let id = |c: usize| row.get::<i64>(c).ok().flatten().unwrap_or_else(|| wrong_row());
                let distance = row.get::<i32>(3).ok().flatten().unwrap_or_else(|| wrong_row());
                on_pair(id(1), id(2), distance as u32);
            }
            // pgrx leaves fetched tables to the end of the SPI connection: free each batch now.
            unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
            pg_sys::check_for_interrupts!();
        }
    });
}

/// Whether both columns exist, the id an integer and the fingerprint a simhash64 (else
/// the query form reports the error).
unsafe fn typed_columns(tbl: Oid, fp_column: &CStr, id_column: &CStr, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    unsafe {
        let fp_attnum = pg_sys::get_attnum(tbl, fp_column.as_ptr());
        let id_attnum = pg_sys::get_attnum(tbl, id_column.as_ptr());
        if fp_attnum <= 0 || id_attnum <= 0 {
            return false;
        }
        super::input::pair_columns_typed(
            tbl,
            id_attnum,
            fp_attnum,
            pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid),
        )
    }
}

fn wrong_row() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        "simhash: the workers returned a pair with a NULL id or distance".into(),
        None,
        None,
    )
}

pub(super) fn run(statement: &str) {
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

/// The elements of a key's arrays read between two checks for interrupts (an array of a
/// gigabyte holds about a hundred million).
pub(super) const CHECK_EVERY: usize = 1 << 16;
