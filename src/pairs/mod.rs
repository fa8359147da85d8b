//! `simhash_pairs(query, k)` and `simhash_clusters(query, k)`: all near-duplicate pairs of a set of
//! fingerprints, found in memory with Manku-style permuted tables (`simhash_core::pairs`), not with a
//! nested loop of index probes. The set is any query returning (integer id, simhash64); rows with a
//! NULL fingerprint are skipped. Memory: about 50 bytes per row, plus 24 bytes per pair returned by
//! `simhash_pairs`, which stops with an error beyond `maintenance_work_mem`.
//!
//! The forms that name a table and columns read the column's simhash index instead where it has one
//! (`through_index`): memory then holds the pairs and the rows in them only.

use std::collections::HashMap;
use std::ffi::CStr;
use std::time::{Duration, Instant};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use simhash_core::pairs::Groups;

use crate::pg::errors::raise;

mod spread;
mod through_index;
use through_index::TableSource;

/// How often a long run reports its progress.
const NOTICE_EVERY: Duration = Duration::from_secs(10);

/// Bytes a returned pair takes in memory.
const PAIR_BYTES: usize = 24;

/// The rows of `simhash_clusters`: (id, representative).
type Clusters = TableIterator<'static, (name!(id, i64), name!(representative, i64))>;

#[pg_extern(sql = false)]
fn simhash_pairs(
    query: &str,
    k: i32,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(distance, i32))> {
    TableIterator::new(pairs_of_query(query, check_radius(k)))
}

/// `simhash_pairs(tbl, fp_column, k, id_column)`: through the column's simhash index when it has
/// one ([`TableSource`]), else as `simhash_pairs('SELECT id_column, fp_column FROM tbl', k)`.
#[pg_extern(sql = false)]
fn simhash_pairs_of_table(
    tbl: Oid,
    fp_column: &CStr,
    k: i32,
    id_column: &CStr,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(distance, i32))> {
    let k = check_radius(k);
    let pairs = match unsafe { TableSource::of(tbl, fp_column, id_column, k, fcinfo) } {
        Ok(source) => {
            let mut pairs = Vec::new();
            let mut push = pair_collector(&mut pairs);
            unsafe {
                source.for_each_pair(k, &mut |a, b, d| match b {
                    None => {
                        for (i, &x) in a.iter().enumerate() {
                            for &y in &a[i + 1..] {
                                push(x, y, d);
                            }
                        }
                    }
                    Some(b) => {
                        for &x in a {
                            for &y in b {
                                push(x, y, d);
                            }
                        }
                    }
                })
            };
            drop(push);
            pairs
        }
        Err(query) => {
            let mut pairs = Vec::new();
            let mut push = pair_collector(&mut pairs);
            let spread = unsafe { spread::spread_pairs(tbl, fp_column, id_column, k, false, fcinfo, &mut push) };
            drop(push);
            if spread {
                pairs
            } else {
                pairs_of_query(&query, k)
            }
        }
    };
    TableIterator::new(pairs)
}

/// `simhash_clusters(tbl, fp_column, k, id_column)`, through the column's simhash index as
/// [`simhash_pairs_of_table`] is.
#[pg_extern(sql = false)]
fn simhash_clusters_of_table(
    tbl: Oid,
    fp_column: &CStr,
    k: i32,
    id_column: &CStr,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    let k = check_radius(k);
    match unsafe { TableSource::of(tbl, fp_column, id_column, k, fcinfo) } {
        Ok(source) => {
            // The groups of the pairs, as simhash_clusters_from_pairs forms them. Rows in a pair
            // join one group: every row of `a` (and of `b`) with the first of `a`.
            let mut groups = GroupsById::default();
            unsafe {
                source.for_each_pair(k, &mut |a, b, _| {
                    let linked = match b {
                        None => a.len() > 1,
                        Some(b) => !a.is_empty() && !b.is_empty(),
                    };
                    if linked {
                        for &id in a.iter().chain(b.unwrap_or_default()) {
                            groups.join(a[0], id);
                        }
                    }
                })
            };
            TableIterator::new(groups.rows())
        }
        Err(query) => {
            let mut groups = GroupsById::default();
            if unsafe {
                spread::spread_pairs(tbl, fp_column, id_column, k, true, fcinfo, &mut |a, b, _| groups.join(a, b))
            } {
                TableIterator::new(groups.rows())
            } else {
                clusters_of_query(&query, k)
            }
        }
    }
}

/// A function that collects pairs (smaller id first) within `maintenance_work_mem`.
fn pair_collector(pairs: &mut Vec<(i64, i64, i32)>) -> impl FnMut(i64, i64, u32) + '_ {
    let budget = unsafe { pg_sys::maintenance_work_mem } as usize * 1024 / PAIR_BYTES;
    move |a: i64, b: i64, d: u32| {
        if pairs.len() >= budget {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("more than {budget} near-duplicate pairs do not fit in maintenance_work_mem"),
                Some("Use a smaller radius, deduplicate exact copies first, or raise maintenance_work_mem.".into()),
                None,
            );
        }
        pairs.push((a.min(b), a.max(b), d as i32));
    }
}

