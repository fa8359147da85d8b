//! `simhash_clusters(tbl, fp_column, k, text_column, min_similarity, id_column, n)` and
//! `simhash_clusters(query, k, min_similarity, n)`: the groups of the verified pairs (the pairs
//! within `k` whose texts have `simhash_similarity(a, b, n) >= min_similarity`), the very groups
//! `simhash_clusters_from_pairs` forms of `simhash_pairs(..., min_similarity, n)`, with far less
//! work: the candidates come from the same search as `simhash_pairs(tbl, fp_column, k)` (through
//! the column's simhash index, on the workers for a Citus table, else in memory), only the rows in
//! a candidate have their text read (by SPI, as the caller: privileges and row-level security
//! apply), and only the candidates that would join two groups are compared
//! (`simhash_core::verified_groups`). Memory: the candidates and those texts, within
//! `maintenance_work_mem` (else 54000).

use std::ffi::CStr;
use std::time::Instant;

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use simhash_core::pairs::OutOfMemory;
use simhash_core::verified_groups::{Candidates, Progress};

use super::input::read_fingerprints;
use super::through_index::TableSource;
use super::{check_radius, find_pairs, or_out_of_memory, pairs_out_of_memory, spread, NOTICE_EVERY};
use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// Bytes a fetched text takes beyond its own: its id and its string's header.
const TEXT_OVERHEAD: usize = 32;

/// The table form (its SQL signature's seven arguments, and the call's `fcinfo`).
#[allow(clippy::too_many_arguments)]
#[pg_extern(sql = false)]
fn simhash_verified_clusters_of_table(
    tbl: Oid,
    fp_column: &CStr,
    k: i32,
    text_column: &CStr,
    min_similarity: f64,
    id_column: &CStr,
    n: i32,
    fcinfo: pg_sys::FunctionCallInfo,
) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    if unsafe { pg_sys::get_rel_name(tbl) }.is_null() {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            format!("relation with OID {} does not exist", tbl.to_u32()),
            None,
            None,
        );
    }
    check_verification(min_similarity, n);
    let [id, fp, text] = [id_column, fp_column, text_column].map(|c| quote_identifier(&c.to_string_lossy()));
    // The rows as the caller reads them, as simhash_pairs(tbl, ..., text_column, ...) reads them:
    // its errors (a column missing, no privilege on one) come first, whatever the candidates.
    let rows = format!("(SELECT {id}, {fp}, {text} FROM {}) q(id, fp, body)", unsafe { qualified_name(tbl) });
    check_rows(&rows);
    let mut candidates = Candidates::default();
    let budget = Budget::new();
    if unsafe { super::codes::is_code_column(tbl, fp_column) } {
        // A column of bit codes: the pairs of simhash_pairs(tbl, fp_column, k).
        let k = super::codes::check_code_radius(k);
        let function = unsafe { (*(*fcinfo).flinfo).fn_oid };
        unsafe {
            super::codes::for_each_code_pair(tbl, fp_column, id_column, k, false, function, &mut |a, b, d| {
                fits(candidates.push_cross(&[a], &[b], d));
                budget.check(candidates.bytes());
            })
        };
        return TableIterator::new(verified_groups(candidates, &rows, min_similarity, n, &budget));
    }
    let k = check_radius(k);
    match unsafe { TableSource::of(tbl, fp_column, id_column, k, fcinfo) } {
        Ok(source) => unsafe {
            source.for_each_pair(k, &mut |a, b, d| {
                fits(match b {
                    None => candidates.push_all_pairs(a),
                    Some(b) => candidates.push_cross(a, b, d),
                });
                budget.check(candidates.bytes());
            })
        },
        Err(query) => {
            let spread = unsafe {
                spread::spread_pairs(tbl, fp_column, id_column, k, false, fcinfo, &mut |a, b, d| {
                    fits(candidates.push_cross(&[a], &[b], d));
                    budget.check(candidates.bytes());
                })
            };
            if !spread {
                candidates_of_query(&query, k, &mut candidates, &budget);
            }
        }
    }
    TableIterator::new(verified_groups(candidates, &rows, min_similarity, n, &budget))
}

