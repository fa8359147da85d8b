//! `ereport` helpers: every error a user can cause carries a specific SQLSTATE (never XX000).

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises an ERROR with `code`, `message` and an optional detail sentence; does not return.
pub fn raise(code: PgSqlErrorCode, message: String, detail: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, message, "");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}
