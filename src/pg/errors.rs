//! `ereport` for errors a user can cause: each carries a specific SQLSTATE (never XX000, never a
//! Rust panic's text), a message, and where they help a detail and a hint.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises an ERROR with `code`, `message` and an optional detail and hint (full sentences); does
/// not return.
pub(crate) fn raise(code: PgSqlErrorCode, message: String, detail: Option<String>, hint: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, message, "");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}