/// The query form: the query returns (id, fingerprint, text).
#[pg_extern(sql = false)]
fn simhash_verified_clusters(
    query: &str,
    k: i32,
    min_similarity: f64,
    n: i32,
) -> TableIterator<'static, (name!(id, i64), name!(representative, i64))> {
    check_verification(min_similarity, n);
    // On its own lines, without a trailing semicolon, as simhash_pairs(query, k) reads it.
    let query = query.trim_end_matches([' ', '\t', '\r', '\n', ';']);
    let rows = format!("(\n{query}\n) q(id, fp, body)");
    check_rows(&rows);
    let k = check_radius(k);
    let mut candidates = Candidates::default();
    let budget = Budget::new();
    candidates_of_query(&format!("SELECT q.id, q.fp FROM {rows}"), k, &mut candidates, &budget);
    TableIterator::new(verified_groups(candidates, &rows, min_similarity, n, &budget))
}

/// The errors of `simhash_pairs(query, k, min_similarity, n)` for its last two arguments.
fn check_verification(min_similarity: f64, n: i32) {
    if !(0.0..=1.0).contains(&min_similarity) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("min_similarity {min_similarity} is out of range for near-duplicate pairs"),
            None,
            Some("The threshold is a number from 0 to 1.".into()),
        );
    }
    if !(1..=32).contains(&n) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("shingle length {n} is out of range for near-duplicate pairs"),
            None,
            Some("The shingle length n is an integer from 1 to 32.".into()),
        );
    }
}

/// The (id, text) statement over `rows` (`... q(id, fp, body)`).
fn texts_statement(rows: &str) -> String {
    format!("SELECT q.id::pg_catalog.int8, q.body::pg_catalog.text FROM {rows}")
}

/// Plans and starts the (id, text) statement once without reading a row, for its errors.
fn check_rows(rows: &str) {
    Spi::connect(|client| {
        let _ = client.select(&format!("{} LIMIT 0", texts_statement(rows)), None, &[]);
    });
}

/// The candidates of `query`'s (id, fingerprint) rows, found in memory as `simhash_pairs(query,
/// k)` finds its pairs.
fn candidates_of_query(query: &str, k: u32, candidates: &mut Candidates, budget: &Budget) {
    let (ids, fps) = read_fingerprints(query);
    let groups =
        or_out_of_memory(simhash_core::pairs::Duplicates::group(&fps, crate::fingerprint::text::INTERRUPTS), ids.len());
    // The ids of the rows `rows` (one fingerprint's) in `out`.
    let ids_of = |rows: &[u32], out: &mut Vec<i64>| {
        out.clear();
        if crate::memory::reserve(out, rows.len()).is_none() {
            pairs_out_of_memory(&format!("the ids of {} rows with one fingerprint", rows.len()));
        }
        out.extend(rows.iter().map(|&i| ids[i as usize]));
    };
    let mut row_ids = Vec::new();
    for rows in groups.repeated() {
        ids_of(rows, &mut row_ids);
        fits(candidates.push_all_pairs(&row_ids));
        budget.check(candidates.bytes());
    }
    let mut b_ids = Vec::new();
    find_pairs(&groups.distinct, k, &mut |u, v, d| {
        ids_of(groups.holders(u), &mut row_ids);
        ids_of(groups.holders(v), &mut b_ids);
        fits(candidates.push_cross(&row_ids, &b_ids, d));
        budget.check(candidates.bytes());
    });
}

/// `result`, or ERROR 53200 when memory for the candidate pairs was refused.
fn fits(result: Result<(), OutOfMemory>) {
    if result.is_err() {
        pairs_out_of_memory("the candidate pairs of a verified near-duplicate search");
    }
}

/// `maintenance_work_mem`, for the candidates and the texts.
struct Budget(usize);

impl Budget {
    fn new() -> Budget {
        Budget(unsafe { pg_sys::maintenance_work_mem } as usize * 1024)
    }

    fn check(&self, bytes: usize) {
        if bytes > self.0 {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "the candidate pairs and their texts need more than maintenance_work_mem ({} kB)",
                    self.0 / 1024
                ),
                None,
                Some("Use a smaller radius, deduplicate exact copies first, or raise maintenance_work_mem.".into()),
            );
        }
    }
}

