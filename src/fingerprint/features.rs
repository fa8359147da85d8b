//! Fingerprints of the user's own weighted features (`simhash(text[], float8[])`, the aggregate
//! `simhash_agg(feature, weight)`), and `simhash_features(text)`, which shows exactly what went
//! into `simhash(text)`.

use pgrx::prelude::*;

use super::simhash64::SimHash64;
use super::text::{text_as_utf8, utf8_to_server, INTERRUPTS};
use crate::pg::errors::raise;
use simhash_core::fingerprint::{feature_hash_interruptible, integer_weight, VoteTotals};
use simhash_core::interrupt::STEP;

fn bad_weight(weight: f64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("simhash feature weight {weight:e} is out of range"),
        Some("Weights are finite numbers below about 2.7e11 in absolute value.".into()),
        None,
    )
}

fn overflow() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        "simhash feature weights sum out of range".into(),
        Some("The weights of one fingerprint sum, at some point of the sum, to more than about 5.5e11.".into()),
        None,
    )
}

/// `simhash(features, weights)`: each feature hashed with FNV-1a-64 and voting with its weight.
/// NULL for empty arrays.
#[pg_extern(sql = false)]
fn simhash_weighted(features: Array<'_, &[u8]>, weights: Array<'_, f64>) -> Option<SimHash64> {
    if features.len() != weights.len() {
        raise(
            PgSqlErrorCode::ERRCODE_ARRAY_ELEMENT_ERROR,
            format!("simhash got {} features and {} weights", features.len(), weights.len()),
            Some("Give one weight per feature.".into()),
            None,
        );
    }
    if features.is_empty() {
        return None;
    }
    let mut totals = VoteTotals::default();
    for (i, (feature, weight)) in features.iter().zip(weights.iter()).enumerate() {
        if i % STEP == 0 {
            INTERRUPTS.check();
        }
        let (Some(feature), Some(weight)) = (feature, weight) else {
            raise(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "simhash features and weights must not be NULL".into(),
                None,
                None,
            )
        };
        let weight = integer_weight(weight).unwrap_or_else(|| bad_weight(weight));
        // The feature's text as UTF-8, whatever the database encoding (as simhash(text) reads text).
        let hash = feature_hash_interruptible(&text_as_utf8(feature), INTERRUPTS);
        totals.add(hash, weight).unwrap_or_else(|_| overflow());
    }
    Some(SimHash64(totals.fingerprint()))
}

fn totals_from(state: Option<Vec<i64>>) -> VoteTotals {
    match state {
        Some(v) if v.len() == 64 => VoteTotals(v.try_into().expect("64 totals")),
        Some(_) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "simhash_agg state must have 64 totals".into(),
            None,
            None,
        ),
        None => VoteTotals::default(),
    }
}

/// The aggregate's transition: NULL features are left out.
#[pg_extern(sql = false)]
fn simhash_agg_transition(state: Option<Vec<i64>>, feature: Option<&[u8]>, weight: Option<f64>) -> Option<Vec<i64>> {
    let (Some(feature), Some(weight)) = (feature, weight) else {
        return state;
    };
    let mut totals = totals_from(state);
    let weight = integer_weight(weight).unwrap_or_else(|| bad_weight(weight));
    let hash = feature_hash_interruptible(&text_as_utf8(feature), INTERRUPTS);
    totals.add(hash, weight).unwrap_or_else(|_| overflow());
    Some(totals.0.to_vec())
}

#[pg_extern(sql = false)]
fn simhash_agg_combine(a: Option<Vec<i64>>, b: Option<Vec<i64>>) -> Option<Vec<i64>> {
    match (a, b) {
        (None, None) => None,
        (a, None) => a,
        (None, b) => b,
        (a, b) => {
            let mut totals = totals_from(a);
            totals.merge(&totals_from(b)).unwrap_or_else(|_| overflow());
            Some(totals.0.to_vec())
        }
    }
}

#[pg_extern(sql = false)]
fn simhash_agg_final(state: Vec<i64>) -> SimHash64 {
    SimHash64(totals_from(Some(state)).fingerprint())
}

/// `simhash_features(text)`: the features of `simhash(text)`, heaviest first, with their weights
/// (the integer vote weight / 2^24) and hashes.
#[pg_extern(sql = false)]
fn simhash_features(
    text: &[u8],
) -> TableIterator<'static, (name!(feature, Vec<u8>), name!(weight, f64), name!(hash, SimHash64))> {
    // The feature column is declared as text in SQL: its bytes are in the server encoding.
    super::memory::check("simhash_features", text.len(), super::memory::Need::Words);
    let features = simhash_core::features::text_features_interruptible(&text_as_utf8(text), INTERRUPTS);
    TableIterator::new(features.into_iter().map(|(feature, weight)| {
        let hash = SimHash64(simhash_core::feature_hash(&feature));
        (utf8_to_server(feature), weight as f64 / simhash_core::features::WEIGHT_SCALE, hash)
    }))
}
