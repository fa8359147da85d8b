//! Rows of equal-length codes that arrive one after the other, kept in memory and looked up
//! within any radius without comparing them all: [`CodeRuns`], the copy of an index's tail (the
//! rows inserted after its build, `src/index/codes/`) that a backend keeps to look them up.
//!
//! The rows are cut into *runs* of consecutive rows, each laid out as an index's built part is
//! ([`crate::code_index`]: per indexed segment a directory of prefixes and the (low bits, ordinal)
//! entries sorted), oldest and largest first. New rows wait in a short unsealed stretch (compared
//! whole) until [`SEAL_ROWS`] of them are sealed into a run; a run then absorbs the run before it
//! while that one is not larger (the runs of a binary counter: about `log2(rows / SEAL_ROWS)` runs,
//! each row rebuilt about as many times over its life). A lookup probes each run where probing pays
//! ([`code_index::probing_pays`]), else compares the run's rows, then the unsealed ones: exact for
//! every `k`, as [`code_index::candidates`] is. A run whose codes have lean bits (nearly the same
//! in every row: a short value in a long type) takes its segments from its codes with their bits
//! dealt apart ([`crate::bit_deal`]), and a lookup deals the query alike before it probes that run.

use std::collections::TryReserveError;

use crate::bit_deal::BitDeal;
use crate::code_index::{self, Layout, Segments};
use crate::interrupt::{Interrupt, STEP};
use crate::multi_index::{hamming_bytes, lookup_radii, LookupCosts, MAX_CODE_BITS};

/// The segments a run files its rows under: all of a code of up to 16 segments (320 bits of a
/// million rows); the rest of a longer code is only compared. Fewer than an index files by default
/// ([`code_index::DEFAULT_INDEXED_SEGMENTS`]: every one), so that a backend's memory holds twice as
/// many rows of 1,024 bits.
pub const RUN_INDEXED_SEGMENTS: u32 = 16;

/// Rows compared whole before they are sealed into a run.
pub const SEAL_ROWS: usize = 256;

/// The costs of a lookup's work in memory, for choosing its radii: a probe (a binary search) one,
/// a candidate met a fifth, a code compared a half (in an index's pages, a code read costs as much
/// as a probe: [`code_index::COSTS`]).
pub const MEMORY_COSTS: LookupCosts = LookupCosts { probe: 1.0, candidate: 0.2, check: 0.5 };

/// A run of consecutive rows, `start..start + len`, and its segments (none when no layout fits
/// its codes: then it is compared whole).
struct Run {
    start: usize,
    len: usize,
    layout: Option<Layout>,
    /// Per indexed segment: its directory, and its entries' low bits and ordinals (relative to
    /// `start`), sorted by (value, ordinal).
    segments: Vec<(Vec<u32>, Vec<u16>, Vec<u32>)>,
    /// The radii of the last lookup's `k` (`None`: probing does not pay), for the next lookup.
    radii: Option<(u32, Option<Vec<Option<u32>>>)>,
    /// The deal its segments were taken with (`None`: the codes as they are).
    deal: Option<BitDeal>,
}

impl Run {
    /// `Err` when memory for its tables runs out.
    fn build(
        codes: &[u8],
        bytes: usize,
        bits: u32,
        start: usize,
        len: usize,
        interrupt: Interrupt,
    ) -> Result<Run, TryReserveError> {
        let mut run = Run { start, len, layout: None, segments: Vec::new(), radii: None, deal: None };
        let Ok(layout) = Layout::for_table(bits, len as u64, RUN_INDEXED_SEGMENTS) else { return Ok(run) };
        let mut rows = &codes[start * bytes..(start + len) * bytes];
        run.deal = BitDeal::for_codes(bits, len, &|m| &rows[m * bytes..(m + 1) * bytes], interrupt);
        // The rows with their bits dealt, while the segments are made.
        let dealt;
        if let Some(deal) = &run.deal {
            dealt = deal.dealt_all(rows, bytes, interrupt)?;
            rows = &dealt;
        }
        run.segments.try_reserve_exact(layout.indexed as usize)?;
        for i in 0..layout.indexed {
            interrupt.check();
            let entries = code_index::segment_entries(&layout, i, rows.chunks_exact(bytes))?;
            let directory = code_index::directory(
                entries.iter().map(|&(value, _)| layout.split(i, value).0),
                layout.directory_len(i),
            )?;
            let (mut lows, mut ordinals) = (Vec::new(), Vec::new());
            lows.try_reserve_exact(entries.len())?;
            ordinals.try_reserve_exact(entries.len())?;
            lows.extend(entries.iter().map(|&(value, _)| layout.split(i, value).1));
            ordinals.extend(entries.into_iter().map(|(_, ordinal)| ordinal));
            run.segments.push((directory, lows, ordinals));
        }
        run.layout = Some(layout);
        Ok(run)
    }

