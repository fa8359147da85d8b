//! Binary codes of any length stored as PostgreSQL `bit(n)`: perceptual image hashes, binary
//! embeddings, `simhash_bits` of embeddings. This file is their SQL surface beside the simhash64
//! type:
//!
//! - `simhash_hamming(a bit, b bit) → simhash_distance`: the number of differing bits (SQLSTATE
//!   22026 when the lengths differ, as `bit`'s own `#` does). Not named `hamming`, which exists for
//!   `simhash64` (two untyped literals would be ambiguous), nor `hamming_distance`, pgvector's.
//! - `simhash_code_ball(q, k)`, a composite (center bit varying, radius integer), and the
//!   operators the `simhash` index serves for `bit` columns (operator class `simhash_bit_ops`):
//!   `code <@ simhash_code_ball(q, k)` (within k bits of q) and `code <-> simhash_code_ball(q, 0)`
//!   (the distance to q, for `ORDER BY`). Nothing of ours is defined on `(bit, bit)`, so pgvector's
//!   operators on `bit` and ours live in one schema (docs/design/codes-of-any-length.md).
//! - `simhash_code(bytea) → bit`: the bytes as a code (first bit = most significant bit of the
//!   first byte), for codes kept as `bytea`.
//!
//! The bits arrive as the varbit's payload: a 4-byte bit length (native order), then the bits,
//! first bit in the most significant bit of the first byte, padding bits zero.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;
use crate::pg::nodes::composite_field;

mod estimate;

/// A code: its length in bits and its bytes (`ceil(bits / 8)` of them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Code<'a> {
    pub bits: u32,
    pub bytes: &'a [u8],
}

/// A `simhash_code_ball`: the query code and the radius.
#[derive(Clone, Debug)]
pub(crate) struct CodeBall {
    pub bits: u32,
    pub bytes: Vec<u8>,
    pub radius: i32,
}

impl CodeBall {
    pub(crate) fn center(&self) -> Code<'_> {
        Code { bits: self.bits, bytes: &self.bytes }
    }
}

/// Splits a varbit payload (length word, then bits) into a [`Code`]; a payload too short for its
/// length word is a damaged value (XX001).
pub(crate) fn code_of_payload(payload: &[u8]) -> Code<'_> {
    let bits = payload.get(..4).map(|w| i32::from_ne_bytes(w.try_into().expect("4 bytes")));
    match bits {
        Some(bits) if bits >= 0 && payload.len() - 4 == (bits as usize).div_ceil(8) => {
            Code { bits: bits as u32, bytes: &payload[4..] }
        }
        _ => raise(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "invalid bit string value".into(), None, None),
    }
}

/// The code of a non-NULL `bit` or `bit varying` datum, detoasted in the current memory context
/// (the slice lives as long as that context).
///
/// # Safety
///
/// `datum` is a non-NULL `bit` or `bit varying` value.
pub(crate) unsafe fn code_of<'a>(datum: Datum) -> Code<'a> {
    unsafe {
        let varlena = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
        let len = pgrx::varsize_any_exhdr(varlena);
        let data = pgrx::vardata_any(varlena) as *const u8;
        code_of_payload(std::slice::from_raw_parts(data, len))
    }
}

/// The ball of a non-NULL `simhash_code_ball` value (`None` when its center or radius is NULL).
///
/// # Safety
///
/// `datum` is a non-NULL `simhash_code_ball` value.
pub(crate) unsafe fn ball_of(datum: Datum) -> Option<CodeBall> {
    unsafe {
        let center = composite_field(datum, 1)?;
        let radius = composite_field(datum, 2)?;
        let code = code_of(center);
        Some(CodeBall { bits: code.bits, bytes: code.bytes.to_vec(), radius: radius.value() as i32 })
    }
}

