//! What the constraint compares, as one abstraction over the two kinds of column it can guard: a
//! `simhash64` fingerprint (`u64`) or a binary code of any length (`bit(n)`, [`Code`]). The row
//! trigger, the pending list and the commit-time recheck are generic over [`Fingerprint`]; each
//! kind brings its distance (at commit, codes of unequal lengths are never near: the row's own
//! lookup, `simhash_hamming`, raised 22026 against the codes it saw), its
//! in-memory set for the one pass over the table, and its lookup through the column's `simhash`
//! index. The `simhash64` kind compiles to what it was before: plain `u64`s.

use pgrx::pg_sys::{self, Datum, Oid};
use simhash_core::cost::RecheckRoute;
use simhash_core::dedup::{NearSet, NearSetError, Verdict};

/// The kind of column the constraint guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Simhash64,
    /// `bit` or `bit varying` (or a domain over one).
    Code,
}

pub(super) use super::code::Code;

/// A value the constraint compares.
pub(super) trait Fingerprint: Clone + Ord + std::hash::Hash + std::fmt::Debug + 'static {
    /// The in-memory set of a transaction's values for the one pass over the table.
    type Set: NearLookup<Self>;

    /// The value of a non-NULL datum of the column.
    ///
    /// # Safety
    ///
    /// `datum` is a non-NULL value of the column's type.
    unsafe fn of_datum(datum: Datum) -> Self;

    /// The number of differing bits (`u32::MAX`, never near, for codes of unequal lengths).
    fn distance(&self, other: &Self) -> u32;

    /// As messages show it: hexadecimal (`X'...'` for a code whose length is a multiple of 4, else
    /// `B'...'`).
    fn text(&self) -> String;

    /// As an argument of a statement (a code is copied into the current memory context).
    fn to_datum(&self) -> Datum;

    /// The set of `values` within `k` (members of one length each find only their own length).
    fn near_set(values: Vec<Self>, k: u32) -> Result<Self::Set, NearSetError>;

    /// The fingerprint, for the segment B-trees (which only `simhash64` columns have).
    fn as_simhash(&self) -> Option<u64>;

    /// The TIDs of the rows within `k` of `value` in the column's `simhash` index, read directly
    /// (for a dirty snapshot: a scan through the access method takes only MVCC snapshots).
    ///
    /// # Safety
    ///
    /// `index` is an open `simhash` index of the column.
    unsafe fn index_rows_within(index: pg_sys::Relation, value: &Self, k: u32) -> Vec<pg_sys::ItemPointerData>;

    /// Of `values`, those that may have a row of another transaction within `k`, through the
    /// `simhash` index `oid` (for codes: all of them, each then looked up on its own).
    ///
    /// # Safety
    ///
    /// As `super::dirty::suspects_through_index`.
    unsafe fn suspects_through_index(
        rel: pg_sys::Relation,
        oid: Oid,
        attnum: i32,
        values: Vec<Self>,
        k: u32,
        ours: &super::pending::Ours,
    ) -> Vec<Self>;

    /// Whether one pass over a table of `rows` rows costs less than looking up `pending` values
    /// by `route`.
    fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, k: u32) -> bool;

    /// Whether a stored value may be out of line (TOAST), so that reading it needs a snapshot.
    const VARLENA: bool;

    /// `values` sorted, without repeats, checking for interrupts between pieces of the work.
    fn sorted_distinct(values: Vec<Self>) -> Vec<Self>;

    /// The deferred check's judgement of a transaction's `rows` rows, whose values are `value(i)`
    /// in the order written (`simhash_core::dedup::first_come`, whose arguments the others are).
    fn first_come<'a>(
        rows: usize,
        value: &'a dyn Fn(usize) -> &'a Self,
        k: u32,
        near_other: &mut dyn FnMut(usize) -> bool,
        alive: &mut dyn FnMut(usize) -> bool,
        similar: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Vec<Verdict>, NearSetError>;
}

/// Sorts `values` and drops repeats, checking for interrupts (a big COPY's millions of values).
pub(super) fn sort_distinct<F: Fingerprint>(values: &mut Vec<F>) {
    *values = F::sorted_distinct(std::mem::take(values));
}

