//! The near-duplicate constraint's values of a column of binary codes (`bit(n)`, `bit varying`):
//! [`Code`] as a [`Fingerprint`], and [`CodeSet`], a transaction's codes for the one pass over the
//! table (a `CodeNearSet` per length).

use pgrx::pg_sys::{self, Datum, Oid};
use simhash_core::code_dedup::CodeNearSet;
use simhash_core::cost::RecheckRoute;
use simhash_core::dedup::{NearSetError, Verdict};
use simhash_core::interrupt::STEP;

use super::value::{Code, Fingerprint, NearLookup};
use crate::memory::{push, vec_with_room};

impl Fingerprint for Code {
    type Set = CodeSet;

    unsafe fn of_datum(datum: Datum) -> Code {
        unsafe {
            // (packed: a short value stored in the row is read in place, not copied)
            let varlena = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let len = pgrx::varsize_any_exhdr(varlena);
            let data = std::slice::from_raw_parts(pgrx::vardata_any(varlena) as *const u8, len);
            let code = crate::codes::code_of_payload(data);
            let code = Code::new(code.bits, code.bytes);
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
        if self.bits() != other.bits() {
            return u32::MAX;
        }
        crate::codes::distance(
            crate::codes::Code { bits: self.bits(), bytes: self.bytes() },
            crate::codes::Code { bits: other.bits(), bytes: other.bytes() },
        )
    }

    fn text(&self) -> String {
        let bytes = self.bytes();
        if self.bits().is_multiple_of(4) {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("X'{}'", &hex[..self.bits() as usize / 4])
        } else {
            let bits: String = (0..self.bits() as usize)
                .map(|i| if bytes[i / 8] & (0x80 >> (i % 8)) != 0 { '1' } else { '0' })
                .collect();
            format!("B'{bits}'")
        }
    }

    fn to_datum(&self) -> Datum {
        unsafe {
            // A varbit: the varlena header, the length in bits, the bytes.
            let bytes = self.bytes();
            let size = pg_sys::VARHDRSZ + 4 + bytes.len();
            let value = pg_sys::palloc0(size) as *mut u8;
            pgrx::varlena::set_varsize_4b(value.cast(), size as i32);
            let payload = value.add(pg_sys::VARHDRSZ);
            std::ptr::copy_nonoverlapping((self.bits() as i32).to_ne_bytes().as_ptr(), payload, 4);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), payload.add(4), bytes.len());
            Datum::from(value)
        }
    }

    /// One set per length among `values` (codes of several lengths: see [`Code::distance`]).
    fn near_set(mut values: Vec<Code>, k: u32) -> Result<CodeSet, NearSetError> {
        if !values.is_sorted_by_key(|c| c.bits()) {
            // (Callers pass them sorted; an unstable sort needs no scratch space.)
            values.sort_unstable_by_key(|c| c.bits());
        }
        let mut lengths: Vec<(u32, usize)> = Vec::new();
        for same in values.chunk_by(|a, b| a.bits() == b.bits()) {
            push(&mut lengths, (same[0].bits(), same.len())).ok_or(NearSetError::OutOfMemory)?;
        }
        // Every length's codes copied flat first, the codes then freed before the sets' tables are
        // made (with a check for interrupts every STEP codes: a big COPY's millions of them take
        // seconds to copy and free).
        let interrupts = crate::fingerprint::text::INTERRUPTS;
        let mut flats: Vec<(u32, usize, Vec<u8>)> = Vec::new();
        flats.try_reserve_exact(lengths.len()).map_err(|_| NearSetError::OutOfMemory)?;
        let mut codes = values.iter();
        for (bits, count) in lengths {
            let mut flat = Vec::new();
            flat.try_reserve_exact(count * (bits as usize).div_ceil(8)).map_err(|_| NearSetError::OutOfMemory)?;
            for (m, code) in codes.by_ref().take(count).enumerate() {
                if m % STEP == STEP - 1 {
                    interrupts.check();
                }
                flat.extend_from_slice(code.bytes());
            }
            flats.push((bits, count, flat));
        }
        drop(values);
        let mut sets = Vec::new();
        sets.try_reserve_exact(flats.len()).map_err(|_| NearSetError::OutOfMemory)?;
        for (bits, count, flat) in flats {
            sets.push((bits, CodeNearSet::new(flat, count, bits, k, interrupts)?));
        }
        Ok(CodeSet { sets })
    }

    fn as_simhash(&self) -> Option<u64> {
        None
    }

    unsafe fn index_rows_within(index: pg_sys::Relation, value: &Code, k: u32) -> Vec<pg_sys::ItemPointerData> {
        unsafe { crate::index::code_rows_within(index, value.bits(), value.bytes(), k) }
    }

    unsafe fn suspects_through_index(
        _rel: pg_sys::Relation,
        _oid: Oid,
        _attnum: i32,
        values: Vec<Code>,
        _k: u32,
        _ours: &super::pending::Ours,
    ) -> Vec<Code> {
        values
    }

    fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, _k: u32) -> bool {
        simhash_core::code_dedup::one_pass_is_cheaper(rows, route != RecheckRoute::NoIndex, pending)
    }

    const VARLENA: bool = true;

    /// Sorting long codes (allocated) compares them through their pointers, a cache miss each:
    /// for a big COPY's millions of codes, seconds in one call that cannot stop (even the first
    /// split of an interruptible sort). They are sorted instead by (length, first 8 bytes) with
    /// their places, in pieces, then whole only among equal keys: the same order. Each code is
    /// moved, not copied, into its place.
    fn sorted_distinct(mut values: Vec<Code>) -> Vec<Code> {
        let interrupts = crate::fingerprint::text::INTERRUPTS;
        let prefix = |code: &Code| {
            let mut first = [0u8; 8];
            let bytes = code.bytes();
            let n = bytes.len().min(8);
            first[..n].copy_from_slice(&bytes[..n]);
            u64::from_be_bytes(first)
        };
        let n = values.len();
        let mut keys: Vec<(u32, u64, usize)> = vec_with_room(n).unwrap_or_else(|| out_of_memory(n));
        for (i, code) in values.iter().enumerate() {
            if i % STEP == STEP - 1 {
                interrupts.check();
            }
            keys.push((code.bits(), prefix(code), i));
        }
        crate::memory::sort_interruptibly_by(&mut keys, 1 << 20, &<(u32, u64, usize)>::cmp);
        let mut sorted: Vec<Code> = vec_with_room(n).unwrap_or_else(|| out_of_memory(n));
        for (g, same) in keys.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).enumerate() {
            if g % STEP == STEP - 1 {
                interrupts.check();
            }
            let start = sorted.len();
            // (An empty code in its place: no allocation.)
            sorted.extend(same.iter().map(|&(_, _, i)| std::mem::replace(&mut values[i], Code::new(0, &[]))));
            if same.len() > 1 {
                // (Codes alike in their first 8 bytes, perhaps many: in pieces too.)
                crate::memory::sort_interruptibly_by(&mut sorted[start..], 1 << 16, &Code::cmp);
            }
        }
        drop(values);
        // (Equal codes share their key: they are next to each other.)
        sorted.dedup();
        sorted
    }

    /// Codes of unequal lengths are never near (see [`Code::distance`]).
    fn first_come<'a>(
        rows: usize,
        value: &'a dyn Fn(usize) -> &'a Code,
        k: u32,
        near_other: &mut dyn FnMut(usize) -> bool,
        alive: &mut dyn FnMut(usize) -> bool,
        similar: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<Vec<Verdict>, NearSetError> {
        let code = |i: usize| {
            let code = value(i);
            (code.bits(), code.bytes())
        };
        simhash_core::code_dedup::first_come_codes(
            rows,
            &code,
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
    crate::memory::constraint_out_of_memory(&format!("the {n} codes of the near-duplicate check at commit"))
}

/// A [`CodeNearSet`] for each length of the codes, numbered one after the other.
pub(super) struct CodeSet {
    sets: Vec<(u32, CodeNearSet)>,
}

impl NearLookup<Code> for CodeSet {
    /// (Only those chosen are copied out: a big COPY's codes are millions, its suspects few.)
    fn members_chosen(&self, chosen: &[bool]) -> Vec<Code> {
        let count = chosen.iter().filter(|&&c| c).count();
        let mut members = vec_with_room(count).unwrap_or_else(|| out_of_memory(count));
        let mut first = 0;
        for (bits, set) in &self.sets {
            for m in 0..set.len() {
                if m % STEP == STEP - 1 {
                    crate::fingerprint::text::INTERRUPTS.check();
                }
                if chosen[first + m] {
                    members.push(Code::new(*bits, set.code(m)));
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
            if *bits == value.bits() {
                let found_at = &mut |m: usize| found(first + m);
                set.for_each_near(value.bytes(), found_at, crate::fingerprint::text::INTERRUPTS);
                return;
            }
            first += set.len();
        }
    }
}