/// The center of a non-NULL `simhash_code_ball` value, all that `<->` and `<~>` read (`None` when
/// it is NULL; a NULL radius does not matter there).
///
/// # Safety
///
/// `datum` is a non-NULL `simhash_code_ball` value.
pub(crate) unsafe fn center_of(datum: Datum) -> Option<CodeBall> {
    unsafe {
        let code = code_of(composite_field(datum, 1)?);
        Some(CodeBall { bits: code.bits, bytes: code.bytes.to_vec(), radius: 0 })
    }
}

/// The number of differing bits of two codes; 22026 when their lengths differ.
pub(crate) fn distance(a: Code<'_>, b: Code<'_>) -> u32 {
    if a.bits != b.bits {
        lengths_differ(a.bits, b.bits);
    }
    simhash_core::multi_index::hamming_bytes(a.bytes, b.bytes).expect("equal bit lengths have equal byte lengths")
}

/// The ERROR for codes of unequal lengths (22026, as `bit`'s `#` raises).
pub(crate) fn lengths_differ(a: u32, b: u32) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_STRING_DATA_LENGTH_MISMATCH,
        format!("cannot compare bit strings of different sizes ({a} and {b} bits)"),
        None,
        Some("Codes compared by Hamming distance have one length.".into()),
    )
}

/// `simhash_hamming(a bit, b bit)`.
#[pg_extern(sql = false)]
fn simhash_hamming(a: &[u8], b: &[u8]) -> i32 {
    distance(code_of_payload(a), code_of_payload(b)) as i32
}

/// `simhash_code(bytes bytea) → bit`: the bytes as a code of `8 * length` bits. Returned as the
/// varbit's payload.
#[pg_extern(sql = false)]
fn simhash_code(bytes: &[u8]) -> Vec<u8> {
    if bytes.len() > (simhash_core::multi_index::MAX_CODE_BITS / 8) as usize {
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("a code of {} bytes is longer than {} bits", bytes.len(), simhash_core::multi_index::MAX_CODE_BITS),
            None,
            Some("Codes have at most 4096 bits (512 bytes).".into()),
        );
    }
    let mut varbit = Vec::with_capacity(4 + bytes.len());
    varbit.extend_from_slice(&((bytes.len() * 8) as i32).to_ne_bytes());
    varbit.extend_from_slice(bytes);
    varbit
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_code_within() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `code <@ simhash_code_ball(q, k)`: whether `code` is within `k` bits of `q` (NULL when the
/// ball's center or radius is NULL; 22026 when the lengths differ).
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_code_within(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        // STRICT: both arguments are non-NULL here.
        match ball_of(args[1].value) {
            Some(ball) => {
                let d = distance(code_of(args[0].value), ball.center());
                Datum::from(i64::from(d) <= i64::from(ball.radius))
            }
            None => {
                (*fcinfo).isnull = true;
                Datum::from(0)
            }
        }
    }
}

/// The distance from a code to a ball's center (`None` when the center is NULL).
///
/// # Safety
///
/// `fcinfo` is a call of a function `(bit, simhash_code_ball)` with non-NULL arguments.
unsafe fn distance_to_center(fcinfo: pg_sys::FunctionCallInfo) -> Option<u32> {
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        let center = composite_field(args[1].value, 1)?;
        Some(distance(code_of(args[0].value), code_of(center)))
    }
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_code_distance() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `code <-> simhash_code_ball(q, k)`: the distance from `code` to `q` as an integer (the radius
/// is not used; NULL when the center is NULL; 22026 when the lengths differ).
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_code_distance(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        match distance_to_center(fcinfo) {
            Some(d) => Datum::from(d as i32),
            None => {
                (*fcinfo).isnull = true;
                Datum::from(0)
            }
        }
    }
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_code_distance_float() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `code <~> simhash_code_ball(q, k)`: the same distance as a float8, the order of pgvector's
/// `<~>` on `bit`, which the planner hook serves with it (`crate::lookup::codes`).
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_code_distance_float(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        match distance_to_center(fcinfo) {
            Some(d) => f64::from(d).into_datum().expect("a float8 is a datum"),
            None => {
                (*fcinfo).isnull = true;
                Datum::from(0)
            }
        }
    }
}
