//! Texts of stored rows for the verified commit-time checks: a row's shingle set ([`text_set`],
//! read by `super::recheck` and here), and [`OwnTexts`], which answers for the verified deferred
//! check (`simhash_add_dedup(..., verify => 'body', deferred => true)`) whether two rows the
//! transaction wrote within k are similar enough, as `simhash_core::dedup::first_come` asks at
//! commit (`super::deferred`).

use std::collections::HashMap;

use pgrx::pg_sys::{self, Datum};
use simhash_core::shingles::{Overlap, ShingleSet};

use super::config::Verify;
use super::dirty::own_row;
use super::messages::column_datum;
use super::pending::WrittenRow;
use super::value::Fingerprint;

/// The texts of the transaction's own rows, for `first_come`'s question whether two of them within
/// k are similar enough. The later row's shingle set is kept while it is compared with the earlier
/// kept rows within k; those rows' sets are kept for later rows too, up to `work_mem` (then the
/// kept sets are dropped and read again when needed).
pub(super) struct OwnTexts<'a> {
    rel: pg_sys::Relation,
    attnum: i32,
    verify: &'a Verify,
    blocks: pg_sys::BlockNumber,
    current: Option<(usize, ShingleSet)>,
    kept: HashMap<usize, ShingleSet>,
    kept_bytes: usize,
}

impl<'a> OwnTexts<'a> {
    pub(super) fn new(rel: pg_sys::Relation, attnum: i32, verify: &'a Verify, blocks: pg_sys::BlockNumber) -> Self {
        OwnTexts { rel, attnum, verify, blocks, current: None, kept: HashMap::new(), kept_bytes: 0 }
    }

    /// The similarity of the texts of row `i` and the earlier row `j` (each given with its place
    /// in the order written; `usize::MAX`: keep nothing) if it passes the threshold.
    ///
    /// # Safety
    ///
    /// At pre-commit, with an active snapshot; both rows are alive (else a row counts as having no
    /// text: never similar).
    pub(super) unsafe fn similarity<F: Fingerprint>(
        &mut self,
        (i, row): (usize, &WrittenRow<F>),
        (j, earlier): (usize, &WrittenRow<F>),
    ) -> Option<f64> {
        unsafe {
            if i == usize::MAX || self.current.as_ref().is_none_or(|(c, _)| *c != i) {
                self.current = Some((i, self.read(row)));
            }
            let read_now;
            let other = if j == usize::MAX {
                read_now = self.read(earlier);
                &read_now
            } else {
                if !self.kept.contains_key(&j) {
                    let set = self.read(earlier);
                    let bytes = set.len() * std::mem::size_of::<u64>();
                    if self.kept_bytes + bytes > pg_sys::work_mem.max(64) as usize * 1024 {
                        self.kept.clear();
                        self.kept_bytes = 0;
                    }
                    self.kept_bytes += bytes;
                    if self.kept.try_reserve(1).is_err() {
                        crate::memory::constraint_out_of_memory("the texts of the deferred near-duplicate check");
                    }
                    self.kept.insert(j, set);
                }
                &self.kept[&j]
            };
            let (_, set) = self.current.as_ref().expect("just set");
            self.verify.passes(Overlap::of_interruptible(set, other, crate::fingerprint::text::INTERRUPTS))
        }
    }

    /// The shingle set of an own row's text (empty if the row is gone or its text is NULL).
    unsafe fn read<F: Fingerprint>(&self, row: &WrittenRow<F>) -> ShingleSet {
        unsafe {
            match own_row(self.rel, self.attnum, row, self.blocks) {
                None => ShingleSet::default(),
                Some(tuple) => {
                    let set = text_set(self.rel, tuple, self.verify);
                    pg_sys::heap_freetuple(tuple);
                    set
                }
            }
        }
    }
}

/// Whether the row's text column is stored out of line (in the TOAST table).
pub(super) unsafe fn text_is_out_of_line(
    rel: pg_sys::Relation,
    tuple: pg_sys::HeapTuple,
    verify: Option<&Verify>,
) -> bool {
    unsafe {
        let Some(verify) = verify else { return false };
        column_datum(tuple, (*rel).rd_att, verify.attnum)
            .is_some_and(|datum| pgrx::varlena::varatt_is_1b_e(datum.cast_mut_ptr()))
    }
}

/// The shingle set of the row's text column (empty when NULL: never similar).
pub(super) unsafe fn text_set(rel: pg_sys::Relation, tuple: pg_sys::HeapTuple, verify: &Verify) -> ShingleSet {
    unsafe {
        let Some(datum) = column_datum(tuple, (*rel).rd_att, verify.attnum) else {
            return ShingleSet::default();
        };
        let text = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        // (as for the pair of this text with itself: one set of two at a time)
        let bytes = pgrx::varlena::varlena_to_byte_slice(text).len();
        crate::fingerprint::memory::check(
            "simhash_similarity",
            bytes.saturating_mul(2),
            crate::fingerprint::memory::Need::Sets,
        );
        let set = ShingleSet::of_interruptible(
            &crate::fingerprint::text::text_as_utf8(pgrx::varlena::varlena_to_byte_slice(text)),
            verify.n,
            crate::fingerprint::text::INTERRUPTS,
        );
        if text != datum.cast_mut_ptr() {
            pg_sys::pfree(text.cast());
        }
        set
    }
}

/// Whether the stored row's text column holds the same bytes as `new` (a text datum).
pub(super) unsafe fn same_text(
    old_row: pg_sys::HeapTuple,
    tupdesc: pg_sys::TupleDesc,
    attnum: i32,
    new: Datum,
) -> bool {
    unsafe {
        let Some(old) = column_datum(old_row, tupdesc, attnum) else { return false };
        if old.value() == new.value() {
            return true;
        }
        let (a, b) =
            (pg_sys::pg_detoast_datum_packed(old.cast_mut_ptr()), pg_sys::pg_detoast_datum_packed(new.cast_mut_ptr()));
        pgrx::varlena::varlena_to_byte_slice(a) == pgrx::varlena::varlena_to_byte_slice(b)
    }
}