/// The pairs of the (id, fingerprint) rows of `query`, found in memory.
fn pairs_of_query(query: &str, k: u32) -> Vec<(i64, i64, i32)> {
    let (ids, fps) = read_fingerprints(query);
    let groups = simhash_core::pairs::Duplicates::group(&fps);
    let mut pairs: Vec<(i64, i64, i32)> = Vec::new();
    let mut push = pair_collector(&mut pairs);
    // Rows with the same fingerprint are pairs at distance 0 ...
    for rows in groups.repeated() {
        for (x, &i) in rows.iter().enumerate() {
            for &j in &rows[x + 1..] {
                push(ids[i as usize], ids[j as usize], 0);
            }
        }
    }
    // ... and every row of a near pair of distinct fingerprints pairs with every row of the other.
    find_pairs(&groups.distinct, k, &mut |u, v, d| {
        for &i in groups.holders(u) {
            for &j in groups.holders(v) {
                push(ids[i as usize], ids[j as usize], d);
            }
        }
    });
    drop(push);
    pairs
}

/// Every row that has a near-duplicate, with the smallest id of its group (the connected component
/// of the "within k" relation, so chains link rows that are further apart than k).
#[pg_extern(sql = false)]
fn simhash_clusters(query: &str, k: i32) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    clusters_of_query(query, check_radius(k))
}

fn clusters_of_query(query: &str, k: u32) -> Clusters {
    let (ids, fps) = read_fingerprints(query);
    let groups = simhash_core::pairs::Duplicates::group(&fps);
    let mut linked = vec![false; ids.len()];
    // The rows, numbered as read; each group is represented by its smallest id.
    let mut groups_of = Groups::of(ids);
    for rows in groups.repeated() {
        for &i in rows {
            linked[i as usize] = true;
            groups_of.union(rows[0] as usize, i as usize);
        }
    }
    find_pairs(&groups.distinct, k, &mut |u, v, _| {
        for &i in groups.holders(u).iter().chain(groups.holders(v)) {
            linked[i as usize] = true;
        }
        groups_of.union(groups.holders(u)[0] as usize, groups.holders(v)[0] as usize);
    });
    let rows: Vec<(i64, i64)> =
        (0..groups_of.len()).filter(|&i| linked[i]).map(|i| (groups_of.key(i), groups_of.representative(i))).collect();
    TableIterator::new(rows)
}

/// `simhash_clusters_from_pairs(query)`: the groups (connected components) of the pairs a query
/// returns as (id_a, id_b): every id in a pair, with the smallest id of its group. For pairs that
/// were verified (`simhash_pairs(..., text_column, min_similarity)`), so that groups do not chain
/// through pairs whose texts differ. Memory: one hash-map entry and two 8-byte slots per distinct id.
#[pg_extern(sql = false)]
fn simhash_clusters_from_pairs(query: &str) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    let mut groups = GroupsById::default();
    read_pairs_of_columns(
        query,
        ["id_a", "id_b"],
        &|[a, b], _| is_integer(a) && is_integer(b),
        wrong_pairs_shape,
        &mut |a, b| {
            if let (Some(a), Some(b)) = (a, b) {
                groups.join(a, b);
            }
        },
    );
    TableIterator::new(groups.rows())
}

/// The groups (connected components) of ids joined in pairs: one hash-map entry and two 8-byte
/// slots per distinct id.
#[derive(Default)]
struct GroupsById {
    index: HashMap<i64, usize>,
    groups: Groups<i64>,
}

impl GroupsById {
    /// Puts `a` and `b` in one group.
    fn join(&mut self, a: i64, b: i64) {
        let (i, j) = (self.node(a), self.node(b));
        self.groups.union(i, j);
    }

    fn node(&mut self, id: i64) -> usize {
        let groups = &mut self.groups;
        *self.index.entry(id).or_insert_with(|| groups.add(id))
    }

    /// Every id joined, with the smallest id of its group.
    fn rows(&mut self) -> Vec<(i64, i64)> {
        (0..self.groups.len()).map(|i| (self.groups.key(i), self.groups.representative(i))).collect()
    }
}

fn check_radius(k: i32) -> u32 {
    let max = simhash_core::pairs::MAX_PAIRS_RADIUS as i32;
    if !(0..=max).contains(&k) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("radius {k} is out of range for near-duplicate pairs"),
            Some(format!("The radius must be between 0 and {max}.")),
            None,
        );
    }
    k as u32
}

