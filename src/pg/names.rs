//! Names of catalog objects for messages and generated statements, and the schema of an operator
//! family (where an index's operator class and the objects it names live).

use std::ffi::{CStr, CString};

use pgrx::pg_sys::{self, Oid};

/// # Safety
///
/// In a backend; `type_oid` is an existing type.
pub(crate) unsafe fn type_name(type_oid: Oid) -> String {
    unsafe { CStr::from_ptr(pg_sys::format_type_be(type_oid)).to_string_lossy().into_owned() }
}

pub(crate) unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    unsafe { CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
}

pub(crate) unsafe fn trigger_name(trigger: *const pg_sys::Trigger) -> String {
    unsafe { CStr::from_ptr((*trigger).tgname).to_string_lossy().into_owned() }
}

/// `schema.name`, each part quoted where needed; the OID's number (as `regclass` prints it) for a
/// relation that no longer exists, so that no message or statement reads a NULL name.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn qualified_name(relid: Oid) -> String {
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        if name.is_null() || schema.is_null() {
            return relid.to_u32().to_string();
        }
        CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name)).to_string_lossy().into_owned()
    }
}

/// The relation's name (unqualified), or the OID's number for a relation that no longer exists.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn rel_name(relid: Oid) -> String {
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        if name.is_null() {
            return relid.to_u32().to_string();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// The schema's name; 3F000 (invalid_schema_name) if it no longer exists.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn namespace_name(namespace: Oid) -> String {
    unsafe {
        let name = pg_sys::get_namespace_name(namespace);
        if name.is_null() {
            crate::pg::errors::raise(
                pgrx::PgSqlErrorCode::ERRCODE_INVALID_SCHEMA_NAME,
                format!("schema with OID {} does not exist", namespace.to_u32()),
                None,
                None,
            );
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// Opens relation `relid` with `lockmode`, or raises 42P01 if it does not exist (a `regclass`
/// argument may name a dropped relation: its OID is still a valid `regclass`).
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn open_relation(relid: Oid, lockmode: u32) -> pg_sys::Relation {
    unsafe {
        let rel = pg_sys::try_relation_open(relid, lockmode as i32);
        if rel.is_null() {
            raise_no_relation(relid);
        }
        rel
    }
}

/// Raises 42P01 (undefined_table) if relation `relid` does not exist (checked without a lock, for
/// functions that read only the catalog).
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn require_relation(relid: Oid) {
    unsafe {
        if pg_sys::get_rel_name(relid).is_null() {
            raise_no_relation(relid);
        }
    }
}

fn raise_no_relation(relid: Oid) -> ! {
    crate::pg::errors::raise(
        pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
        format!("relation with OID {} does not exist", relid.to_u32()),
        None,
        None,
    )
}

pub(crate) fn quote_identifier(name: &str) -> String {
    let name = CString::new(name).unwrap_or_default();
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(name.as_ptr())).to_string_lossy().into_owned() }
}

/// `text` as an SQL string literal (`quote_literal`: quotes doubled, an `E` prefix where it has a
/// backslash), to build a statement with a name as data.
pub(crate) fn quote_literal(text: &str) -> String {
    let text = CString::new(text).unwrap_or_default();
    unsafe { CStr::from_ptr(pg_sys::quote_literal_cstr(text.as_ptr())).to_string_lossy().into_owned() }
}

/// The schema of operator family `opfamily`.
///
/// # Safety
///
/// In a transaction (reads the catalog cache).
pub(crate) unsafe fn opfamily_namespace(opfamily: Oid) -> Option<Oid> {
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::OPFAMILYOID as i32,
            pg_sys::Datum::from(opfamily.to_u32()),
        );
        if tuple.is_null() {
            return None;
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_opfamily>(tuple);
        let namespace = (*form).opfnamespace;
        pg_sys::ReleaseSysCache(tuple);
        Some(namespace)
    }
}
