//! `simhash_pairs` / `simhash_clusters` of a column of codes (`bit(n)`) of a Citus table, found on
//! the workers as those of a `simhash64` column are (`super::spread`): each row is sent to a work
//! table distributed by key under each of its `k + 1` keys (`simhash_code_pair_keys`), each shard
//! pairs the rows of each of its keys (`simhash_code_key_pairs`), and only the pairs come back.
//! `simhash_core::code_keyed_pairs` says why each pair within `k` comes out exactly once.
//!
//! On one node the pairs of codes are a self-join through the column's `simhash` index
//! (`super::codes`), which Citus cannot run on a distributed table (a join on other columns than
//! the distribution column): where the work table cannot be made, the call fails (0A000) with the
//! reason instead.

use std::ffi::CStr;

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use simhash_core::code_keyed_pairs::{self, CodeKeyError, MAX_CODE_KEYED_RADIUS};
use simhash_core::pairs::Groups;

use super::granted;
use super::spread::{distribute_by_key, fetch_pairs, run, work_table, CHECK_EVERY};
use crate::codes::code_of_payload;
use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// `simhash_code_pair_keys(code bit, k)`: the keys under which a code is paired with those within
/// `k` (`simhash_core::code_keyed_pairs::keys`).
#[pg_extern(sql = false)]
fn simhash_code_pair_keys(code: &[u8], k: i32) -> Vec<i64> {
    let code = code_of_payload(code);
    code_keyed_pairs::keys(code.bytes, code.bits, checked_radius(k)).unwrap_or_default()
}

/// `simhash_code_key_pairs(key, ids, codes, k, links_only)`: the pairs within `k` among the rows
/// (ids[i], codes[i]) of one key that are reported under that key, smaller id first; with
/// `links_only` only those that join two groups of the key's rows (for `simhash_clusters`). Rows
/// with a NULL code, and rows whose code does not have the key, are left out; a NULL id with a code
/// is 23502; codes of unequal lengths 22026. At most `maintenance_work_mem` of pairs (else 54000).
#[pg_extern(sql = false)]
fn simhash_code_key_pairs(
    key: i64,
    ids: Array<'_, i64>,
    // bit varying[] in SQL: varlena elements, read as their payloads
    codes: Array<'_, &[u8]>,
    k: i32,
    links_only: bool,
) -> TableIterator<'static, (name!(id_a, i64), name!(id_b, i64), name!(distance, i32))> {
    let k = checked_radius(k);
    if ids.len() != codes.len() {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{} ids and {} codes do not pair up", ids.len(), codes.len()),
            None,
            Some("Pass one id for each code, in the same order.".into()),
        );
    }
    let rows = &|| format!("the {} codes of key {key}", ids.len());
    let (mut row_ids, mut flat, mut bits) = (granted(crate::memory::vec_with_room(ids.len()), rows), Vec::new(), None);
    for (n, (id, code)) in ids.iter().zip(codes.iter()).enumerate() {
        if n % CHECK_EVERY == 0 {
            pgrx::check_for_interrupts!();
        }
        let Some(code) = code else { continue };
        let Some(id) = id else {
            raise(
                PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
                "near-duplicate pairs need a non-NULL id for every code".into(),
                None,
                None,
            );
        };
        let code = code_of_payload(code);
        match bits {
            None => bits = Some(code.bits),
            Some(bits) if bits != code.bits => crate::codes::lengths_differ(bits, code.bits),
            Some(_) => {}
        }
        row_ids.push(id);
        granted(crate::memory::reserve(&mut flat, code.bytes.len()), rows);
        flat.extend_from_slice(code.bytes);
    }
    let mut pairs = Vec::new();
    let mut push = super::pair_collector(&mut pairs);
    // (with `links_only`, fewer than one per row: room for them made first)
    let mut links = granted(crate::memory::vec_with_room(if links_only { row_ids.len() } else { 0 }), rows);
    let mut groups = granted(Groups::numbered(row_ids.len()).ok(), rows);
    let mut on_pair = |i: usize, j: usize, d: u32| {
        let (a, b) = (row_ids[i], row_ids[j]);
        if !links_only {
            push(a, b, d);
        } else if groups.root(i) != groups.root(j) {
            let (ri, rj) = (groups.root(i), groups.root(j));
            groups.union(ri, rj);
            links.push((a.min(b), a.max(b), d as i32));
        }
    };
    let found = code_keyed_pairs::pairs_of_key(
        key,
        k,
        bits.unwrap_or(0),
        &flat,
        row_ids.len(),
        &mut on_pair,
        crate::fingerprint::text::INTERRUPTS,
    );
    drop(push);
    if links_only {
        pairs = links;
    }
    match found {
        Ok(()) => {}
        Err(CodeKeyError::Key(key)) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{key} is not a key of near-duplicate pairs of codes within {k}"),
            None,
            Some("The keys are those simhash_code_pair_keys(code, k) returns for the same k.".into()),
        ),
        Err(CodeKeyError::OutOfMemory) => super::pairs_out_of_memory(&rows()),
        Err(CodeKeyError::Radius(_)) => unreachable!("checked"),
    }
    TableIterator::new(pairs)
}

