//! This backend's copies of the tails of indexes of codes (the rows inserted after the build,
//! which the index keeps in a chain of pages without segments): a radius lookup reads a tail whole
//! until this backend has read about [`WORTH`] times its rows so, then keeps a copy of it in memory
//! ([`simhash_core::code_runs::CodeRuns`]: runs of rows laid out as the built part, looked up
//! through their segments), reading from then on only the rows appended since. So a load through
//! the near-duplicate constraint into an index built empty (each row a lookup, then an insert into
//! the tail) takes time about linear in its rows instead of quadratic.
//!
//! A copy belongs to an index's file and build (its metapage's `stamp`) and to a count of the
//! VACUUMs that removed rows while it had a tail (`tail_marks`, bumped at the end of every
//! `ambulkdelete` of an index with a tail, so before the removed rows' TIDs can be reused, even
//! when an earlier VACUUM cancelled midway marked them): when any of them changes the copy is dropped. All
//! copies together take at most `simhash.index_tail_memory`; the least recently used go first. A
//! copy is taken out of the list while it is read, so that an ERROR there drops it.

use std::cell::RefCell;

use pgrx::pg_sys::{self, BlockNumber};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use simhash_core::code_runs::CodeRuns;

use super::super::page::{Kind, INVALID_BLOCK};
use super::meta;
use super::read::{is_removed, slots, Reader};
use crate::pg::tid::tid_order;

/// `simhash.index_tail_memory`, in kilobytes.
pub(crate) static TAIL_MEMORY: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);

/// Defines the setting; called once per backend from `_PG_init`.
pub(crate) fn define() {
    GucRegistry::define_int_guc(
        c"simhash.index_tail_memory",
        c"The most memory a backend keeps of the rows inserted into simhash indexes of bit codes since their build.",
        c"Radius lookups then read only the rows inserted since their last lookup, instead of every row inserted after the build; 0 keeps none.",
        &TAIL_MEMORY,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
}

fn limit() -> usize {
    TAIL_MEMORY.get().max(0) as usize * 1024
}

/// A tail is copied once lookups have read it whole about this many times.
const WORTH: u64 = 4;

/// What makes a copy this index's: its OID, file, build and tail's first page, and its VACUUMs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Owner {
    index: pg_sys::Oid,
    file: [u32; 3],
    stamp: u64,
    head: BlockNumber,
    marks: u32,
    bits: u32,
}

struct Copy {
    owner: Owner,
    /// Rows read whole by lookups since the copy was dropped (to decide when to keep one).
    read_whole: u64,
    /// The setting when a copy was last dropped for want of memory (none is kept again until the
    /// setting is raised).
    refused_at: Option<usize>,
    /// The copy (`None`: not kept), and where its reading stopped: the last page read and the
    /// slots taken from it.
    runs: Option<CodeRuns>,
    block: BlockNumber,
    taken: usize,
}

thread_local! {
    static COPIES: RefCell<Vec<Copy>> = const { RefCell::new(Vec::new()) };
}

/// What makes a copy the tail of `reader`'s index (`None`: the index has no tail).
fn owner_of(reader: &Reader) -> Option<Owner> {
    let m = &reader.meta;
    (m.tail_head != INVALID_BLOCK).then(|| Owner {
        index: unsafe { (*reader.index).rd_id },
        file: unsafe { crate::pg::compat::relation_file(reader.index) },
        stamp: m.stamp,
        head: m.tail_head,
        marks: m.tail_marks,
        bits: m.code_bits,
    })
}

/// Whether this backend keeps a copy of the tail of `reader`'s index whose lookup within `k`
/// probes segments: then a lookup at `k` ([`for_each_within`]) costs much less than reading every
/// row (the rounds of an ordered scan of an index built empty).
pub(super) fn copy_probes(reader: &Reader, k: u32) -> bool {
    let Some(owner) = owner_of(reader) else { return false };
    COPIES.with(|copies| {
        let mut copies = copies.borrow_mut();
        let copy = copies.iter_mut().find(|c| c.owner == owner);
        copy.and_then(|c| c.runs.as_mut()).is_some_and(|runs| runs.probes_at(k))
    })
}