/// [`NearSet`] and its counterpart for codes.
pub(super) trait NearLookup<F> {
    /// The members `i` (in the order `for_each_near` numbers them) with `chosen[i]`.
    fn members_chosen(&self, chosen: &[bool]) -> Vec<F>;
    /// Calls `found(i)` for each member `i` within `k` of `value` (perhaps more than once).
    fn for_each_near(&self, value: &F, found: &mut dyn FnMut(usize));
}

impl Fingerprint for u64 {
    type Set = NearSet;

    unsafe fn of_datum(datum: Datum) -> u64 {
        datum.value() as u64
    }

    fn distance(&self, other: &u64) -> u32 {
        simhash_core::hamming(*self, *other)
    }

    fn text(&self) -> String {
        simhash_core::format_hex(*self)
    }

    fn to_datum(&self) -> Datum {
        Datum::from(*self)
    }

    fn near_set(values: Vec<u64>, k: u32) -> Result<NearSet, NearSetError> {
        NearSet::new(values, k)
    }

    fn as_simhash(&self) -> Option<u64> {
        Some(*self)
    }

    unsafe fn index_rows_within(index: pg_sys::Relation, value: &u64, k: u32) -> Vec<pg_sys::ItemPointerData> {
        unsafe { crate::index::rows_within(index, *value, k) }
    }

    unsafe fn suspects_through_index(
        rel: pg_sys::Relation,
        oid: Oid,
        attnum: i32,
        values: Vec<u64>,
        k: u32,
        ours: &super::pending::Ours,
    ) -> Vec<u64> {
        unsafe { super::dirty::suspects_through_index(rel, oid, attnum, &values, k, ours) }
    }

    fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, k: u32) -> bool {
        simhash_core::cost::one_pass_is_cheaper(rows, route, pending, k).expect("k was checked")
    }

    const VARLENA: bool = false;

    fn sorted_distinct(mut values: Vec<u64>) -> Vec<u64> {
        crate::memory::sort_interruptibly_by(&mut values, 1 << 20, &u64::cmp);
        values.dedup();
        values
    }

    fn first_come<'a>(
        rows: usize,
        value: &'a dyn Fn(usize) -> &'a u64,
        k: u32,
        near_other: &mut dyn FnMut(usize) -> bool,
        alive: &mut dyn FnMut(usize) -> bool,
        similar: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Vec<Verdict>, NearSetError> {
        let mut fps = Vec::new();
        fps.try_reserve_exact(rows).map_err(|_| NearSetError::OutOfMemory)?;
        fps.extend((0..rows).map(|i| *value(i)));
        simhash_core::dedup::first_come(&fps, k, near_other, alive, similar, crate::fingerprint::text::INTERRUPTS)
    }
}

impl NearLookup<u64> for NearSet {
    fn members_chosen(&self, chosen: &[bool]) -> Vec<u64> {
        let count = chosen.iter().filter(|&&c| c).count();
        let mut members = crate::memory::vec_with_room(count).unwrap_or_else(|| {
            crate::memory::constraint_out_of_memory(&format!(
                "the {count} fingerprints of the near-duplicate check at commit"
            ))
        });
        members.extend(self.fingerprints().iter().zip(chosen).filter_map(|(&fp, &c)| c.then_some(fp)));
        members
    }

    fn for_each_near(&self, value: &u64, found: &mut dyn FnMut(usize)) {
        NearSet::for_each_near(self, *value, found, crate::fingerprint::text::INTERRUPTS)
    }
}

/// The kind of column `attnum` of `rel` (`None`: neither; `schema` is the extension's).
///
/// # Safety
///
/// `rel` is an open relation.
pub(super) unsafe fn column_kind(rel: pg_sys::Relation, attnum: i32, schema: Oid) -> Option<Kind> {
    unsafe {
        let base = pg_sys::getBaseType(pg_sys::SPI_gettypeid((*rel).rd_att, attnum));
        if base == crate::lookup::catalog::simhash64_type(schema) {
            Some(Kind::Simhash64)
        } else if base == pg_sys::BITOID || base == pg_sys::VARBITOID {
            Some(Kind::Code)
        } else {
            None
        }
    }
}
