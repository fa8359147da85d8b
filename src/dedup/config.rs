//! The trigger's arguments, read and checked against its table: the fingerprint column, the
//! radius, the action (`error`, `skip`, `report` with its table) and the optional verification
//! (`verify=<text column>`, `min_similarity=`, `n=`).

use std::ffi::{CStr, CString};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::IntoDatum;

use simhash_core::dedup::MAX_DEDUP_RADIUS;
use simhash_core::shingles::MAX_SHINGLE;

use super::value::{column_kind, Kind};
use crate::pg::errors::raise;
use crate::pg::names::{relation_name, type_name};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Error,
    Skip,
    Report,
}

/// A trigger's arguments, checked against its table.
pub(super) struct Config {
    pub(super) column: String,
    pub(super) attnum: i32,
    /// `simhash64`, or `bit` codes.
    pub(super) kind: Kind,
    pub(super) k: u32,
    pub(super) action: Action,
    pub(super) report_table: Option<Oid>,
    pub(super) verify: Option<Verify>,
}

/// `verify=<column>`, `min_similarity=<x>`, `n=<shingle length>`: a row within k is a
/// near-duplicate only if its text is at least that similar (`simhash_similarity`).
#[derive(Clone, Debug)]
pub(super) struct Verify {
    pub(super) column: String,
    pub(super) attnum: i32,
    pub(super) min_similarity: f64,
    pub(super) n: usize,
}

impl Verify {
    /// The default threshold and shingle length of `simhash_add_dedup`.
    pub const DEFAULT_MIN_SIMILARITY: f64 = 0.7;
    pub const DEFAULT_N: usize = 3;

    /// Whether an overlap of two texts' shingle sets passes the threshold (as the SQL test
    /// `simhash_similarity(a, b, n) >= min_similarity` decides: NULL never passes).
    pub fn passes(&self, overlap: simhash_core::shingles::Overlap) -> Option<f64> {
        overlap.jaccard().filter(|&j| j >= self.min_similarity)
    }
}

/// Parses and checks `(column [, k [, action [, report_table]]])` against the table.
///
/// # Safety
///
/// In a trigger call: `rel` is the trigger's open relation and `trigger` its trigger.
pub(super) unsafe fn read_config(rel: pg_sys::Relation, trigger: *const pg_sys::Trigger, schema: Oid) -> Config {
    unsafe {
        let all: Vec<String> = (0..(*trigger).tgnargs as usize)
            .map(|i| CStr::from_ptr(*(*trigger).tgargs.add(i)).to_string_lossy().into_owned())
            .collect();
        let usage = "Use simhash_dedup_trigger(column [, k [, action [, report_table]]] [, 'verify=text_column' \
                     [, 'min_similarity=0.7' [, 'n=3']]]), for example simhash_dedup_trigger('fp', '3', 'error').";
        // Options are `name=value` arguments after the column; the rest are positional.
        let is_option =
            |(i, a): &(usize, &String)| *i > 0 && ["verify=", "min_similarity=", "n="].iter().any(|p| a.starts_with(p));
        let options: Vec<&String> = all.iter().enumerate().filter(is_option).map(|(_, a)| a).collect();
        let args: Vec<String> = all.iter().enumerate().filter(|x| !is_option(x)).map(|(_, a)| a.clone()).collect();
        if args.is_empty() || args.len() > 4 {
            bad_argument(format!("simhash_dedup_trigger takes 1 to 4 arguments, not {}", args.len()), usage);
        }
        let column = args[0].clone();
        let tupdesc = (*rel).rd_att;
        let attnum = column_number(rel, &column);
        let column_type = pg_sys::SPI_gettypeid(tupdesc, attnum);
        let Some(kind) = column_kind(rel, attnum, schema) else {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{column}\" of relation \"{}\" is of type {}, not simhash64",
                    relation_name(rel),
                    type_name(column_type)
                ),
                None,
                None,
            );
        };
        let k = match args.get(1).map(|k| k.trim().parse::<u32>()) {
            None => 3,
            Some(Ok(k)) if k <= max_radius(kind) => k,
            Some(_) => {
                bad_argument(format!("invalid radius \"{}\" for simhash_dedup_trigger", args[1]), &radius_hint(kind))
            }
        };
        let action = match args.get(2).map(|a| a.as_str()) {
            None | Some("error") => Action::Error,
            Some("skip") => Action::Skip,
            Some("report") => Action::Report,
            Some(other) => bad_argument(
                format!("invalid action \"{other}\" for simhash_dedup_trigger"),
                "The action is 'error', 'skip' or 'report'.",
            ),
        };
        let report_table = match (action, args.get(3)) {
            (Action::Report, Some(name)) => Some(report_table_oid(name)),
            (Action::Report, None) => bad_argument(
                "action \"report\" needs a report table as the fourth trigger argument".into(),
                "simhash_add_dedup(..., action => 'report') creates one.",
            ),
            (_, Some(_)) => bad_argument(
                "only action \"report\" takes a report table".into(),
                "Leave out the fourth argument, or use action 'report'.",
            ),
            (_, None) => None,
        };
        let verify = read_verify(rel, &options, usage);
        Config { column, attnum, kind, k, action, report_table, verify }
    }
}

