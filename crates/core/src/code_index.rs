//! The layout of an index of binary codes of any length (`bit(n)`, the "bit codes" kind of the
//! `simhash` access method), without pages: the design is `docs/design/codes-of-any-length.md`
//! (layout "A"), the segments, radii and probes are [`crate::multi_index`]'s.
//!
//! - The *code store*: every row's code once, in ascending order of the codes (so equal codes are
//!   adjacent); a row is named by its position there, its *ordinal*.
//! - Per indexed segment (the first `segments` of the plan, [`DEFAULT_INDEXED_SEGMENTS`] unless
//!   the index says otherwise): the entries
//!   (segment value, ordinal) sorted by (value, ordinal), each split into the value's top
//!   `prefix_bits` bits (the *prefix*) and the bits below them (the *low* bits, at most 16, kept
//!   in the entry as a byte, or two when there are more than 8), and a *directory*: for each prefix, where its entries start
//!   (`2^prefix_bits + 1` positions, the last one the row count). A probe value goes to its
//!   prefix's run through the directory and finds its entries there by a binary search on the low
//!   bits ([`probe_run`]).
//! - A lookup within `k` bits ([`Layout::radii`], [`candidates`]): the probes of each indexed
//!   segment within its radius, their ordinals collected with the slack of each meeting, sorted,
//!   and kept once when their slacks add up to the threshold
//!   ([`crate::multi_index::slack_threshold`]: radii of more units than the pigeonhole's `k + 1`
//!   leave most rows met in one run below it, unread); the caller reads each kept candidate's
//!   code and keeps those within `k`. Complete by the generalised pigeonhole
//!   ([`crate::multi_index`]), checked against brute force below.
//! - Nearest rows in passes of bounded memory ([`Smallest`]): the next `capacity` rows in
//!   (distance, TID) order after a cursor.

use std::collections::{BinaryHeap, TryReserveError};

use crate::multi_index::{self, LookupCosts, PlanError, SegmentPlan, Work};

/// The segments an index files its rows under unless told otherwise (the rest of a long code is
/// only compared): all of a code of up to 16 segments (320 bits of a 1M-row table).
pub const DEFAULT_INDEXED_SEGMENTS: u32 = 16;

/// The most segments a plan has (4,096 bits in segments of 16), so the most an index can file its
/// rows under.
pub const MAX_INDEXED_SEGMENTS: u32 = multi_index::MAX_CODE_BITS / 16;

/// The most bits of a segment value below its prefix (an entry keeps them as a `u16`).
pub const MAX_LOW_BITS: u32 = 16;

/// How an index of codes is cut: the segment plan, the segments indexed, the prefix bits of the
/// directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub plan: SegmentPlan,
    /// The first `indexed` segments of the plan are indexed.
    pub indexed: u32,
    /// The directory's prefix: the top `prefix_bits` bits of a segment value (of a full-width
    /// segment; [`Layout::prefix_bits_of`] for each).
    pub prefix_bits: u32,
}

impl Layout {
    /// The layout of an index built on `rows` rows of `code_bits`-bit codes: the plan of
    /// [`SegmentPlan::for_table`], the first `segments` of its segments indexed (all of them when
    /// it has fewer; at least one), a directory of about one prefix per row (8 to 16 bits; more
    /// when the low bits would not fit).
    pub fn for_table(code_bits: u32, rows: u64, segments: u32) -> Result<Layout, PlanError> {
        let plan = SegmentPlan::for_table(code_bits, rows)?;
        let log2 = 64 - rows.max(1).leading_zeros();
        let prefix_bits = log2.clamp(8, 16).min(plan.width).max(plan.width.saturating_sub(MAX_LOW_BITS));
        Ok(Layout { plan, indexed: plan.count.min(segments.max(1)), prefix_bits })
    }

