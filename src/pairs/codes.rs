//! `simhash_pairs(tbl, code_column, k)` and `simhash_clusters(...)` of a `bit(n)` column
//! (`crate::codes`): every pair of rows whose codes are within `k` bits, found by a self-join in
//! which each row's code is looked up in the column's `simhash` index,
//!
//! ```sql
//! SELECT a.id, b.id, simhash_hamming(a.code, b.code) FROM tbl a JOIN tbl b
//!     ON b.code <@ simhash_code_ball(a.code, k) AND a.id < b.id
//! ```
//!
//! run as the caller (privileges and row-level security apply as to any query), with every
//! operator and function named with its schema. Without a `simhash` index on the column the same
//! join is a nested loop over the table for each row: correct, and quadratic.

use std::ffi::CStr;

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, quote_identifier};

/// Whether column `column` of `tbl` holds binary codes: a `bit(n)` or `bit varying` column, or a
/// domain over one (as the simhash index and the near-duplicate constraint take them).
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(super) unsafe fn is_code_column(tbl: Oid, column: &CStr) -> bool {
    unsafe {
        let attnum = pg_sys::get_attnum(tbl, column.as_ptr());
        attnum > 0
            && [pg_sys::BITOID, pg_sys::VARBITOID].contains(&pg_sys::getBaseType(pg_sys::get_atttype(tbl, attnum)))
    }
}

/// The radius of a pair search of codes: 0 to 4,096 (22023 otherwise).
pub(super) fn check_code_radius(k: i32) -> u32 {
    let max = simhash_core::multi_index::MAX_CODE_BITS as i32;
    if !(0..=max).contains(&k) {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("radius {k} is out of range for near-duplicate pairs of codes"),
            Some(format!("The radius must be between 0 and {max}.")),
            None,
        );
    }
    k as u32
}

/// ERROR 42804 unless the id column, if `tbl` has it, is an integer (smallint, integer or bigint, or
/// a domain over one), as the pairs of a simhash64 column require: ids of another type would be
/// cast to bigint (a text refused with 22P02, a float rounded into ids the table does not have).
///
/// # Safety
///
/// In a backend, inside a transaction.
unsafe fn check_id_column(tbl: Oid, id_column: &CStr) {
    unsafe {
        let attnum = pg_sys::get_attnum(tbl, id_column.as_ptr());
        if attnum <= 0 {
            return; // (a missing column: 42703 from the query)
        }
        let atttype = pg_sys::get_atttype(tbl, attnum);
        if !super::input::is_integer(atttype) {
            let type_name = CStr::from_ptr(pg_sys::format_type_be(atttype)).to_string_lossy().into_owned();
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{}\" of relation {} is of type {type_name}, not an integer id",
                    id_column.to_string_lossy(),
                    qualified_name(tbl),
                ),
                Some("The ids of near-duplicate pairs are smallint, integer or bigint.".into()),
                None,
            );
        }
    }
}

/// ERROR 23502 for a row with a code and a NULL id, as the pairs of a simhash64 column.
fn null_id() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        "near-duplicate pairs need a non-NULL id for every code".into(),
        None,
        None,
    )
}

/// Calls `on_pair(id_a, id_b, distance)` (id_a < id_b) for each pair of rows of `tbl` whose codes
/// in `code_column` are within `k` bits (of a Citus table, on its workers, `super::code_keys`; there,
/// with `links_only`, only enough of them to join the same groups); `function` is the calling
/// function, whose schema is the extension's.
///
/// # Safety
///
/// In a backend, inside a transaction; `function` is a function of the extension.
pub(super) unsafe fn for_each_code_pair(
    tbl: Oid,
    code_column: &CStr,
    id_column: &CStr,
    k: u32,
    links_only: bool,
    function: Oid,
    on_pair: &mut dyn FnMut(i64, i64, u32),
) {
    unsafe {
        check_id_column(tbl, id_column);
        if crate::pg::citus::is_citus_table(tbl) {
            // (a self-join on the codes, which Citus cannot run on a distributed table)
            return super::code_keys::spread_code_pairs(tbl, code_column, id_column, k, links_only, function, on_pair);
        }
        let schema_name = pg_sys::get_namespace_name(pg_sys::get_func_namespace(function));
        if schema_name.is_null() {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                "the schema of extension simhash does not exist".into(),
                None,
                None,
            );
        }
        let schema = quote_identifier(&CStr::from_ptr(schema_name).to_string_lossy());
        let (code, id) =
            (quote_identifier(&code_column.to_string_lossy()), quote_identifier(&id_column.to_string_lossy()));
        // A domain's or a `bit varying` column is cast to `bit` itself (`"bit"` quoted: no length,
        // where an unquoted `::bit` is `bit(1)`), which the
        // extension's functions and operators take: one declared for the domain in the extension's
        // schema would otherwise match it more exactly. (The index is still found under the cast.)
        let attnum = pg_sys::get_attnum(tbl, code_column.as_ptr());
        let cast = if pg_sys::get_atttype(tbl, attnum) == pg_sys::BITOID { "" } else { "::pg_catalog.\"bit\"" };
        let (a_code, b_code) = (format!("a.{code}{cast}"), format!("b.{code}{cast}"));
        let query = format!(
            "SELECT a.{id}::pg_catalog.int8, b.{id}::pg_catalog.int8, {schema}.simhash_hamming({a_code}, {b_code})::pg_catalog.int4 \
             FROM {table} a JOIN {table} b \
             ON {b_code} OPERATOR({schema}.<@) {schema}.simhash_code_ball({a_code}, {k}) \
             AND (a.{id}::pg_catalog.int8 OPERATOR(pg_catalog.<) b.{id}::pg_catalog.int8) IS NOT FALSE",
            table = qualified_name(tbl),
        );
        Spi::connect(|client| {
            let mut cursor = client.open_cursor(query.as_str(), &[]);
            loop {
                let batch = cursor.fetch(10_000).unwrap_or_else(|e| {
                    raise(
                        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                        format!("reading the pairs of codes: {e}"),
                        None,
                        None,
                    )
                });
                if batch.is_empty() {
                    break;
                }
                for row in batch {
                    let (a, b, d) = (
                        row.get::<i64>(1).ok().flatten(),
                        row.get::<i64>(2).ok().flatten(),
                        row.get::<i32>(3).ok().flatten(),
                    );
                    // (a row with a NULL id comes back at least with itself: IS NOT FALSE)
                    let (Some(a), Some(b)) = (a, b) else { null_id() };
                    if let Some(d) = d {
                        on_pair(a, b, d as u32);
                    }
                }
                // pgrx leaves fetched tables to the end of the SPI connection: free each batch now.
                pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable);
                pg_sys::check_for_interrupts!();
            }
        });
    }
}
