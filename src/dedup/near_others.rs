//! The rows of a transaction that the deferred check found near a row of another transaction
//! (`deferred::check_written_rows`).

use std::collections::HashMap;

use pgrx::pg_sys;

use super::value::Fingerprint;

/// The rows of this transaction with a near-duplicate of another transaction (see
/// `deferred::check_written_rows`): by value, or with verification by row (rows with one value may have
/// texts that differ).
pub(super) enum NearOthers<F> {
    ByValue(HashMap<F, NearOther>),
    ByRow(HashMap<u64, NearOther>),
}

impl<F: Fingerprint> NearOthers<F> {
    pub(super) fn new(by_row: bool) -> Self {
        if by_row {
            NearOthers::ByRow(HashMap::new())
        } else {
            NearOthers::ByValue(HashMap::new())
        }
    }

    /// Notes the first row of another transaction met for the own row `tid` of value `fp`; `None`
    /// when memory runs out.
    pub(super) fn insert(&mut self, fp: &F, tid: pg_sys::ItemPointerData, other: NearOther) -> Option<()> {
        match self {
            NearOthers::ByValue(map) => {
                if !map.contains_key(fp) {
                    map.try_reserve(1).ok()?;
                    map.insert(fp.clone(), other);
                }
            }
            NearOthers::ByRow(map) => {
                map.try_reserve(1).ok()?;
                map.entry(crate::pg::tid::tid_order(&tid)).or_insert(other);
            }
        }
        Some(())
    }

    pub(super) fn get(&self, fp: &F, tid: pg_sys::ItemPointerData) -> Option<&NearOther> {
        match self {
            NearOthers::ByValue(map) => map.get(fp),
            NearOthers::ByRow(map) => map.get(&crate::pg::tid::tid_order(&tid)),
        }
    }
}

/// A row of this transaction with a near-duplicate of another transaction (see `deferred::check_written_rows`).
pub(super) struct NearOther {
    pub tid: pg_sys::ItemPointerData,
    pub distance: u32,
    /// With verification.
    pub similarity: Option<f64>,
}