/// The verification options of a trigger (`verify=`, `min_similarity=`, `n=`), checked against
/// the table; `None` without `verify=`.
///
/// # Safety
///
/// `rel` is an open relation (the trigger's).
pub(super) unsafe fn read_verify(rel: pg_sys::Relation, options: &[&String], usage: &str) -> Option<Verify> {
    unsafe {
        let mut column = None;
        let mut min_similarity = Verify::DEFAULT_MIN_SIMILARITY;
        let mut n = Verify::DEFAULT_N;
        for option in options {
            let (name, value) = option.split_once('=').expect("options have a =");
            match name {
                "verify" => column = Some(value.to_string()),
                "min_similarity" => match value.trim().parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => min_similarity = x,
                    _ => bad_argument(
                        format!("invalid min_similarity \"{value}\" for simhash_dedup_trigger"),
                        MIN_SIMILARITY_HINT,
                    ),
                },
                _ => match value.trim().parse::<usize>() {
                    Ok(x) if (1..=MAX_SHINGLE).contains(&x) => n = x,
                    _ => bad_argument(
                        format!("invalid shingle length \"{value}\" for simhash_dedup_trigger"),
                        &shingle_length_hint(),
                    ),
                },
            }
        }
        let Some(column) = column else {
            if options.is_empty() {
                return None;
            }
            bad_argument("min_similarity and n need verify=<text column>".into(), usage);
        };
        let tupdesc = (*rel).rd_att;
        let attnum = column_number(rel, &column);
        let column_type = pg_sys::getBaseType(pg_sys::SPI_gettypeid(tupdesc, attnum));
        if column_type != pg_sys::TEXTOID && column_type != pg_sys::VARCHAROID {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{column}\" of relation \"{}\" is of type {}, not text",
                    relation_name(rel),
                    type_name(pg_sys::SPI_gettypeid(tupdesc, attnum))
                ),
                Some("verify names the text the fingerprint was computed from (text or varchar).".into()),
                None,
            );
        }
        Some(Verify { column, attnum, min_similarity, n })
    }
}

/// The number of the table's column `column`, or an ERROR (42703).
unsafe fn column_number(rel: pg_sys::Relation, column: &str) -> i32 {
    unsafe {
        let name = CString::new(column).unwrap_or_default();
        let attnum = pg_sys::SPI_fnumber((*rel).rd_att, name.as_ptr());
        if attnum <= 0 {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{column}\" of relation \"{}\" does not exist", relation_name(rel)),
                None,
                None,
            );
        }
        attnum
    }
}

/// # Safety
///
/// In a backend, inside a transaction.
pub(super) unsafe fn report_table_oid(name: &str) -> Oid {
    unsafe {
        let text = name.into_datum().expect("a text datum");
        let names = pg_sys::textToQualifiedNameList(text.cast_mut_ptr());
        pg_sys::RangeVarGetRelidExtended(
            pg_sys::makeRangeVarFromNameList(names),
            pg_sys::NoLock as i32,
            0,
            None,
            std::ptr::null_mut(),
        )
    }
}

