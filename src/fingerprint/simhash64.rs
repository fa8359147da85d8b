//! The `simhash64` base type: 8 bytes, passed by value like int8, compared as an unsigned integer
//! (so ORDER BY agrees with the hex text), with text and binary I/O and the `bit(64)` cast.
//! Equality, hashing and the int8 casts reuse PostgreSQL's int8 functions (same 64 bits);
//! see `sql/simhash.sql`.

use std::ffi::CStr;

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

use crate::pg::errors::raise;
use pgrx::datum::Internal;

/// A 64-bit SimHash fingerprint, the Rust side of SQL `simhash64`.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimHash64(pub u64);

unsafe impl SqlTranslatable for SimHash64 {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(SimHash64);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::ThisExtension;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("simhash64"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("simhash64")));
}

impl FromDatum for SimHash64 {
    unsafe fn from_polymorphic_datum(datum: Datum, is_null: bool, _: Oid) -> Option<Self> {
        (!is_null).then(|| SimHash64(datum.value() as u64))
    }
}

impl IntoDatum for SimHash64 {
    fn into_datum(self) -> Option<Datum> {
        Some(Datum::from(self.0 as i64))
    }

    fn type_oid() -> Oid {
        pgrx::rust_regtypein::<Self>()
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for SimHash64
where
    Self: 'fcx,
{
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("simhash64 functions are STRICT") }
    }
}

unsafe impl BoxRet for SimHash64 {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        unsafe { fcinfo.return_raw_datum(Datum::from(self.0 as i64)) }
    }
}

#[pg_extern(sql = false)]
fn simhash64_in(input: &CStr) -> SimHash64 {
    let text = input.to_string_lossy();
    match simhash_core::parse_fingerprint(&text) {
        Ok(fp) => SimHash64(fp),
        Err(why) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type simhash64: \"{text}\""),
            Some(why.to_string()),
            None,
        ),
    }
}

#[pg_extern(sql = false)]
fn simhash64_out(fp: SimHash64) -> std::ffi::CString {
    std::ffi::CString::new(simhash_core::format_hex(fp.0)).expect("hex has no NUL")
}

/// Binary input: 8 bytes, most significant first (the same wire format as int8).
#[pg_extern(sql = false)]
fn simhash64_recv(buf: Internal) -> SimHash64 {
    let buf = buf.unwrap().expect("recv is STRICT").cast_mut_ptr::<pg_sys::StringInfoData>();
    SimHash64(unsafe { pg_sys::pq_getmsgint64(buf) } as u64)
}

/// Binary output: 8 bytes, most significant first.
#[pg_extern(sql = false)]
fn simhash64_send(fp: SimHash64) -> Vec<u8> {
    fp.0.to_be_bytes().to_vec()
}

// Ordering is unsigned: '8000000000000000' sorts after '7fffffffffffffff', as its text does.
#[pg_extern(sql = false)]
fn simhash64_lt(a: SimHash64, b: SimHash64) -> bool {
    a < b
}
#[pg_extern(sql = false)]
fn simhash64_le(a: SimHash64, b: SimHash64) -> bool {
    a <= b
}
#[pg_extern(sql = false)]
fn simhash64_gt(a: SimHash64, b: SimHash64) -> bool {
    a > b
}
#[pg_extern(sql = false)]
fn simhash64_ge(a: SimHash64, b: SimHash64) -> bool {
    a >= b
}
#[pg_extern(sql = false)]
fn simhash64_cmp(a: SimHash64, b: SimHash64) -> i32 {
    a.cmp(&b) as i32
}

/// `bit(64)` -> simhash64: bit i of the string (from the left) is bit 63 - i of the fingerprint.
/// The argument arrives as the raw varbit payload: a 4-byte bit length, then the bits, left first.
#[pg_extern(sql = false)]
fn simhash64_from_bit(varbit: &[u8]) -> SimHash64 {
    let bit_len = i32::from_ne_bytes(varbit[..4].try_into().expect("varbit has a length word"));
    if bit_len != 64 {
        raise(
            PgSqlErrorCode::ERRCODE_STRING_DATA_LENGTH_MISMATCH,
            format!("bit string length {bit_len} does not match type simhash64"),
            Some("A simhash64 is exactly 64 bits.".into()),
            None,
        );
    }
    SimHash64(u64::from_be_bytes(varbit[4..12].try_into().expect("64 bits are 8 bytes")))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use super::SimHash64;
    use pgrx::prelude::*;

    /// The by-value Datum carries all 64 bits, the top bit included (no sign games).
    #[pg_test]
    fn datum_round_trip_keeps_all_64_bits() {
        for (literal, value) in [
            ("ffffffffffffffff", u64::MAX),
            ("8000000000000000", 1 << 63),
            ("0000000000000000", 0),
            ("0123456789abcdef", 0x0123_4567_89ab_cdef),
        ] {
            let read = Spi::get_one::<SimHash64>(&format!("SELECT '{literal}'::simhash64")).unwrap();
            assert_eq!(read, Some(SimHash64(value)));
            let written = Spi::get_one_with_args::<String>("SELECT $1::text", &[SimHash64(value).into()]).unwrap();
            assert_eq!(written.as_deref(), Some(literal));
        }
    }

    #[pg_test]
    fn sql_functions_agree_with_the_core() {
        let (a, b) = (0x0123_4567_89ab_cdefu64, 0xfedc_ba98_7654_3210u64);
        let d = Spi::get_one_with_args::<i32>("SELECT $1 <~> $2", &[SimHash64(a).into(), SimHash64(b).into()]).unwrap();
        assert_eq!(d, Some(simhash_core::hamming(a, b) as i32));
        let text = "海量网页去重是搜索引擎的基础工作";
        let fp = Spi::get_one_with_args::<SimHash64>("SELECT simhash($1)", &[text.into()]).unwrap();
        assert_eq!(fp, simhash_core::simhash_text(text).map(SimHash64));
    }

    /// The memo must never return another text's fingerprint.
    #[pg_test]
    fn memo_keys_on_the_exact_text() {
        let same = Spi::get_one::<bool>(
            "SELECT simhash('北京烤鸭很好吃') = simhash('北京烤鸭很好吃') AND simhash('北京烤鸭很好吃') <> simhash('上海小笼包很好吃')",
        );
        assert_eq!(same, Ok(Some(true)));
    }
}
