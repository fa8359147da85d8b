//! What the constraint compares, as one abstraction over the two kinds of column it can guard: a
//! `simhash64` fingerprint (`u64`) or a binary code of any length (`bit(n)`, [`Code`]). The row
//! trigger, the pending list and the commit-time recheck are generic over [`Fingerprint`]; each
//! kind brings its distance (at commit, codes of unequal lengths are never near: the row's own
//! lookup, `simhash_hamming`, raised 22026 against the codes it saw), its
//! in-memory set for the one pass over the table, and its lookup through the column's `simhash`
//! index. The `simhash64` kind compiles to what it was before: plain `u64`s.

use pgrx::pg_sys::{self, Datum, Oid};
use simhash_core::code_dedup::CodeNearSet;
use simhash_core::cost::RecheckRoute;
use simhash_core::dedup::{NearSet, NearSetError, Verdict};
use simhash_core::interrupt::STEP;

/// The kind of column the constraint guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Simhash64,
    /// `bit` or `bit varying` (or a domain over one).
    Code,
}

/// A binary code: its length in bits and its bytes (as `bit` stores them).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Code {
    pub bits: u32,
    pub bytes: Box<[u8]>,
}

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
        values: &[Self],
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

    /// The deferred check's judgement of a transaction's rows, whose values are `values` in the
    /// order written (`simhash_core::dedup::first_come`, whose arguments the others are).
    fn first_come(
        values: &[&Self],
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
        values: &[u64],
        k: u32,
        ours: &super::pending::Ours,
    ) -> Vec<u64> {
        unsafe { super::dirty::suspects_through_index(rel, oid, attnum, values, k, ours) }
    }

    fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, k: u32) -> bool {
        simhash_core::cost::one_pass_is_cheaper(rows, route, pending, k).expect("k was checked")
    }

    const VARLENA: bool = false;

    fn sorted_distinct(mut values: Vec<u64>) -> Vec<u64> {
        crate::index::sort_interruptibly_by(&mut values, 1 << 20, &u64::cmp);
        values.dedup();
        values
    }

    fn first_come(
        values: &[&u64],
        k: u32,
        near_other: &mut dyn FnMut(usize) -> bool,
        alive: &mut dyn FnMut(usize) -> bool,
        similar: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Vec<Verdict>, NearSetError> {
        let mut fps = Vec::new();
        fps.try_reserve_exact(values.len()).map_err(|_| NearSetError::OutOfMemory)?;
        fps.extend(values.iter().map(|&&fp| fp));
        simhash_core::dedup::first_come(&fps, k, near_other, alive, similar)
    }
}

impl NearLookup<u64> for NearSet {
    fn members_chosen(&self, chosen: &[bool]) -> Vec<u64> {
        self.fingerprints().iter().zip(chosen).filter_map(|(&fp, &c)| c.then_some(fp)).collect()
    }

    fn for_each_near(&self, value: &u64, found: &mut dyn FnMut(usize)) {
        NearSet::for_each_near(self, *value, found)
    }
}

impl Fingerprint for Code {
    type Set = CodeSet;

    unsafe fn of_datum(datum: Datum) -> Code {
        unsafe {
            // (packed: a short value stored in the row is read in place, not copied)
            let varlena = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let len = pgrx::varsize_any_exhdr(varlena);
            let data = std::slice::from_raw_parts(pgrx::vardata_any(varlena) as *const u8, len);
            let code = crate::codes::code_of_payload(data);
            let code = Code { bits: code.bits, bytes: code.bytes.into() };
            if varlena != datum.cast_mut_ptr() {
                pg_sys::pfree(varlena.cast());
            }
            code
        }
    }