    /// Whether the fields are consistent (for a layout read from a page).
    pub fn is_valid(&self) -> bool {
        let Ok(plan) = SegmentPlan::with_width(self.plan.code_bits, self.plan.width) else { return false };
        plan == self.plan
            && (1..=plan.count).contains(&self.indexed)
            && self.prefix_bits >= 1
            && self.prefix_bits <= 16
            && self.prefix_bits <= plan.width
            && plan.width - self.prefix_bits <= MAX_LOW_BITS
    }

    /// The prefix bits of segment `i`.
    pub fn prefix_bits_of(&self, i: u32) -> u32 {
        self.prefix_bits.min(self.plan.width_of(i))
    }

    /// The low bits of segment `i`.
    pub fn low_bits_of(&self, i: u32) -> u32 {
        self.plan.width_of(i) - self.prefix_bits_of(i)
    }

    /// The bytes of an entry's low bits in segment `i`: 1 up to 8 bits, else 2.
    pub fn low_bytes_of(&self, i: u32) -> usize {
        if self.low_bits_of(i) <= 8 {
            1
        } else {
            2
        }
    }

    /// The directory's length for segment `i`: one position per prefix, and the end.
    pub fn directory_len(&self, i: u32) -> usize {
        (1usize << self.prefix_bits_of(i)) + 1
    }

    /// A value of segment `i` as (prefix, low bits).
    pub fn split(&self, i: u32, value: u32) -> (u32, u16) {
        let low = self.low_bits_of(i);
        ((value as u64 >> low) as u32, (value & ((1u64 << low) - 1) as u32) as u16)
    }

    /// The plan of the indexed segments alone (what the radii are chosen over).
    pub fn indexed_plan(&self) -> SegmentPlan {
        let last_width = if self.indexed == self.plan.count { self.plan.last_width } else { self.plan.width };
        SegmentPlan {
            code_bits: self.plan.width * (self.indexed - 1) + last_width,
            count: self.indexed,
            last_width,
            ..self.plan
        }
    }

    /// The radii of the indexed segments for a lookup within `k` bits among `rows` rows (`None`:
    /// no probing is complete, read every code): [`multi_index::lookup_radii`] at [`COSTS`].
    pub fn radii(&self, k: u32, rows: u64) -> Option<Vec<Option<u32>>> {
        multi_index::lookup_radii(&self.indexed_plan(), k, rows, COSTS)
    }

    /// The expected work of probing with `radii` for a lookup within `k` among `rows` rows.
    pub fn work(&self, radii: &[Option<u32>], k: u32, rows: u64) -> Work {
        multi_index::expected_work_within(&self.indexed_plan(), radii, k, rows)
    }
}

/// The costs of a lookup's work in units of a random page access of the index, for choosing its
/// radii: a probe one, a candidate met in a run (an ordinal on a page at hand) a tenth, a code read
/// from the store one.
pub const COSTS: LookupCosts = LookupCosts { probe: 1.0, candidate: 0.1, check: 1.0 };

/// The units of `work` weighed against a read of the code store: its probes and its candidates
/// met (the codes read are among them). Probes and candidates cost about the same here, which
/// keeps a lookup that meets many rows, or the rounds of a nearest-rows search, from running long
/// before the code store is read in order instead.
pub fn units(work: Work) -> f64 {
    work.probes + work.candidates
}

/// Whether probing with `work` is expected to cost less than reading all `rows` codes in order
/// (a code read in order costs about a tenth of a probe or a candidate, [`units`]).
pub fn probing_pays(work: Work, rows: u64) -> bool {
    units(work) < rows as f64 / 10.0 + 16.0
}

/// The directory of a segment from its entries' prefixes in ascending order: where each of the
/// `len - 1` prefixes starts, then the count.
pub fn directory(prefixes: impl Iterator<Item = u32>, len: usize) -> Result<Vec<u32>, TryReserveError> {
    let mut starts = Vec::new();
    starts.try_reserve_exact(len)?;
    starts.resize(len, 0u32);
    let mut count = 0u32;
    for prefix in prefixes {
        starts[prefix as usize + 1] += 1;
        count += 1;
    }
    for p in 1..len {
        starts[p] += starts[p - 1];
    }
    debug_assert_eq!(starts[len - 1], count);
    Ok(starts)
}