// The limits of the constraint's arguments, checked here for simhash_add_dedup and
// simhash_dedup_lookup (SQL values, through `check_arguments`) and above for the trigger's own text
// arguments. The numbers themselves are simhash_core's.

/// The largest radius of the constraint on a column of `kind`: that of the exact segment probes
/// for `simhash64`, the longest indexed code for codes.
pub(super) fn max_radius(kind: Kind) -> u32 {
    match kind {
        Kind::Simhash64 => MAX_DEDUP_RADIUS,
        Kind::Code => simhash_core::multi_index::MAX_CODE_BITS,
    }
}

fn radius_hint(kind: Kind) -> String {
    format!("The radius is an integer from 0 to {}.", max_radius(kind))
}

const MIN_SIMILARITY_HINT: &str = "The threshold is a number from 0 to 1.";

fn shingle_length_hint() -> String {
    format!("The shingle length n is an integer from 1 to {MAX_SHINGLE}.")
}

/// Checks the radius and, with verification, the threshold and shingle length of a call of
/// `function` (`simhash_add_dedup` or `simhash_dedup_lookup`) on a column of `kind`: 22023 when
/// out of range or NULL.
pub(super) fn check_arguments(
    function: &str,
    kind: Kind,
    k: Option<i32>,
    verify: bool,
    min_similarity: Option<f64>,
    n: Option<i32>,
) -> (u32, f64, usize) {
    let k = match k {
        Some(k) if k >= 0 && k as u32 <= max_radius(kind) => k as u32,
        _ => bad_argument(format!("radius {} is out of range for {function}", shown(k)), &radius_hint(kind)),
    };
    if !verify {
        return (k, Verify::DEFAULT_MIN_SIMILARITY, Verify::DEFAULT_N);
    }
    let min_similarity = match min_similarity {
        Some(x) if (0.0..=1.0).contains(&x) => x,
        _ => bad_argument(
            format!("min_similarity {} is out of range for {function}", shown(min_similarity.map(float_text))),
            MIN_SIMILARITY_HINT,
        ),
    };
    let n = match n {
        Some(n) if (1..=MAX_SHINGLE as i32).contains(&n) => n as usize,
        _ => {
            bad_argument(format!("shingle length {} is out of range for {function}", shown(n)), &shingle_length_hint())
        }
    };
    (k, min_similarity, n)
}

fn shown<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "NULL".into(), |v| v.to_string())
}

/// A float8 as PostgreSQL prints it (`1e+300`, `Infinity`, `NaN`), for messages.
fn float_text(x: f64) -> String {
    unsafe { CStr::from_ptr(pg_sys::float8out_internal(x)).to_string_lossy().into_owned() }
}

/// `simhash_internal.simhash_dedup_check(function, k, verify, min_similarity, n)`: the argument
/// checks of `simhash_pairs` (and of `simhash_add_dedup` in version 0.7.0), on a `simhash64`
/// column.
#[pg_extern(sql = false)]
fn simhash_dedup_check(
    function: Option<&str>,
    k: Option<i32>,
    verify: Option<&CStr>,
    min_similarity: Option<f64>,
    n: Option<i32>,
) {
    check_arguments(function.unwrap_or("simhash_add_dedup"), Kind::Simhash64, k, verify.is_some(), min_similarity, n);
}

/// `simhash_internal.simhash_dedup_check(function, k, verify, min_similarity, n, codes)`: the
/// argument checks of `simhash_add_dedup` (a PL/pgSQL function), so that the limits live in one
/// place; `codes` for a column of bit codes (radius up to 4096), else `simhash64` (up to 11).
#[pg_extern(sql = false)]
fn simhash_dedup_check_of_kind(
    function: Option<&str>,
    k: Option<i32>,
    verify: Option<&CStr>,
    min_similarity: Option<f64>,
    n: Option<i32>,
    codes: Option<bool>,
) {
    let kind = if codes == Some(true) { Kind::Code } else { Kind::Simhash64 };
    check_arguments(function.unwrap_or("simhash_add_dedup"), kind, k, verify.is_some(), min_similarity, n);
}

pub(super) fn bad_argument(message: String, hint: &str) -> ! {
    raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, None, Some(hint.into()))
}
