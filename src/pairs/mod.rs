//! `simhash_pairs(query, k)` and `simhash_clusters(query, k)`: all near-duplicate pairs of a set of
//! fingerprints, found in memory with Manku-style permuted tables (`simhash_core::pairs`), not with a
//! nested loop of index probes. The set is any query returning (integer id, simhash64); rows with a
//! NULL fingerprint are skipped. Memory: about 50 bytes per row, plus 24 bytes per pair returned by
//! `simhash_pairs`, which stops with an error beyond `maintenance_work_mem`. Memory the system
//! refuses for the rows is ERROR 53200 ([`pairs_out_of_memory`]), not the abort of the backend.
//!
//! The forms that name a table and columns read the column's simhash index instead where it has one
//! (`through_index`): memory then holds the pairs and the rows in them only. On a `bit(n)` column
//! of codes (`crate::codes`) they join the table with itself through its simhash index (`codes`).

use std::collections::HashMap;
use std::ffi::CStr;
use std::time::{Duration, Instant};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use simhash_core::pairs::{Groups, OutOfMemory};

use crate::memory::out_of_memory;
use crate::pg::errors::raise;

mod code_keys;
mod codes;
mod input;
mod spread;
mod through_index;
mod verified;
use input::{is_integer, read_fingerprints, read_pairs_of_columns, wrong_pairs_shape};
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
    // A bit(n) column: codes of any length, through a self-join on the simhash index.
    if unsafe { codes::is_code_column(tbl, fp_column) } {
        let k = codes::check_code_radius(k);
        let mut pairs = Vec::new();
        let mut push = pair_collector(&mut pairs);
        unsafe {
            codes::for_each_code_pair(tbl, fp_column, id_column, k, false, (*(*fcinfo).flinfo).fn_oid, &mut push)
        };
        drop(push);
        return TableIterator::new(pairs);
    }
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
    if unsafe { codes::is_code_column(tbl, fp_column) } {
        let k = codes::check_code_radius(k);
        let mut groups = GroupsById::default();
        let function = unsafe { (*(*fcinfo).flinfo).fn_oid };
        unsafe {
            codes::for_each_code_pair(tbl, fp_column, id_column, k, true, function, &mut |a, b, _| groups.join(a, b))
        };
        return TableIterator::new(groups.rows());
    }
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

/// A function that collects pairs (smaller id first) within `maintenance_work_mem` (and the memory
/// the system grants: else ERROR 53200).
fn pair_collector(pairs: &mut Vec<(i64, i64, i32)>) -> impl FnMut(i64, i64, u32) + '_ {
    let budget = unsafe { pg_sys::maintenance_work_mem } as usize * 1024 / PAIR_BYTES;
    move |a: i64, b: i64, d: u32| {
        // (the callers push pairs in loops of their own: a check every 64k pairs)
        if pairs.len() % 65_536 == 65_535 {
            pg_sys::check_for_interrupts!();
        }
        if pairs.len() >= budget {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("more than {budget} near-duplicate pairs do not fit in maintenance_work_mem"),
                Some("Use a smaller radius, deduplicate exact copies first, or raise maintenance_work_mem.".into()),
                None,
            );
        }
        let held = pairs.len();
        granted(crate::memory::push(pairs, (a.min(b), a.max(b), d as i32)), &|| {
            format!("more than {held} near-duplicate pairs")
        });
    }
}

/// ERROR 53200 (out_of_memory) of a search for near-duplicate pairs or clusters: out of memory for
/// `what` (e.g. "the 2000000 rows of a near-duplicate search").
#[track_caller]
pub(super) fn pairs_out_of_memory(what: &str) -> ! {
    out_of_memory(
        format!("out of memory for {what}"),
        "A search for near-duplicate pairs or clusters holds its rows and pairs in memory: search fewer \
         rows at a time, or give the server more memory.",
    )
}

/// `value`, or [`pairs_out_of_memory`] for `what()` when memory was refused (`None`).
#[track_caller]
pub(super) fn granted<T>(value: Option<T>, what: &dyn Fn() -> String) -> T {
    value.unwrap_or_else(|| pairs_out_of_memory(&what()))
}