    /// The radii of a lookup within `k` when probing pays.
    fn radii(&mut self, k: u32) -> Option<Vec<Option<u32>>> {
        let layout = self.layout?;
        if self.radii.as_ref().is_none_or(|(last, _)| *last != k) {
            let rows = self.len as u64;
            let radii = lookup_radii(&layout.indexed_plan(), k, rows, MEMORY_COSTS)
                .filter(|radii| code_index::probing_pays(layout.work(radii, k, rows), rows));
            self.radii = Some((k, radii));
        }
        self.radii.as_ref().and_then(|(_, radii)| radii.clone())
    }

    fn memory(&self) -> usize {
        self.segments.iter().map(|(d, l, o)| d.capacity() * 4 + l.capacity() * 2 + o.capacity() * 4).sum()
    }
}

impl Segments for Run {
    fn directory(&mut self, i: u32, prefix: u32) -> u32 {
        self.segments[i as usize].0[prefix as usize]
    }

    fn low(&mut self, i: u32, position: u32) -> u16 {
        self.segments[i as usize].1[position as usize]
    }

    fn ordinal(&mut self, i: u32, position: u32) -> u32 {
        self.segments[i as usize].2[position as usize]
    }
}

#[cfg(test)]
thread_local! {
    /// The rows this thread's lookups compared with their query (for tests of how many a lookup
    /// meets).
    pub static COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Rows of `bits`-bit codes, each with a key (the caller's: a TID), in the order they came.
pub struct CodeRuns {
    bits: u32,
    bytes: usize,
    codes: Vec<u8>,
    keys: Vec<u64>,
    runs: Vec<Run>,
}

impl CodeRuns {
    pub fn new(bits: u32) -> CodeRuns {
        CodeRuns { bits, bytes: bits.div_ceil(8) as usize, codes: Vec::new(), keys: Vec::new(), runs: Vec::new() }
    }

    /// The length of every code.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The bytes held (the codes, keys and runs' tables).
    pub fn memory(&self) -> usize {
        self.codes.capacity() + self.keys.capacity() * 8 + self.runs.iter().map(Run::memory).sum::<usize>()
    }

    /// The bytes a row is expected to take once sealed among `rows` rows (for a caller that
    /// decides whether to keep them: the code, its key, and 6 bytes per indexed segment).
    pub fn row_memory(bits: u32, rows: u64) -> usize {
        let segments =
            Layout::for_table(bits, rows.max(1), RUN_INDEXED_SEGMENTS).map_or(0, |layout| layout.indexed as usize);
        bits.div_ceil(8) as usize + 8 + 6 * segments
    }

    /// Makes room for `rows` more rows' codes and keys (not their runs' tables); `Err` when memory
    /// runs out.
    pub fn try_reserve(&mut self, rows: usize) -> Result<(), std::collections::TryReserveError> {
        self.codes.try_reserve(rows.saturating_mul(self.bytes))?;
        self.keys.try_reserve(rows)
    }

    /// Appends a row (`code` of the rows' length). [`CodeRuns::seal`] files it. `Err` when memory
    /// runs out (never after [`CodeRuns::try_reserve`] made room for it).
    pub fn push(&mut self, code: &[u8], key: u64) -> Result<(), TryReserveError> {
        assert_eq!(code.len(), self.bytes, "a code of the rows' length");
        self.codes.try_reserve(self.bytes)?;
        self.keys.try_reserve(1)?;
        self.codes.extend_from_slice(code);
        self.keys.push(key);
        Ok(())
    }

    /// The rows not yet in a run.
    fn unsealed(&self) -> std::ops::Range<usize> {
        self.runs.last().map_or(0, |run| run.start + run.len)..self.len()
    }

    /// Seals the rows not yet in a run into one when there are [`SEAL_ROWS`] of them or more, then
    /// merges the newest runs while the one before the newest is not larger. `Err` when memory for
    /// the new run's tables runs out: the rows it was to hold are then unsealed (every lookup
    /// compares them whole: still found).
    pub fn seal(&mut self, interrupt: Interrupt) -> Result<(), TryReserveError> {
        let unsealed = self.unsealed();
        if unsealed.len() < SEAL_ROWS {
            return Ok(());
        }
        self.runs.try_reserve(1)?;
        let (mut start, mut len) = (unsealed.start, unsealed.len());
        while let Some(previous) = self.runs.last() {
            if previous.len > len {
                break;
            }
            start = previous.start;
            len += previous.len;
            self.runs.pop();
        }
        // (On failure the rows of the runs dropped are unsealed: compared whole, still found.)
        let run = Run::build(&self.codes, self.bytes, self.bits, start, len, interrupt)?;
        self.runs.push(run);
        Ok(())
    }

    /// Whether a lookup within `k` probes the largest run's segments (rather than comparing its
    /// rows): what makes a lookup at `k` cheaper than comparing every row.
    pub fn probes_at(&mut self, k: u32) -> bool {
        self.runs.first_mut().is_some_and(|run| run.radii(k).is_some())
    }

    /// Calls `found(distance, key, code)` for every row within `k` bits of `query` (of the rows'
    /// length), each once.
    pub fn for_each_within(
        &mut self,
        query: &[u8],
        k: u32,
        interrupt: Interrupt,
        found: &mut dyn FnMut(u32, u64, &[u8]),
    ) {
        let (codes, keys, bytes) = (&self.codes, &self.keys, self.bytes);
        let mut check = |row: usize| {
            #[cfg(test)]
            COMPARED.with(|c| c.set(c.get() + 1));
            let code = &codes[row * bytes..(row + 1) * bytes];
            if let Some(d) = hamming_bytes(code, query).filter(|&d| d <= k) {
                found(d, keys[row], code);
            }
        };
        let compare = |rows: std::ops::Range<usize>, check: &mut dyn FnMut(usize)| {
            for row in rows {
                if row % STEP == STEP - 1 {
                    interrupt.check();
                }
                check(row);
            }
        };
        let unsealed = self.runs.last().map_or(0, |run| run.start + run.len)..keys.len();
        let mut room = [0u8; MAX_CODE_BITS as usize / 8];
        for run in &mut self.runs {
            let probed = run.radii(k).and_then(|radii| {
                let layout = run.layout.expect("probed");
                // (A run with a layout has codes of at most MAX_CODE_BITS.)
                let query = match &run.deal {
                    Some(deal) => {
                        deal.apply(query, &mut room[..bytes]);
                        &room[..bytes]
                    }
                    None => query,
                };
                code_index::candidates(&layout, &radii, k, query, run, usize::MAX, interrupt)
            });
            match probed {
                Some(ordinals) => ordinals.into_iter().for_each(|ordinal| check(run.start + ordinal as usize)),
                None => compare(run.start..run.start + run.len, &mut check),
            }
        }
        compare(unsealed, &mut check);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Xorshift(u64);

    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn brute(rows: &[(Vec<u8>, u64)], query: &[u8], k: u32) -> Vec<(u32, u64)> {
        let mut within: Vec<(u32, u64)> = rows
            .iter()
            .filter_map(|(code, key)| hamming_bytes(code, query).filter(|&d| d <= k).map(|d| (d, *key)))
            .collect();
        within.sort_unstable();
        within
    }

    /// Every lookup, as rows arrive one or many at a time, equals a brute-force scan (rows near
    /// the queries planted, several lengths, every k up to 40).
    #[test]
    fn lookups_equal_brute_force_as_rows_arrive() {
        let mut lcg = Xorshift(0x9E37_79B9_7F4A_7C15);
        for bits in [64u32, 256, 100, 13] {
            let bytes = bits.div_ceil(8) as usize;
            let random = |lcg: &mut Xorshift| -> Vec<u8> {
                let mut code: Vec<u8> = (0..bytes).map(|_| lcg.next() as u8).collect();
                if bits % 8 != 0 {
                    code[bytes - 1] &= 0xFFu8 << (8 - bits % 8);
                }
                code
            };
            let centres: Vec<Vec<u8>> = (0..8).map(|_| random(&mut lcg)).collect();
            let mut runs = CodeRuns::new(bits);
            let mut rows: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut key = 0u64;
            for batch in [1usize, 1, 300, 1, 255, 1000, 7, 2000, 1, 1, 513] {
                for _ in 0..batch {
                    let mut code = centres[(lcg.next() % 8) as usize].clone();
                    let flips = if lcg.next().is_multiple_of(4) { bits } else { (lcg.next() % 24) as u32 };
                    for _ in 0..flips {
                        let bit = (lcg.next() % u64::from(bits)) as usize;
                        code[bit / 8] ^= 0x80 >> (bit % 8);
                    }
                    key += 1;
                    runs.push(&code, key).unwrap();
                    rows.push((code, key));
                }
                runs.seal(Interrupt::NEVER).unwrap();
                for query in centres.iter().take(3) {
                    for k in [0u32, 1, 3, 8, 16, 24, 40] {
                        let mut got = Vec::new();
                        runs.for_each_within(query, k, Interrupt::NEVER, &mut |d, key, code| {
                            assert_eq!(hamming_bytes(code, query), Some(d));
                            got.push((d, key));
                        });
                        got.sort_unstable();
                        assert_eq!(got, brute(&rows, query, k), "bits {bits}, {} rows, k {k}", rows.len());
                    }
                }
            }
            assert_eq!(runs.len(), rows.len());
            // The runs of a binary counter: each larger than the next.
            assert!(runs.runs.windows(2).all(|w| w[0].len > w[1].len));
            assert!(runs.runs.iter().any(|run| run.layout.is_some()), "bits {bits}: some run is probed");
            assert!(runs.memory() >= runs.len() * (bytes + 8));
        }
    }

    #[test]
    fn rows_wait_unsealed_until_a_run_is_worth_it() {
        let mut runs = CodeRuns::new(64);
        for key in 0..(SEAL_ROWS as u64 - 1) {
            runs.push(&key.to_be_bytes(), key).unwrap();
            runs.seal(Interrupt::NEVER).unwrap();
        }
        assert!(runs.runs.is_empty());
        runs.push(&[0xFF; 8], 999).unwrap();
        runs.seal(Interrupt::NEVER).unwrap();
        assert_eq!(runs.runs.len(), 1);
        assert!(CodeRuns::row_memory(256, 1_000_000) > 40);
    }
}