fn checked_radius(k: i32) -> u32 {
    if !(0..=MAX_CODE_KEYED_RADIUS as i32).contains(&k) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("radius {k} is out of range for near-duplicate pairs of codes by key"),
            Some(format!("The radius must be between 0 and {MAX_CODE_KEYED_RADIUS}.")),
            None,
        );
    }
    k as u32
}

/// The pairs within `k` of column `code_column` (of codes) of Citus table `tbl`, with ids
/// `id_column`, found on the workers as the module says; `on_pair(id_a, id_b, distance)` hears each
/// once, smaller id first (with `links_only`, only enough of them to join the same groups). 0A000
/// where the work table cannot be made (see `super::spread::work_table`), or `k` is above
/// [`MAX_CODE_KEYED_RADIUS`].
///
/// # Safety
///
/// In a backend, inside a transaction; `tbl` is a Citus table; `function` is the calling function,
/// of the extension.
pub(super) unsafe fn spread_code_pairs(
    tbl: Oid,
    code_column: &CStr,
    id_column: &CStr,
    k: u32,
    links_only: bool,
    function: Oid,
    on_pair: &mut dyn FnMut(i64, i64, u32),
) {
    unsafe {
        let too_far = (k > MAX_CODE_KEYED_RADIUS)
            .then(|| format!("the workers find pairs of codes within at most {MAX_CODE_KEYED_RADIUS}"));
        let functions = [
            "simhash_code_pair_keys(pg_catalog.\"bit\", pg_catalog.int4)",
            "simhash_code_key_pairs(pg_catalog.int8, pg_catalog.int8[], pg_catalog.varbit[], pg_catalog.int4, pg_catalog.bool)",
        ];
        let (ext, work) = work_table(tbl, too_far, &functions, "0.8.0", function).unwrap_or_else(|why| {
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("the pairs of codes of Citus table \"{}\" cannot be found: {why}", qualified_name(tbl)),
                Some("On a Citus table the pairs of codes are found on the workers, through a work table.".into()),
                None,
            )
        });
        let (code, id) =
            (quote_identifier(&code_column.to_string_lossy()), quote_identifier(&id_column.to_string_lossy()));
        run(&format!(
            "CREATE UNLOGGED TABLE {work} (key pg_catalog.int8 NOT NULL, id pg_catalog.int8, code pg_catalog.varbit NOT NULL)"
        ));
        distribute_by_key(&work);
        // (a domain's column cast to `bit` itself, which the extension's function takes)
        run(&format!(
            "INSERT INTO {work} (key, id, code) \
             SELECT pg_catalog.unnest({ext}.simhash_code_pair_keys(t.{code}::pg_catalog.\"bit\", {k})), t.{id}::pg_catalog.int8, t.{code} \
             FROM {tbl} t WHERE t.{code} IS NOT NULL",
            tbl = qualified_name(tbl),
        ));
        let pairs = format!(
            "SELECT (p.pair).id_a, (p.pair).id_b, (p.pair).distance FROM (\
             SELECT {ext}.simhash_code_key_pairs(w.key, pg_catalog.array_agg(w.id), pg_catalog.array_agg(w.code), {k}, {links_only}) AS pair \
             FROM {work} w GROUP BY w.key) p"
        );
        fetch_pairs(&pairs, on_pair);
        run(&format!("DROP TABLE {work}"));
    }
}
