//! The rows of a build until they are written ([`BuildState`]): in memory (32 bytes each) while
//! they fit in `maintenance_work_mem`; beyond it in five sorts that spill to temporary files
//! ([`Spilled`]), one per segment and one for the NULL rows, which keep to `maintenance_work_mem`
//! together.

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use simhash_core::dense::VALUES;
use simhash_core::SEGMENTS;

use super::dense_write::{self, SortedRows};
use super::page::Entry;
use crate::pg::errors::raise;
use crate::pg::tuplesort::Sort;

/// The bytes a row with a fingerprint takes in memory: its entry, and its key while a segment
/// of the built part is sorted (`dense_write::InMemory`).
const ROW_BYTES: usize = 32;

/// The bytes a row whose fingerprint is NULL takes in memory.
const NULL_ROW_BYTES: usize = 16;

/// Rows moved to the sorts at a time when the build spills, after which their memory is given
/// back (16 MB).
const SPILLED_AT_ONCE: usize = 1 << 20;

/// The NOTICE of a build whose `rows` rows read so far, of `per_row` bytes each in memory, no
/// longer fit in `maintenance_work_mem`.
pub(super) fn notice_sorting_on_disk(rows: usize, per_row: usize) {
    crate::pg::errors::notice(
        format!("simhash index rows no longer fit in maintenance_work_mem after {rows} rows: sorting on disk"),
        Some("The build takes about twice as long.".into()),
        Some(format!("Raise maintenance_work_mem ({per_row} bytes a row) for a faster build.")),
    );
}

use simhash_core::bit_deal::BitCounts;

pub(super) struct BuildState {
    pub entries: Vec<Entry>,
    /// The rows whose fingerprint is NULL.
    pub nulls: Vec<Entry>,
    /// The bytes the rows may take in memory: `maintenance_work_mem`.
    pub budget: usize,
    /// The sorts the rows go to once they do not fit in memory.
    pub spilled: Option<Box<Spilled>>,
    /// Whether the rows go to the sorts beyond the budget (a build of format 5; one of format 4,
    /// in tests, keeps them in memory).
    pub spills: bool,
    /// The ones at each bit of the fingerprints counted so far (`bit_deal::counted`), and the
    /// fingerprints seen.
    pub bit_counts: BitCounts,
    pub seen: usize,
}

impl BuildState {
    /// Adds a row: `fp` (`None`: NULL) at `tid`.
    pub fn add(&mut self, fp: Option<u64>, tid: pg_sys::ItemPointerData) {
        if let Some(fp) = fp {
            if simhash_core::bit_deal::counted(self.seen) {
                self.bit_counts.add(&fp.to_be_bytes());
            }
            self.seen += 1;
        }
        if let Some(spilled) = &mut self.spilled {
            return spilled.put(fp, tid);
        }
        let held = self.entries.capacity() * ROW_BYTES + self.nulls.capacity() * NULL_ROW_BYTES;
        let (rows, row_bytes) = match fp {
            Some(_) => (&mut self.entries, ROW_BYTES),
            None => (&mut self.nulls, NULL_ROW_BYTES),
        };
        if rows.len() == rows.capacity() {
            // Room for as many again, or for what fits; the sorts when that is too little.
            let more = rows.len().max(1024).min(self.budget.saturating_sub(held) / row_bytes);
            if more < 1024 && self.spills {
                self.spill();
                return self.add(fp, tid);
            }
            crate::memory::reserve_entries_exact(rows, more.max(1));
        }
        rows.push(Entry { fp: fp.unwrap_or(0), tid });
    }

    /// Moves the rows held in memory to sorts that spill to disk, giving their memory back as it
    /// goes, for the rows to come too.
    fn spill(&mut self) {
        notice_sorting_on_disk(self.entries.len() + self.nulls.len(), ROW_BYTES);
        let mut spilled = Box::new(Spilled::new(self.budget / 1024));
        for (rows, null) in [(&mut self.entries, false), (&mut self.nulls, true)] {
            while !rows.is_empty() {
                let from = rows.len().saturating_sub(SPILLED_AT_ONCE);
                for entry in rows.drain(from..) {
                    spilled.put((!null).then_some(entry.fp), entry.tid);
                }
                rows.shrink_to_fit();
                pgrx::check_for_interrupts!();
            }
            *rows = Vec::new();
        }
        self.spilled = Some(spilled);
    }
}

/// A build's rows in sorts that keep to `maintenance_work_mem` together, spilling to temporary
/// files: each segment's order keys (segment 0's with the TIDs) and the NULL rows' TIDs, and how
/// many rows have each segment value, for the built part's directories.
pub(super) struct Spilled {
    pub segment_0: Option<Sort<(u64, pg_sys::ItemPointerData)>>,
    pub segments: [Option<Sort<u64>>; SEGMENTS as usize - 1],
    /// (taken by the build when it writes the chain of NULL rows)
    pub nulls: Option<Sort<u64>>,
    pub counts: Vec<u32>,
    /// The rows with a fingerprint.
    pub rows: u32,
    /// The segment begun (`SortedRows`).
    pub current: u32,
}

impl Spilled {
    fn new(budget_kb: usize) -> Spilled {
        let share = budget_kb / (SEGMENTS as usize + 1);
        Spilled {
            segment_0: Some(Sort::new(share)),
            segments: std::array::from_fn(|_| Some(Sort::new(share))),
            nulls: Some(Sort::new(share)),
            counts: vec![0; SEGMENTS as usize * VALUES],
            rows: 0,
            current: 0,
        }
    }

    fn put(&mut self, fp: Option<u64>, tid: pg_sys::ItemPointerData) {
        let Some(fp) = fp else {
            return self.nulls.as_mut().expect("not written yet").put(crate::pg::tid::tid_order(&tid));
        };
        if self.rows == u32::MAX {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("a simhash index is built on at most {} rows", u32::MAX),
                None,
                None,
            );
        }
        self.rows += 1;
        for n in 0..SEGMENTS {
            self.counts[n as usize * VALUES + usize::from(simhash_core::buckets::segment_value(fp, n))] += 1;
        }
        self.segment_0.as_mut().unwrap().put((dense_write::order_key(fp, 0), tid));
        for (n, sort) in (1..).zip(self.segments.iter_mut()) {
            sort.as_mut().unwrap().put(dense_write::order_key(fp, n));
        }
    }
}

impl SortedRows for Spilled {
    fn rows(&self) -> u32 {
        self.rows
    }
    fn begin(&mut self, n: u32) -> Vec<u32> {
        // The segments before are written: their sorts and files go.
        if n >= 1 {
            self.segment_0 = None;
            for m in 1..n {
                self.segments[m as usize - 1] = None;
            }
        }
        match n {
            0 => self.segment_0.as_mut().unwrap().sort(),
            n => self.segments[n as usize - 1].as_mut().unwrap().sort(),
        }
        self.current = n;
        simhash_core::dense::directory_of_counts(&self.counts[n as usize * VALUES..(n as usize + 1) * VALUES])
    }
    fn next(&mut self) -> Option<(u64, pg_sys::ItemPointerData)> {
        match self.current {
            0 => self.segment_0.as_mut().unwrap().next(),
            n => Some((self.segments[n as usize - 1].as_mut().unwrap().next()?, pg_sys::ItemPointerData::default())),
        }
    }
}
