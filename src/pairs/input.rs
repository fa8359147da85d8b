//! The rows the pairs are found among: a query's (id, fingerprint) rows or (id_a, id_b) pairs,
//! read through a cursor with their column types checked up front, and the check of a table's
//! columns for the forms that name a table.

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use crate::pg::errors::raise;

/// Runs `query` through a cursor and returns its (id, fingerprint) rows with a fingerprint (ERROR
/// 53200 when memory for them is refused).
pub(super) fn read_fingerprints(query: &str) -> (Vec<i64>, Vec<u64>) {
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
        if crate::memory::push(&mut ids, id).and_then(|()| crate::memory::push(&mut fps, fp as u64)).is_none() {
            super::pairs_out_of_memory(&format!("the rows of a near-duplicate search ({} read)", ids.len()));
        }
    });
    (ids, fps)
}

/// Whether a column of this type is an integer id (smallint, integer or bigint, or a domain).
pub(super) fn is_integer(type_oid: Oid) -> bool {
    [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID].contains(&unsafe { pg_sys::getBaseType(type_oid) })
}

/// Whether column `id_attnum` of table `tbl` is an integer id and column `fp_attnum` a simhash64 of
/// the extension in `schema` (or domains over them), as the query form requires.
///
/// # Safety
///
/// In a backend, inside a transaction; both columns exist.
pub(super) unsafe fn pair_columns_typed(tbl: Oid, id_attnum: i16, fp_attnum: i16, schema: Oid) -> bool {
    unsafe {
        is_integer(pg_sys::get_atttype(tbl, id_attnum))
            && pg_sys::getBaseType(pg_sys::get_atttype(tbl, fp_attnum))
                == crate::lookup::catalog::simhash64_type(schema)
    }
}

/// Runs `query` through a cursor, its first two columns named `names`, and calls `row` with each
/// row's two values as 64-bit integers (`None` for NULL). The column types are checked once, up
/// front, by `shape_ok(types, simhash64 type)`; `wrong` raises the error for a query of another shape.
pub(super) fn read_pairs_of_columns(
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

pub(super) fn wrong_pairs_shape() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        "the query for near-duplicate clusters must return (id_a, id_b)".into(),
        Some("Both columns are integer ids (smallint, integer or bigint), as simhash_pairs returns them.".into()),
        None,
    )
}

pub(super) fn wrong_shape() -> ! {
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
