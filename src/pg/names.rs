//! Names of catalog objects for messages and generated statements.

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

/// `schema.name`, each part quoted where needed.
///
/// # Safety
///
/// In a backend, inside a transaction; `relid` is an existing relation.
pub(crate) unsafe fn qualified_name(relid: Oid) -> String {
    unsafe {
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        let name = pg_sys::get_rel_name(relid);
        CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name)).to_string_lossy().into_owned()
    }
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
