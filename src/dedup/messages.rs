//! How a near-duplicate is named to the user: the row's key (primary key or replica identity,
//! shown only when the user may read it), the 23505 error with its DETAIL, and the values of
//! stored rows' columns that go into them.

use std::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

use super::config::Verify;
use crate::pg::errors::raise;
use crate::pg::names::{quote_identifier, relation_name};

/// The violation of `error` (23505), named like a constraint's: the stored row's key, the distance
/// and (verified) the similarity when the role may read the table's rows (`key_readable`), else
/// only the radius; `note` ends the DETAIL (empty, or a sentence).
///
/// # Safety
///
/// `rel` is an open relation.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn raise_near_duplicate(
    rel: pg_sys::Relation,
    trigger_name: &str,
    column: &str,
    k: u32,
    fp: &str,
    distance: u32,
    existing_key: Option<&str>,
    verified: Option<(&Verify, f64)>,
    note: &str,
) -> ! {
    unsafe {
        let mut note = if note.is_empty() { String::new() } else { format!(" {note}") };
        // A role that may not read the table's rows (no SELECT, or row-level security applies)
        // learns no more than from a unique violation: that a stored row conflicts, not which one,
        // how far it is or how similar its text is.
        let detail = if !key_readable((*rel).rd_id) {
            format!("A stored row is within the radius {k} of the new row's {column} = {fp}.{note}")
        } else {
            let existing = match existing_key {
                Some(key) => format!("Existing row {}", key_columns(rel).describe(key)),
                None => "A stored row".into(),
            };
            if let Some((verify, similarity)) = verified {
                note = format!(
                    " Their {} texts have similarity {} (n = {}); the threshold is {}.{note}",
                    verify.column,
                    format_similarity(similarity, verify.min_similarity),
                    verify.n,
                    verify.min_similarity
                );
            }
            format!("{existing} is at distance {distance} from the new row's {column} = {fp}; the radius is {k}.{note}")
        };
        raise(
            PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
            format!(
                "new row for relation \"{}\" is a near-duplicate and violates trigger \"{trigger_name}\"",
                relation_name(rel)
            ),
            Some(detail),
            None,
        )
    }
}

/// A similarity as the DETAIL gives it: rounded down to three decimals, or every digit where
/// that would read as below the threshold.
fn format_similarity(similarity: f64, threshold: f64) -> String {
    let floor = (similarity * 1000.0).floor() / 1000.0;
    if floor >= threshold || floor == similarity {
        let text = format!("{floor:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{similarity}")
    }
}

/// How rows of the table are named in messages: its primary key columns, or ctid without one.
pub(super) struct KeyColumns {
    attnums: Vec<i32>,
    names: Vec<String>,
}

impl KeyColumns {
    /// `(id)=(42)`, `(a, b)=(1,x)` or `ctid=(0,7)`, like the DETAIL of a unique violation.
    pub(crate) fn describe(&self, key: &str) -> String {
        match self.names.len() {
            0 => format!("ctid={key}"),
            1 => format!("({})=({key})", self.names[0]),
            _ => format!("({})={key}", self.names.join(", ")),
        }
    }

    /// The SQL expression giving an existing row's key as text, in the format of `row_key`: the
    /// value of a one-column key, `row(...)::text` of a composite one, the ctid without a key.
    pub(super) fn expression(&self) -> String {
        let columns: Vec<String> = self.names.iter().map(|n| format!("t.{}", quote_identifier(n))).collect();
        match columns.len() {
            0 => "t.ctid::pg_catalog.text".into(),
            1 => format!("{}::pg_catalog.text", columns[0]),
            _ => format!("ROW({})::pg_catalog.text", columns.join(", ")),
        }
    }
}

/// # Safety
///
/// `rel` is an open relation.
pub(super) unsafe fn key_columns(rel: pg_sys::Relation) -> KeyColumns {
    unsafe {
        let index_oid = crate::pg::compat::primary_key_index(rel);
        let mut key = KeyColumns { attnums: Vec::new(), names: Vec::new() };
        if index_oid == Oid::INVALID {
            return key;
        }
        let index = pg_sys::index_open(index_oid, pg_sys::AccessShareLock as i32);
        let form = (*index).rd_index;
        for &attnum in (*form).indkey.values.as_slice((*form).indnkeyatts as usize) {
            let attr = crate::pg::compat::tuple_desc_attr((*rel).rd_att, attnum as usize - 1);
            key.attnums.push(attnum as i32);
            key.names.push(CStr::from_ptr(attr.attname.data.as_ptr()).to_string_lossy().into_owned());
        }
        pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
        key
    }
}

/// The new row's key as text, in the format of `KeyColumns::expression`; NULL without a primary
/// key (a row has no ctid before it is stored).
///
/// # Safety
///
/// `rel` is an open relation and `row` a valid tuple of it.
pub(super) unsafe fn row_key(rel: pg_sys::Relation, row: pg_sys::HeapTuple) -> Option<String> {
    unsafe {
        let key = key_columns(rel);
        if key.attnums.is_empty() {
            return None;
        }
        let values: Vec<String> = key
            .attnums
            .iter()
            .map(|&a| {
                let value = pg_sys::SPI_getvalue(row, (*rel).rd_att, a);
                if value.is_null() {
                    None
                } else {
                    Some(CStr::from_ptr(value).to_string_lossy().into_owned())
                }
            })
            .collect::<Option<Vec<String>>>()?;
        match values.as_slice() {
            [one] => Some(one.clone()),
            _ => Some(format!("({})", values.iter().map(|v| record_field(v)).collect::<Vec<_>>().join(","))),
        }
    }
}

/// Whether the current role may see keys of the table's rows in messages (like a unique
/// violation's DETAIL): it has SELECT on the table and row-level security does not apply.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(super) unsafe fn key_readable(relid: Oid) -> bool {
    unsafe {
        pg_sys::pg_class_aclcheck(relid, pg_sys::GetUserId(), pg_sys::ACL_SELECT as _) == pg_sys::AclResult::ACLCHECK_OK
            && pg_sys::check_enable_rls(relid, Oid::INVALID, true) != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    }
}

/// A stored row's key as text (see `row_key`; its ctid without a primary key), if the current
/// role may see it.
pub(super) unsafe fn key_if_visible(rel: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> Option<String> {
    unsafe {
        if !key_readable((*rel).rd_id) {
            return None;
        }
        if key_columns(rel).attnums.is_empty() {
            let (block, offset) = pgrx::itemptr::item_pointer_get_both((*tuple).t_self);
            return Some(format!("({block},{offset})"));
        }
        row_key(rel, tuple)
    }
}

/// Quotes one field the way record output does.
fn record_field(value: &str) -> String {
    let needs_quotes =
        value.is_empty() || value.chars().any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_ascii_whitespace());
    if !needs_quotes {
        return value.into();
    }
    let mut quoted = String::from('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            quoted.push(c);
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// The datum of column `attnum` of a stored row; `None` if NULL.
pub(super) unsafe fn column_datum(tuple: pg_sys::HeapTuple, tupdesc: pg_sys::TupleDesc, attnum: i32) -> Option<Datum> {
    unsafe {
        let mut is_null = false;
        let datum = pg_sys::heap_getattr(tuple, attnum as _, tupdesc, &mut is_null);
        (!is_null).then_some(datum)
    }
}
