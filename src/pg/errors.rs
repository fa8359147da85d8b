//! `ereport` for errors a user can cause: each carries a specific SQLSTATE (never XX000, never a
//! Rust panic's text), a message, and where they help a detail and a hint.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises an ERROR with `code`, `message` and an optional detail and hint (full sentences); does
/// not return.
#[track_caller]
pub(crate) fn raise(code: PgSqlErrorCode, message: String, detail: Option<String>, hint: Option<String>) -> ! {
    report(PgLogLevel::ERROR, code, message, detail, hint);
    unreachable!("ERROR does not return")
}

/// Emits a WARNING with `code`, `message` and an optional detail and hint.
#[track_caller]
pub(crate) fn warn(code: PgSqlErrorCode, message: String, detail: Option<String>, hint: Option<String>) {
    report(PgLogLevel::WARNING, code, message, detail, hint);
}

/// Emits a NOTICE with `message` and an optional detail and hint.
#[track_caller]
pub(crate) fn notice(message: String, detail: Option<String>, hint: Option<String>) {
    report(PgLogLevel::NOTICE, PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message, detail, hint);
}

/// Raises an ERROR for a failure of PostgreSQL's internals that no user input causes (an SPI
/// call that fails on a valid statement): XX000, as PostgreSQL's own `elog(ERROR, ...)`, with the
/// SPI result code rather than a Rust panic's text.
#[track_caller]
pub(crate) fn spi_failure(call: &str, code: i32) -> ! {
    let reason = unsafe { std::ffi::CStr::from_ptr(pgrx::pg_sys::SPI_result_code_string(code)) };
    raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{call} failed: {}", reason.to_string_lossy()), None, None)
}

#[track_caller]
fn report(level: PgLogLevel, code: PgSqlErrorCode, message: String, detail: Option<String>, hint: Option<String>) {
    let mut report = ErrorReport::new(code, message, "");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(level);
}