/// The directory of a segment from how many entries have each prefix (`counts[p]`, for each of
/// the `counts.len()` prefixes): where each prefix starts, then the count (what [`directory`] gives
/// for those prefixes).
pub fn directory_of_counts(counts: &[u32]) -> Vec<u32> {
    let mut starts = Vec::with_capacity(counts.len() + 1);
    let mut at = 0u32;
    starts.push(at);
    for &count in counts {
        at += count;
        starts.push(at);
    }
    starts
}

/// The entries of segment `i` of `codes` (in ordinal order) sorted by (value, ordinal), as
/// (value, ordinal); `Err` when memory runs out.
pub fn segment_entries<'a>(
    layout: &Layout,
    i: u32,
    codes: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Result<Vec<(u32, u32)>, TryReserveError> {
    let mut entries: Vec<(u32, u32)> = Vec::new();
    entries.try_reserve_exact(codes.len())?;
    entries.extend(codes.enumerate().map(|(ordinal, code)| (layout.plan.segment(code, i), ordinal as u32)));
    entries.sort_unstable();
    Ok(entries)
}

/// The entries with low bits `low` among `start..end`, a run sorted by low bits: their range, by
/// binary search with `low_at(position)`.
pub fn probe_run(start: u32, end: u32, low: u16, mut low_at: impl FnMut(u32) -> u16) -> std::ops::Range<u32> {
    let (mut lo, mut hi) = (start, end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if low_at(mid) < low {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let first = lo;
    hi = end;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if low_at(mid) <= low {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    first..lo
}

/// The segment accesses [`candidates`] needs: the directory position of a prefix, the low bits
/// and ordinal of an entry (of indexed segment `i`).
pub trait Segments {
    fn directory(&mut self, i: u32, prefix: u32) -> u32;
    fn low(&mut self, i: u32, position: u32) -> u16;
    fn ordinal(&mut self, i: u32, position: u32) -> u32;

    /// Appends `ordinal << 32 | tag` for the entries at `positions` of segment `i` to `out` (a
    /// reader of pages overrides it to read each page once).
    fn ordinals(&mut self, i: u32, positions: std::ops::Range<u32>, tag: u64, out: &mut Vec<u64>) {
        out.extend(positions.map(|p| u64::from(self.ordinal(i, p)) << 32 | tag));
    }
}

/// The ordinals of the rows met by probing the indexed segments of `query` with `radii` (complete
/// for a lookup within `k` bits: at least `k + 1` units) whose slacks add up to the threshold
/// ([`multi_index::slack_threshold`]), sorted and each once, or `None` once more than `limit`
/// were met (counting repeats) or memory for the meetings is refused (every caller then compares
/// the rows whole: exact, and no memory). Every row within `k` is among them.
pub fn candidates(
    layout: &Layout,
    radii: &[Option<u32>],
    k: u32,
    query: &[u8],
    segments: &mut dyn Segments,
    limit: usize,
    interrupt: crate::Interrupt,
) -> Option<Vec<u32>> {
    let threshold = multi_index::slack_threshold(radii, k);
    // (ordinal << 32 | the slack of the meeting, at most `u32::MAX`)
    let mut met: Vec<u64> = Vec::new();
    let mut probed = 0usize;
    let mut values = Vec::new();
    for (i, radius) in radii.iter().enumerate() {
        let Some(radius) = *radius else { continue };
        let i = i as u32;
        let value = layout.plan.segment(query, i);
        // In ascending order: the directory and the entries are then read in order, each page
        // once for the probes on it.
        values.clear();
        values.extend(multi_index::probes(value, layout.plan.width_of(i), radius));
        values.sort_unstable();
        for &probe in &values {
            probed += 1;
            if probed.is_multiple_of(1024) {
                interrupt.check();
            }
            let (prefix, low) = layout.split(i, probe);
            let (start, end) = (segments.directory(i, prefix), segments.directory(i, prefix + 1));
            let range = probe_run(start, end, low, |p| segments.low(i, p));
            // (room made first: a reader's `ordinals` then appends without growing)
            if met.len() + range.len() > limit || met.try_reserve(range.len()).is_err() {
                return None;
            }
            // (a probe is within the radius: the slack is at least 1)
            let slack = (u64::from(radius) + 1 - u64::from((probe ^ value).count_ones())).min(u64::from(u32::MAX));
            segments.ordinals(i, range, slack, &mut met);
        }
    }
    sort_by_ordinal(&mut met);
    let mut found = Vec::new();
    let mut at = 0;
    while at < met.len() {
        let ordinal = met[at] >> 32;
        let mut slack = 0u64;
        while at < met.len() && met[at] >> 32 == ordinal {
            slack += met[at] & u64::from(u32::MAX);
            at += 1;
        }
        if slack >= threshold {
            found.try_reserve(1).ok()?;
            found.push(ordinal as u32);
        }
    }
    Some(found)
}

/// Sorts meetings `ordinal << 32 | slack` by ordinal (the meetings of one ordinal then adjacent,
/// in no particular order): a radix sort on the ordinal's bits, 11 at a time (two passes for up to
/// 4M rows), through a second buffer of the same size; an ordinary sort when there are few of them
/// or no memory for the buffer. (A lookup meets thousands to millions of rows; a comparison sort
/// of them was most of its time.)
pub fn sort_by_ordinal(met: &mut Vec<u64>) {
    const DIGIT: u32 = 11;
    if met.len() < 1024 {
        met.sort_unstable();
        return;
    }
    let mut other: Vec<u64> = Vec::new();
    if other.try_reserve_exact(met.len()).is_err() {
        met.sort_unstable();
        return;
    }
    other.resize(met.len(), 0);
    let largest = met.iter().map(|m| m >> 32).max().unwrap_or(0);
    let bits = 64 - largest.leading_zeros();
    let mut shift = 32;
    while shift < 32 + bits {
        let mut starts = [0usize; 1 << DIGIT];
        let digit = |m: u64| ((m >> shift) & ((1 << DIGIT) - 1)) as usize;
        for &m in met.iter() {
            starts[digit(m)] += 1;
        }
        let mut at = 0;
        for start in starts.iter_mut() {
            (*start, at) = (at, at + *start);
        }
        for &m in met.iter() {
            let d = digit(m);
            other[starts[d]] = m;
            starts[d] += 1;
        }
        std::mem::swap(met, &mut other);
        shift += DIGIT;
    }
}

/// The `capacity` smallest keys offered that are above a cursor, for nearest rows in passes of
/// bounded memory: a pass offers every row's (distance, TID order) key; the keys kept are the
/// next ones in order after the cursor.
pub struct Smallest {
    heap: BinaryHeap<(u32, u64)>,
    capacity: usize,
    after: Option<(u32, u64)>,
}

impl Smallest {
    /// Keeps up to `capacity` (at least 1) keys above `after` (`None`: all).
    pub fn new(capacity: usize, after: Option<(u32, u64)>) -> Smallest {
        Smallest { heap: BinaryHeap::new(), capacity: capacity.max(1), after }
    }

    /// Offers a key.
    pub fn offer(&mut self, key: (u32, u64)) {
        if self.after.is_some_and(|after| key <= after) {
            return;
        }
        if self.heap.len() < self.capacity {
            self.heap.push(key);
        } else if self.heap.peek().is_some_and(|&top| key < top) {
            self.heap.pop();
            self.heap.push(key);
        }
    }

    /// The largest key that could still be kept (`None`: any), to skip work on rows beyond it.
    pub fn bound(&self) -> Option<(u32, u64)> {
        (self.heap.len() == self.capacity).then(|| *self.heap.peek().expect("full"))
    }

    /// The keys kept, ascending, and whether they are all the keys above the cursor (the pass
    /// held fewer than its capacity).
    pub fn finish(self) -> (Vec<(u32, u64)>, bool) {
        let all = self.heap.len() < self.capacity;
        (self.heap.into_sorted_vec(), all)
    }
}

#[cfg(test)]
mod tests;
