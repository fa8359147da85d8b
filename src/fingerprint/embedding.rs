//! Fingerprints of embeddings: `simhash(real[], seed)` (64 bits, `simhash64`),
//! `simhash_bits(real[], bits, seed)` (1 to 4,096 bits, `bit`) and
//! `simhash_cosine_radius(cosine, bits, recall)`. The algorithm (random-hyperplane SimHash, the
//! planes, the fixed order of the sums, the cosine -> radius map) is
//! `simhash_core::hyperplanes`; this file reads the array, keeps the backend's matrices and maps
//! errors to SQLSTATEs.

use std::cell::RefCell;

use pgrx::array::RawArray;
use pgrx::prelude::*;
use simhash_core::hyperplanes::{self, EmbeddingError, PlaneCache, RadiusError, CACHE_BYTES, MAX_BITS, MAX_DIMENSIONS};

use super::simhash64::SimHash64;
use super::text::INTERRUPTS;
use crate::pg::errors::raise;

thread_local! {
    /// The matrices this backend generated, at most `CACHE_BYTES` (64 MiB) of them; a larger one
    /// is generated block by block for each vector instead.
    static PLANES: RefCell<PlaneCache> = const { RefCell::new(PlaneCache::new(CACHE_BYTES)) };
}

/// The elements of a one-dimensional `real[]` without NULLs (errors otherwise).
fn elements<'a>(embedding: Array<'a, f32>, function: &str) -> &'a [f32] {
    // SAFETY: the argument is a detoasted float4[] from PostgreSQL, alive for the call.
    let mut raw = unsafe { RawArray::from_array(embedding) }.expect("a STRICT function's array is not NULL");
    let dims = raw.dims().len();
    if dims > 1 {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!("{function} needs a one-dimensional array, not one of {dims} dimensions"),
            None,
            Some("An embedding is a flat list of numbers, such as ARRAY[0.1, -0.2, 0.3]::real[].".into()),
        );
    }
    if unsafe { raw.any_nulls() } {
        raise(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{function} needs an embedding without NULL elements"),
            None,
            None,
        );
    }
    // SAFETY: float4 elements, no NULLs (so every element is stored), 4-byte aligned data.
    unsafe { raw.data::<f32>().as_ref() }
}

/// The code of `embedding`, `bits` bits, most significant first; `None` for the zero vector.
fn code(embedding: Array<'_, f32>, bits: usize, seed: i64, function: &str) -> Option<Vec<u8>> {
    let v = elements(embedding, function);
    let nonzero = hyperplanes::check_vector(v).unwrap_or_else(|e| embedding_error(e, function));
    if !nonzero {
        return None;
    }
    // (an error raised by the interrupt check unwinds through the borrow, which is then released)
    PLANES.with(|cache| hyperplanes::code(&mut cache.borrow_mut(), seed as u64, v, bits, INTERRUPTS))
}

fn embedding_error(error: EmbeddingError, function: &str) -> ! {
    match error {
        EmbeddingError::Empty => raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!("{function} needs an embedding with at least one element"),
            None,
            None,
        ),
        EmbeddingError::TooManyDimensions(d) => raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{function} accepts at most {MAX_DIMENSIONS} dimensions, not {d}"),
            None,
            None,
        ),
        EmbeddingError::NotFinite(j) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{function} needs finite numbers; element {} is NaN or infinite", j + 1),
            None,
            None,
        ),
        EmbeddingError::BadBits(b) => bits_out_of_range(b, function),
    }
}

fn bits_out_of_range(bits: i64, function: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{function} code length {bits} is out of range"),
        Some(format!("A code has 1 to {MAX_BITS} bits.")),
        None,
    )
}

/// `simhash(embedding real[], seed bigint)`: the 64-bit random-hyperplane SimHash.
#[pg_extern(sql = false)]
fn simhash_embedding(embedding: Array<'_, f32>, seed: i64) -> Option<SimHash64> {
    let code = code(embedding, 64, seed, "simhash")?;
    Some(SimHash64(u64::from_be_bytes(code.try_into().expect("64 bits are 8 bytes"))))
}

/// `simhash_bits(embedding real[], bits integer, seed bigint)`: the code of `bits` bits as a
/// `bit(bits)`. Returned as the varbit's payload: its bit length (a native int4), then the bits.
#[pg_extern(sql = false)]
fn simhash_bits(embedding: Array<'_, f32>, bits: i32, seed: i64) -> Option<Vec<u8>> {
    let b = hyperplanes::check_bits(bits as i64).unwrap_or_else(|_| bits_out_of_range(bits as i64, "simhash_bits"));
    let code = code(embedding, b, seed, "simhash_bits")?;
    let mut varbit = Vec::with_capacity(4 + code.len());
    varbit.extend_from_slice(&bits.to_ne_bytes());
    varbit.extend_from_slice(&code);
    Some(varbit)
}

/// `simhash_cosine_radius(cosine, bits, recall)`: the radius at which a pair of vectors of
/// cosine similarity `cosine` is within it with probability at least `recall`.
#[pg_extern(sql = false)]
fn simhash_cosine_radius(cosine: f64, bits: i32, recall: f64) -> i32 {
    match hyperplanes::cosine_radius(cosine, bits as i64, recall) {
        Ok(k) => k as i32,
        Err(RadiusError::Cosine) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("simhash_cosine_radius cosine {cosine} is out of range"),
            Some("A cosine similarity is a number from -1 to 1.".into()),
            None,
        ),
        Err(RadiusError::Bits) => bits_out_of_range(bits as i64, "simhash_cosine_radius"),
        Err(RadiusError::Recall) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("simhash_cosine_radius recall {recall} is out of range"),
            None,
            Some("The recall is a probability above 0 and below 1, such as 0.95.".into()),
        ),
    }
}