    /// At commit, a code of another length is no near-duplicate (`u32::MAX`): the row's own check
    /// raised 22026 against the stored codes it saw, and a code kept from a row since rolled back
    /// (`ROLLBACK TO SAVEPOINT`) or deleted must not fail the commit.
    fn distance(&self, other: &Code) -> u32 {
        if self.bits != other.bits {
            return u32::MAX;
        }
        crate::codes::distance(
            crate::codes::Code { bits: self.bits, bytes: &self.bytes },
            crate::codes::Code { bits: other.bits, bytes: &other.bytes },
        )
    }

    fn text(&self) -> String {
        if self.bits.is_multiple_of(4) {
            let hex: String = self.bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("X'{}'", &hex[..self.bits as usize / 4])
        } else {
            let bits: String = (0..self.bits as usize)
                .map(|i| if self.bytes[i / 8] & (0x80 >> (i % 8)) != 0 { '1' } else { '0' })
                .collect();
            format!("B'{bits}'")
        }
    }

    fn to_datum(&self) -> Datum {
        unsafe {
            // A varbit: the varlena header, the length in bits, the bytes.
            let size = pg_sys::VARHDRSZ + 4 + self.bytes.len();
            let value = pg_sys::palloc0(size) as *mut u8;
            pgrx::varlena::set_varsize_4b(value.cast(), size as i32);
            let payload = value.add(pg_sys::VARHDRSZ);
            std::ptr::copy_nonoverlapping((self.bits as i32).to_ne_bytes().as_ptr(), payload, 4);
            std::ptr::copy_nonoverlapping(self.bytes.as_ptr(), payload.add(4), self.bytes.len());
            Datum::from(value)
        }
    }

    /// One set per length among `values` (codes of several lengths: see [`Code::distance`]).
    fn near_set(mut values: Vec<Code>, k: u32) -> Result<CodeSet, NearSetError> {
        if !values.is_sorted_by_key(|c| c.bits) {
            // (Callers pass them sorted: a stable sort's scratch space for millions is not free.)
            values.sort_by_key(|c| c.bits);
        }
        let lengths: Vec<(u32, usize)> =
            values.chunk_by(|a, b| a.bits == b.bits).map(|c| (c[0].bits, c.len())).collect();
        let mut sets = Vec::new();
        let interrupts = crate::fingerprint::text::INTERRUPTS;
        let mut values = values.into_iter();
        for (bits, count) in lengths {
            // (Each code is freed once copied, with a check for interrupts every STEP codes: a big
            // COPY's millions of them take seconds to copy and free.)
            let mut flat = Vec::new();
            flat.try_reserve_exact(count * (bits as usize).div_ceil(8)).map_err(|_| NearSetError::OutOfMemory)?;
            for (m, code) in values.by_ref().take(count).enumerate() {
                if m % STEP == STEP - 1 {
                    interrupts.check();
                }
                flat.extend_from_slice(&code.bytes);
            }
            sets.push((bits, CodeNearSet::new(flat, count, bits, k, interrupts)?));
        }
        Ok(CodeSet { sets })
    }

    fn as_simhash(&self) -> Option<u64> {
        None
    }

    unsafe fn index_rows_within(index: pg_sys::Relation, value: &Code, k: u32) -> Vec<pg_sys::ItemPointerData> {
        unsafe { crate::index::code_rows_within(index, value.bits, &value.bytes, k) }
    }

    unsafe fn suspects_through_index(
        _rel: pg_sys::Relation,
        _oid: Oid,
        _attnum: i32,
        values: &[Code],
        _k: u32,
        _ours: &super::pending::Ours,
    ) -> Vec<Code> {
        values.to_vec()
    }

    fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, _k: u32) -> bool {
        simhash_core::code_dedup::one_pass_is_cheaper(rows, route != RecheckRoute::NoIndex, pending)
    }

    const VARLENA: bool = true;

    /// Sorting the codes themselves compares them through their pointers, a cache miss each: for a
    /// big COPY's millions of codes, seconds in one call that cannot stop (even the first split of
    /// an interruptible sort). They are sorted instead by (length, first 8 bytes) with their
    /// places, in pieces, then whole only among equal keys: the same order.
    fn sorted_distinct(values: Vec<Code>) -> Vec<Code> {
        let interrupts = crate::fingerprint::text::INTERRUPTS;
        let prefix = |code: &Code| {
            let mut first = [0u8; 8];
            let n = code.bytes.len().min(8);
            first[..n].copy_from_slice(&code.bytes[..n]);
            u64::from_be_bytes(first)
        };
        let mut keys: Vec<(u32, u64, usize)> = Vec::new();
        if keys.try_reserve_exact(values.len()).is_err() {
            out_of_memory(values.len());
        }
        for (i, code) in values.iter().enumerate() {
            if i % STEP == STEP - 1 {
                interrupts.check();
            }
            keys.push((code.bits, prefix(code), i));
        }
        crate::index::sort_interruptibly_by(&mut keys, 1 << 20, &<(u32, u64, usize)>::cmp);
        let mut slots: Vec<Option<Code>> = values.into_iter().map(Some).collect();
        let mut sorted = Vec::new();
        if sorted.try_reserve_exact(slots.len()).is_err() {
            out_of_memory(slots.len());
        }
        for (n, same) in keys.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).enumerate() {
            if n % STEP == STEP - 1 {
                interrupts.check();
            }
            let start = sorted.len();
            sorted.extend(same.iter().map(|&(_, _, i)| slots[i].take().expect("each place once")));
            if same.len() > 1 {
                sorted[start..].sort_unstable();
                let mut tail = sorted.split_off(start);
                tail.dedup();
                sorted.append(&mut tail);
            }
        }
        sorted
    }

    /// Codes of unequal lengths are never near (see [`Code::distance`]).
    fn first_come(
        values: &[&Code],
        k: u32,
        near_other: &mut dyn FnMut(usize) -> bool,
        alive: &mut dyn FnMut(usize) -> bool,
        similar: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Vec<Verdict>, NearSetError> {
        let mut codes = Vec::new();
        codes.try_reserve_exact(values.len()).map_err(|_| NearSetError::OutOfMemory)?;
        codes.extend(values.iter().map(|code| (code.bits, &code.bytes[..])));
        simhash_core::code_dedup::first_come_codes(
            &codes,
            k,
            near_other,
            alive,
            similar,
            crate::fingerprint::text::INTERRUPTS,
        )
    }
}

/// ERROR 53200 for `n` values of the commit-time check.
fn out_of_memory(n: usize) -> ! {
    crate::pg::errors::raise(
        pgrx::PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        format!("out of memory for the {n} codes of the near-duplicate check at commit"),
        None,
        None,
    )
}

/// A [`CodeNearSet`] for each length of the codes, numbered one after the other.
pub(super) struct CodeSet {
    sets: Vec<(u32, CodeNearSet)>,
}

impl NearLookup<Code> for CodeSet {
    /// (Only those chosen are copied out: a big COPY's codes are millions, its suspects few.)
    fn members_chosen(&self, chosen: &[bool]) -> Vec<Code> {
        let mut members = Vec::new();
        let mut first = 0;
        for (bits, set) in &self.sets {
            for m in 0..set.len() {
                if m % STEP == STEP - 1 {
                    crate::fingerprint::text::INTERRUPTS.check();
                }
                if chosen[first + m] {
                    members.push(Code { bits: *bits, bytes: set.code(m).into() });
                }
            }
            first += set.len();
        }
        members
    }

    /// The members of `value`'s length within k (none of another length: see [`Code::distance`]).
    fn for_each_near(&self, value: &Code, found: &mut dyn FnMut(usize)) {
        let mut first = 0;
        for (bits, set) in &self.sets {
            if *bits == value.bits {
                let found_at = &mut |m: usize| found(first + m);
                set.for_each_near(&value.bytes, found_at, crate::fingerprint::text::INTERRUPTS);
                return;
            }
            first += set.len();
        }
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