/// Runs `query` through a cursor and returns its (id, fingerprint) rows with a fingerprint.
fn read_fingerprints(query: &str) -> (Vec<i64>, Vec<u64>) {
    let mut ids = Vec::new();
    let mut fps = Vec::new();
    let shape_ok =
        |[id, fp]: [Oid; 2], simhash64: Oid| is_integer(id) && unsafe { pg_sys::getBaseType(fp) } == simhash64;
    read_pairs_of_columns(query, ["id", "fp"], &shape_ok, wrong_shape, &mut |id, fp| {
        let Some(fp) = fp else { return };
        let Some(id) = id else {
            raise(
                PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                "near-duplicate pairs need a non-NULL id for every fingerprint".into(),
                Some("The first column of the query is the row id.".into()),
                None,
            );
        };
        ids.push(id);
        fps.push(fp as u64);
    });
    (ids, fps)
}

/// Whether a column of this type is an integer id (smallint, integer or bigint, or a domain).
fn is_integer(type_oid: Oid) -> bool {
    [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&unsafe { pg_sys::getBaseType(type_oid) })
}

/// Whether column `id_attnum` of table `tbl` is an integer id and column `fp_attnum` a simhash64 of
/// the extension in `schema` (or domains over them), as the query form requires.
///
/// # Safety
///
/// In a backend, inside a transaction; both columns exist.
unsafe fn pair_columns_typed(tbl: Oid, id_attnum: i16, fp_attnum: i16, schema: Oid) -> bool {
    unsafe {
        is_integer(pg_sys::get_atttype(tbl, id_attnum))
            && pg_sys::getBaseType(pg_sys::get_atttype(tbl, fp_attnum))
                == crate::lookup::catalog::simhash64_type(schema)
    }
}

/// Runs `query` through a cursor, its first two columns named `names`, and calls `row` with each
/// row's two values as 64-bit integers (`None` for NULL). The column types are checked once, up
/// front, by `shape_ok(types, simhash64 type)`; `wrong` raises the error for a query of another shape.
fn read_pairs_of_columns(
    query: &str,
    names: [&str; 2],
    shape_ok: &dyn Fn([Oid; 2], Oid) -> bool,
    wrong: fn() -> !,
    row: &mut dyn FnMut(Option<i64>, Option<i64>),
) {
    // On its own lines, so that a trailing comment or semicolon in the user's text does no harm.
    let query = query.trim_end().trim_end_matches(';');
    let [a, b] = names;
    let source = format!("(\n{query}\n) AS q({a}, {b})");
    Spi::connect(|client| {
        let simhash64 = client
            .select(
                "SELECT t.oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_extension e \
                 ON t.typnamespace OPERATOR(pg_catalog.=) e.extnamespace \
                 WHERE e.extname OPERATOR(pg_catalog.=) 'simhash'::pg_catalog.name \
                 AND t.typname OPERATOR(pg_catalog.=) 'simhash64'::pg_catalog.name",
                None,
                &[],
            )
            .and_then(|table| table.first().get_one::<Oid>())
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                raise(
                    PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                    "type simhash64 of extension simhash does not exist".into(),
                    None,
                    None,
                )
            });
        let shape = client.select(&format!("SELECT q.{a}, q.{b} FROM {source} LIMIT 0"), None, &[]);
        let shape = shape.unwrap_or_else(|_| wrong());
        let types = [1, 2].map(|c| shape.column_type_oid(c).map(|t| t.value()).unwrap_or_else(|_| wrong()));
        if !shape_ok(types, simhash64) {
            wrong();
        }
        let mut cursor = client.open_cursor(format!("SELECT q.{a}::bigint, q.{b}::bigint FROM {source}").as_str(), &[]);
        loop {
            let batch = cursor.fetch(10_000).unwrap_or_else(|_| wrong());
            if batch.is_empty() {
                break;
            }
            for r in batch {
                row(r.get::<i64>(1).unwrap_or_else(|_| wrong()), r.get::<i64>(2).unwrap_or_else(|_| wrong()));
            }
            // pgrx leaves fetched tables to the end of the SPI connection: free each batch now.
            unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
            pg_sys::check_for_interrupts!();
        }
    });
}

fn wrong_pairs_shape() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        "the query for near-duplicate clusters must return (id_a, id_b)".into(),
        Some("Both columns are integer ids (smallint, integer or bigint), as simhash_pairs returns them.".into()),
        None,
    )
}

fn wrong_shape() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        "the query for near-duplicate pairs must return (id, simhash64)".into(),
        Some(
            "The first column is an integer id (smallint, integer or bigint), the second a simhash64 fingerprint."
                .into(),
        ),
        None,
    )
}

/// The core search, with cancel checks and a NOTICE every `NOTICE_EVERY` of a long run.
fn find_pairs(fps: &[u64], k: u32, on_pair: &mut dyn FnMut(usize, usize, u32)) {
    let started = Instant::now();
    let mut last_notice = started;
    simhash_core::pairs::for_each_pair(fps, k, on_pair, &mut |done, all, found| {
        pg_sys::check_for_interrupts!();
        if last_notice.elapsed() >= NOTICE_EVERY {
            last_notice = Instant::now();
            notice!(
                "simhash: {done} of {all} tables searched, {found} pairs so far ({} distinct fingerprints, {:.0} s)",
                fps.len(),
                started.elapsed().as_secs_f64()
            );
        }
    });
}