/// Calls `found(distance, TID order, code)` for each live row of the tail of `reader`'s index
/// within `k` of `query` (from this backend's copy when it keeps one, else reading the tail).
///
/// # Safety
///
/// `reader` reads an open index of codes.
pub(super) unsafe fn for_each_within(
    reader: &mut Reader,
    query: &[u8],
    k: u32,
    found: &mut dyn FnMut(u32, u64, &[u8]),
) {
    unsafe {
        let Some(owner) = owner_of(reader) else { return };
        let m = &reader.meta;
        let taken = COPIES.with(|copies| {
            let mut copies = copies.borrow_mut();
            let at = copies.iter().position(|c| c.owner.index == owner.index)?;
            Some(copies.remove(at))
        });
        let mut copy = match taken {
            Some(copy) if copy.owner == owner => copy,
            _ => Copy { owner, read_whole: 0, refused_at: None, runs: None, block: m.tail_head, taken: 0 },
        };
        let per_page = meta::store_per_page(m.code_bytes()) as u64;
        let rows = u64::from(m.tail_pages) * per_page;
        let fits = rows as usize * CodeRuns::row_memory(owner.bits, rows) <= limit();
        if !fits {
            // (a tail too large for the setting, or a setting lowered: read whole)
            copy.runs = None;
        } else if copy.runs.is_none()
            && copy.read_whole >= WORTH * rows
            && copy.refused_at.is_none_or(|refused| limit() > refused)
        {
            copy.runs = Some(CodeRuns::new(owner.bits));
            (copy.block, copy.taken) = (m.tail_head, 0);
        }
        // (rows appended since the last lookup are read into the copy only while they fit: a tail
        // grown by millions of rows meanwhile is not copied whole before the copy is dropped)
        let most = limit() / CodeRuns::row_memory(owner.bits, rows);
        if copy.runs.is_some() && !read_new_rows(reader, &mut copy, most) {
            (copy.runs, copy.refused_at) = (None, Some(limit()));
        }
        if let Some(runs) = copy.runs.as_mut() {
            let interrupt = crate::fingerprint::text::INTERRUPTS;
            // (Memory for the copy's tables refused: read whole, as when it outgrows the setting.)
            if runs.seal(interrupt).is_ok() && runs.memory() <= limit() {
                runs.for_each_within(query, k, interrupt, found);
                keep(copy);
                return;
            }
            // (too large now: read whole)
            (copy.runs, copy.refused_at) = (None, Some(limit()));
        }
        reader.for_each_tail_row(&mut |code, tid| {
            copy.read_whole += 1;
            if let Some(d) = simhash_core::multi_index::hamming_bytes(code, query).filter(|&d| d <= k) {
                found(d, tid_order(tid), code);
            }
        });
        keep(copy);
    }
}

/// Adds to `copy` the live rows of the tail after where its reading stopped, unless that would
/// make it hold more than `most` rows or memory for a row is refused (`false`: the copy is then to
/// be dropped).
unsafe fn read_new_rows(reader: &mut Reader, copy: &mut Copy, most: usize) -> bool {
    unsafe {
        let (index, code_bytes) = (reader.index, reader.meta.code_bytes());
        let (mut block, mut taken) = (copy.block, copy.taken);
        let runs = copy.runs.as_mut().expect("kept");
        // (memory refused for a row: the copy is dropped, as when it would hold too many)
        let mut refused = false;
        reader.walk_chain(copy.block, Kind::CodeTail, |at, tail_page| {
            let mut n = 0;
            for (tid, code) in slots(index, tail_page, at, code_bytes) {
                n += 1;
                if (at != copy.block || n > copy.taken) && !is_removed(&tid) && runs.len() <= most && !refused {
                    refused = runs.push(code, tid_order(&tid)).is_err();
                }
            }
            (block, taken) = (at, n);
        });
        (copy.block, copy.taken) = (block, taken);
        !refused && runs.len() <= most
    }
}

/// Puts `copy` back as the most recently used, dropping the least recently used copies beyond
/// `simhash.index_tail_memory`.
fn keep(copy: Copy) {
    COPIES.with(|copies| {
        let mut copies = copies.borrow_mut();
        copies.push(copy);
        let memory =
            |copies: &Vec<Copy>| copies.iter().filter_map(|c| c.runs.as_ref()).map(CodeRuns::memory).sum::<usize>();
        while copies.len() > 1 && (memory(&copies) > limit() || copies.len() > 16) {
            copies.remove(0);
        }
    });
}