/// `result`, or [`pairs_out_of_memory`] for the `rows` rows of a near-duplicate search.
#[track_caller]
pub(super) fn or_out_of_memory<T>(result: Result<T, OutOfMemory>, rows: usize) -> T {
    result.unwrap_or_else(|OutOfMemory| pairs_out_of_memory(&format!("the {rows} rows of a near-duplicate search")))
}

/// The pairs of the (id, fingerprint) rows of `query`, found in memory.
fn pairs_of_query(query: &str, k: u32) -> Vec<(i64, i64, i32)> {
    let (ids, fps) = read_fingerprints(query);
    let groups =
        or_out_of_memory(simhash_core::pairs::Duplicates::group(&fps, crate::fingerprint::text::INTERRUPTS), ids.len());
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
    let rows = ids.len();
    let groups =
        or_out_of_memory(simhash_core::pairs::Duplicates::group(&fps, crate::fingerprint::text::INTERRUPTS), rows);
    let mut linked = or_out_of_memory(simhash_core::pairs::vec_with_room(rows), rows);
    linked.resize(rows, false);
    // The rows, numbered as read; each group is represented by its smallest id.
    let mut groups_of = or_out_of_memory(Groups::of(ids), rows);
    // (a check for interrupts every STEP distinct fingerprints: a union each of millions of rows)
    for (u, rows) in (0..groups.distinct.len()).map(|u| (u, groups.holders(u))) {
        if u % simhash_core::interrupt::STEP == 0 {
            pg_sys::check_for_interrupts!();
        }
        if rows.len() > 1 {
            for &i in rows {
                linked[i as usize] = true;
                groups_of.union(rows[0] as usize, i as usize);
            }
        }
    }
    find_pairs(&groups.distinct, k, &mut |u, v, _| {
        for &i in groups.holders(u).iter().chain(groups.holders(v)) {
            linked[i as usize] = true;
        }
        groups_of.union(groups.holders(u)[0] as usize, groups.holders(v)[0] as usize);
    });
    let mut out = or_out_of_memory(simhash_core::pairs::vec_with_room(linked.iter().filter(|&&l| l).count()), rows);
    for start in (0..rows).step_by(simhash_core::interrupt::STEP) {
        pg_sys::check_for_interrupts!();
        let piece = start..(start + simhash_core::interrupt::STEP).min(rows);
        out.extend(piece.filter(|&i| linked[i]).map(|i| (groups_of.key(i), groups_of.representative(i))));
    }
    TableIterator::new(out)
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
        if let Some(&node) = self.index.get(&id) {
            return node;
        }
        let held = self.groups.len();
        let what = &|| format!("the groups of the {held} rows in near-duplicate pairs");
        granted(self.index.try_reserve(1).ok(), what);
        let node = granted(self.groups.add(id).ok(), what);
        self.index.insert(id, node);
        node
    }

    /// Every id joined, with the smallest id of its group.
    fn rows(&mut self) -> Vec<(i64, i64)> {
        let n = self.groups.len();
        let mut rows = or_out_of_memory(simhash_core::pairs::vec_with_room(n), n);
        for start in (0..n).step_by(simhash_core::interrupt::STEP) {
            pg_sys::check_for_interrupts!();
            let piece = start..(start + simhash_core::interrupt::STEP).min(n);
            rows.extend(piece.map(|i| (self.groups.key(i), self.groups.representative(i))));
        }
        rows
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

/// The core search, with cancel checks and a NOTICE every `NOTICE_EVERY` of a long run.
fn find_pairs(fps: &[u64], k: u32, on_pair: &mut dyn FnMut(usize, usize, u32)) {
    let started = Instant::now();
    let mut last_notice = started;
    let found = simhash_core::pairs::for_each_pair(
        fps,
        k,
        on_pair,
        &mut |done, all, found| {
            pg_sys::check_for_interrupts!();
            if last_notice.elapsed() >= NOTICE_EVERY {
                last_notice = Instant::now();
                notice!(
                "simhash: {done} of {all} tables searched, {found} pairs so far ({} distinct fingerprints, {:.0} s)",
                fps.len(),
                started.elapsed().as_secs_f64()
            );
            }
        },
        crate::fingerprint::text::INTERRUPTS,
    );
    if found.is_err() {
        pairs_out_of_memory(&format!(
            "the table of the {} distinct fingerprints of a near-duplicate search",
            fps.len()
        ));
    }
}
