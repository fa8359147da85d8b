//! `simhash_pairs(query, k)` and `simhash_clusters(query, k)`: all near-duplicate pairs of a set of
//! fingerprints, found in memory with Manku-style permuted tables (`simhash_core::pairs`), not with a
//! nested loop of index probes. The set is any query returning (id, fingerprint); rows with a NULL
//! fingerprint are skipped. Memory: about 40 bytes per row plus 20 per pair found.

use std::time::{Duration, Instant};

use pgrx::prelude::*;

use crate::errors::raise;
use crate::SimHash64;

/// How often a long run reports its progress.
const NOTICE_EVERY: Duration = Duration::from_secs(10);

#[pg_extern(sql = false)]
fn simhash_pairs(query: &str, k: i32) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(distance, i32))> {
    let k = check_radius(k);
    let (ids, fps) = read_fingerprints(query);
    let mut pairs = Vec::new();
    find_pairs(&fps, k, &mut |i, j, d| pairs.push((ids[i], ids[j], d as i32)));
    TableIterator::new(pairs)
}

/// Every row that has a near-duplicate, with the smallest id of its group (the connected component
/// of the "within k" relation, so chains link rows that are further apart than k).
#[pg_extern(sql = false)]
fn simhash_clusters(query: &str, k: i32) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    let k = check_radius(k);
    let (ids, fps) = read_fingerprints(query);
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut linked = vec![false; ids.len()];
    find_pairs(&fps, k, &mut |i, j, _| {
        linked[i] = true;
        linked[j] = true;
        let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
        // The root of each group is its row with the smallest id.
        if ids[ri] < ids[rj] { parent[rj] = ri } else { parent[ri] = rj }
    });
    let rows: Vec<(i64, i64)> = (0..ids.len())
        .filter(|&i| linked[i])
        .map(|i| (ids[i], ids[root(&mut parent, i)]))
        .collect();
    TableIterator::new(rows)
}

fn check_radius(k: i32) -> u32 {
    let max = simhash_core::pairs::MAX_PAIRS_RADIUS as i32;
    if !(0..=max).contains(&k) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("radius {k} is out of range for near-duplicate pairs"),
            Some(format!("The radius must be between 0 and {max}.")),
        );
    }
    k as u32
}

/// Runs `query` through a cursor, as `SELECT id::bigint, fp FROM (query) AS q(id, fp)`.
fn read_fingerprints(query: &str) -> (Vec<i64>, Vec<u64>) {
    let wrapped = format!("SELECT q.id::bigint, q.fp FROM ({query}) AS q(id, fp)");
    let mut ids = Vec::new();
    let mut fps = Vec::new();
    Spi::connect(|client| {
        let mut cursor = client.open_cursor(wrapped.as_str(), &[]);
        loop {
            let batch = cursor.fetch(10_000).unwrap_or_else(|e| spi_failed(e));
            if batch.is_empty() {
                break;
            }
            for row in batch {
                let fp = row.get::<SimHash64>(2).unwrap_or_else(|e| spi_failed(e));
                let Some(fp) = fp else { continue };
                let Some(id) = row.get::<i64>(1).unwrap_or_else(|e| spi_failed(e)) else {
                    raise(
                        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                        "near-duplicate pairs need a non-NULL id for every fingerprint".into(),
                        Some("The first column of the query is the row id.".into()),
                    );
                };
                ids.push(id);
                fps.push(fp.0);
            }
            pg_sys::check_for_interrupts!();
        }
    });
    (ids, fps)
}

/// Reading a row fails in pgrx only when a column's type does not fit (pgrx's own message names
/// Rust types, so it is not passed on).
fn spi_failed(_: pgrx::spi::SpiError) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        "the query for near-duplicate pairs must return (id, simhash64)".into(),
        Some("The first column is an integer id, the second a simhash64 fingerprint.".into()),
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
                "simhash: {done} of {all} tables searched, {found} pairs so far ({} rows, {:.0} s)",
                fps.len(),
                started.elapsed().as_secs_f64()
            );
        }
    });
}