/// The groups of the candidates whose texts (read from `rows`) are alike.
fn verified_groups(
    candidates: Candidates,
    rows: &str,
    min_similarity: f64,
    n: i32,
    budget: &Budget,
) -> Vec<(i64, i64)> {
    let distinct = candidates
        .distinct_ids(crate::fingerprint::text::INTERRUPTS)
        .unwrap_or_else(|_| pairs_out_of_memory(&format!("the ids of the {} candidate pairs", candidates.pairs())));
    let all = candidates.pairs();
    let held = candidates.bytes() + distinct.len() * 8;
    budget.check(held);
    // The texts of the rows in some candidate, by id (one id may be on several rows, as in the
    // join of simhash_pairs: a pair is verified when any text of one is alike any text of the other).
    let mut texts: Vec<(i64, Option<String>)> = Vec::new();
    if !distinct.is_empty() {
        let mut bytes = held;
        Spi::connect(|client| {
            let statement = format!(
                "{} WHERE q.id::pg_catalog.int8 OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
                texts_statement(rows)
            );
            let mut cursor = client.open_cursor(statement.as_str(), &[distinct.clone().into()]);
            loop {
                let batch = cursor.fetch(10_000).unwrap_or_else(|e| panic!("simhash: reading texts: {e}"));
                if batch.is_empty() {
                    break;
                }
                for r in batch {
                    let id = r.get::<i64>(1).ok().flatten();
                    let body = r.get::<String>(2).ok().flatten();
                    bytes += TEXT_OVERHEAD + body.as_ref().map_or(0, String::len);
                    budget.check(bytes);
                    // (a NULL id is in no candidate)
                    if let Some(id) = id {
                        if crate::memory::push(&mut texts, (id, body)).is_none() {
                            pairs_out_of_memory(&format!("the texts of {} rows", distinct.len()));
                        }
                    }
                }
                unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
                pg_sys::check_for_interrupts!();
            }
        });
    }
    crate::memory::sort_interruptibly(&mut texts, |t| t.0);
    // The texts of distinct[i]: texts[starts[i]..starts[i + 1]].
    let room = |n: usize| {
        crate::memory::vec_with_room::<usize>(n)
            .unwrap_or_else(|| pairs_out_of_memory(&format!("the texts of {} rows", distinct.len())))
    };
    let mut starts = room(distinct.len() + 1);
    let mut at = 0;
    for &id in &distinct {
        while at < texts.len() && texts[at].0 < id {
            at += 1;
        }
        starts.push(at);
    }
    starts.push(texts.len());
    let mut ends = room(distinct.len());
    ends.extend((0..distinct.len()).map(|i| {
        let mut end = starts[i];
        while end < texts.len() && texts[end].0 == distinct[i] {
            end += 1;
        }
        end
    }));
    let alike = |a: &str, b: &str| {
        crate::fingerprint::similarity::overlap(a.as_bytes(), b.as_bytes(), n, "simhash_similarity")
            .jaccard()
            .is_some_and(|s| s >= min_similarity)
    };
    let mut verify = |i: usize, j: usize| {
        pg_sys::check_for_interrupts!();
        let (a, b) = (&texts[starts[i]..ends[i]], &texts[starts[j]..ends[j]]);
        a.iter().any(|(_, x)| b.iter().any(|(_, y)| matches!((x, y), (Some(x), Some(y)) if alike(x, y))))
    };
    let started = Instant::now();
    let mut last_notice = started;
    let mut last = Progress::default();
    let mut progress = |p: Progress| {
        last = p;
        pg_sys::check_for_interrupts!();
        if last_notice.elapsed() >= NOTICE_EVERY {
            last_notice = Instant::now();
            notice!(
                "simhash: {} of {all} candidate pairs taken, {} of them verified, {} joined two groups ({:.0} s)",
                p.taken,
                p.verified,
                p.joined,
                started.elapsed().as_secs_f64()
            );
        }
    };
    let groups =
        candidates.groups(&distinct, &mut verify, &mut progress, crate::fingerprint::text::INTERRUPTS).unwrap_or_else(
            |_| pairs_out_of_memory(&format!("the groups of the {} rows in candidate pairs", distinct.len())),
        );
    pgrx::debug1!(
        "simhash: {all} candidate pairs among {} rows ({} texts read), {} of them verified, {} joined two groups",
        distinct.len(),
        texts.len(),
        last.verified,
        last.joined
    );
    groups
}
