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

use std::cell::RefCell;
use std::collections::{BinaryHeap, HashMap, TryReserveError};
use std::rc::Rc;

use crate::multi_index::{self, LookupCosts, PlanError, SegmentPlan, Work};

/// The segments an index files its rows under unless told otherwise: every segment of the plan
/// (Norouzi et al.'s `m = n / log2(rows)` segments of a code of `n` bits). An index told to file
/// fewer only compares the rest of a long code.
pub const DEFAULT_INDEXED_SEGMENTS: u32 = MAX_INDEXED_SEGMENTS;

/// The most segments a plan has (4,096 bits in segments of 16), so the most an index can file its
/// rows under.
pub const MAX_INDEXED_SEGMENTS: u32 = multi_index::MAX_CODE_BITS / 16;

/// The most bits of a segment value below its prefix (an entry keeps them as a `u16`).
pub const MAX_LOW_BITS: u32 = 16;

/// How an index of codes is cut: the segment plan, the segments indexed, the prefix bits of the
/// directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

    /// [`Layout::radii`] for a lookup within `k` among `rows` rows and their [`Layout::work`],
    /// remembered by this thread for the next lookups of the same layout, `k` and rows (the
    /// rounds of a nearest-rows search and the planner ask for the same few again and again;
    /// working them out takes microseconds, a good part of a short search).
    pub fn lookup(&self, k: u32, rows: u64) -> Option<Rc<Lookup>> {
        thread_local! {
            static LOOKUPS: RefCell<Lookups> = RefCell::new(HashMap::new());
        }
        LOOKUPS.with(|lookups| {
            let key = (*self, k, rows);
            if let Some(found) = lookups.borrow().get(&key) {
                return found.clone();
            }
            let found = self.radii(k, rows).map(|radii| Rc::new(Lookup { work: self.work(&radii, k, rows), radii }));
            let mut lookups = lookups.borrow_mut();
            if lookups.len() >= REMEMBERED_LOOKUPS {
                lookups.clear();
            }
            lookups.insert(key, found.clone());
            found
        })
    }
}

/// The lookups a thread remembers ([`Layout::lookup`]): by layout, `k` and rows.
type Lookups = HashMap<(Layout, u32, u64), Option<Rc<Lookup>>>;

/// How many lookups a thread remembers ([`Layout::lookup`]), each a few kilobytes at most.
const REMEMBERED_LOOKUPS: usize = 1024;

/// The radii of a lookup and their expected work ([`Layout::lookup`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Lookup {
    pub radii: Vec<Option<u32>>,
    pub work: Work,
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
/// for those prefixes); `Err` when memory runs out.
pub fn directory_of_counts(counts: &[u32]) -> Result<Vec<u32>, TryReserveError> {
    let mut starts = Vec::new();
    starts.try_reserve_exact(counts.len() + 1)?;
    let mut at = 0u32;
    starts.push(at);
    for &count in counts {
        at += count;
        starts.push(at);
    }
    Ok(starts)
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

    /// Appends `ordinal << 32 | tag` for the entries at `positions` of segment `i` to `out`, but
    /// for the ordinals marked in `read` ([`is_marked`]; a reader of pages overrides it to read
    /// each page once).
    fn ordinals(&mut self, i: u32, positions: std::ops::Range<u32>, tag: u64, read: &[u64], out: &mut Vec<u64>) {
        for p in positions {
            let ordinal = self.ordinal(i, p);
            if !is_marked(read, ordinal) {
                out.push(u64::from(ordinal) << 32 | tag);
            }
        }
    }
}

/// Whether `ordinal` is marked in `read`, a bit for each ordinal below `64 * read.len()`.
#[inline]
pub fn is_marked(read: &[u64], ordinal: u32) -> bool {
    read.get(ordinal as usize / 64).is_some_and(|word| word >> (ordinal % 64) & 1 == 1)
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
    let mut meetings = Meetings::default();
    meetings.probe(layout, radii, query, segments, limit, interrupt)?;
    meetings.unread_within(k)
}

/// The rows met by probing a query's segments, kept from one radius to the next: the rounds of a
/// nearest-rows search probe the segments at growing radii, and most rounds probe the segments of
/// the previous one again at the same radii and some more (at 1,024 bits, rounds within 0, 1, 2,
/// 3, 4, 6, 9, 13, 19, 28 and 42 bits probe 1, 3, 4, 5, 6, 8, 11, 15, 21, 30 and 44 segments at
/// radius 0: 148 probes where the last round alone has 44). Such a round probes only the segments
/// new to it ([`Meetings::probe`]), and the rows read in an earlier round are not handed out
/// for reading again ([`Meetings::unread_within`]).
///
/// A row met in probed segment `i` (of radius `r_i`) at distance `d_i` there has *slack*
/// `r_i + 1 - d_i`; a row not met there differs in at least `r_i + 1` bits of it. So a row whose
/// slacks add up to `s` is at least `units - s` bits away (`units` the sum of `r_i + 1`,
/// [`multi_index::units`]) and a row never met at least `units`: a lookup within `k < units` reads
/// the rows met with `s >= units - k` ([`multi_index::slack_threshold`]).
#[derive(Default)]
pub struct Meetings {
    /// The radius each indexed segment was probed with (`None`: not probed).
    radii: Vec<Option<u32>>,
    /// `ordinal << 32 | read << 31 | slack` (the sum of a row's slacks), sorted by ordinal, each
    /// ordinal once.
    met: Vec<u64>,
    /// A bit for each ordinal below `64 * READ_WORDS` marked read (grown as rows are): their
    /// meetings in the segments probed later are dropped before they are summed, as nothing
    /// hands them out again (the rounds of a cluster meet its rows read in every segment).
    read: Vec<u64>,
}

const READ: u64 = 1 << 31;
const SLACK: u64 = READ - 1;

/// The most words of [`Meetings`]'s bits of rows read (256 KB: the first two million rows of the
/// code store; a row beyond them is summed as any other).
const READ_WORDS: usize = 1 << 15;

impl Meetings {
    /// Probes the indexed segments of `query` with `radii`: only the segments not probed yet when
    /// every segment probed so far has the same radius in `radii` or none (the rows met so far
    /// kept, with whether they were read), else every segment of `radii` afresh. `None` (and
    /// nothing kept) once more than `limit` rows were met, counting repeats and the rows met
    /// before, or when memory for them is refused; else whether the rows met before were kept.
    pub fn probe(
        &mut self,
        layout: &Layout,
        radii: &[Option<u32>],
        query: &[u8],
        segments: &mut dyn Segments,
        limit: usize,
        interrupt: crate::Interrupt,
    ) -> Option<bool> {
        let extends = self.extended_by(radii);
        if !extends {
            self.radii = vec![None; radii.len()];
            self.met = Vec::new();
            self.read = Vec::new();
        }
        // (ordinal << 32 | the slack of the meeting, at most `SLACK`)
        let mut new: Vec<u64> = Vec::new();
        let mut probed = 0usize;
        let mut values = Vec::new();
        for (i, radius) in radii.iter().enumerate() {
            let Some(radius) = *radius else { continue };
            if self.radii[i].is_some() {
                continue;
            }
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
                if self.met.len() + new.len() + range.len() > limit || new.try_reserve(range.len()).is_err() {
                    *self = Meetings::default();
                    return None;
                }
                // (a probe is within the radius: the slack is at least 1)
                let slack = (u64::from(radius) + 1 - u64::from((probe ^ value).count_ones())).min(SLACK);
                segments.ordinals(i, range, slack, &self.read, &mut new);
            }
        }
        for (old, new) in self.radii.iter_mut().zip(radii) {
            *old = old.or(*new);
        }
        sum_by_ordinal(&mut new, interrupt);
        if self.merge(new).is_none() {
            *self = Meetings::default();
            return None;
        }
        Some(extends)
    }

    /// Whether probing with `radii` keeps the rows met so far: every segment probed so far has the
    /// same radius in `radii` or none there (it stays probed: more units only tighten the bounds).
    pub fn extended_by(&self, radii: &[Option<u32>]) -> bool {
        self.radii.len() == radii.len()
            && self.radii.iter().zip(radii).all(|(old, new)| old.is_none() || new.is_none() || old == new)
    }

    /// Merges `new` (sorted, each ordinal once, none read) into `met` (`None`: no memory for it).
    fn merge(&mut self, new: Vec<u64>) -> Option<()> {
        if self.met.is_empty() {
            self.met = new;
            return Some(());
        }
        // From the back, into `met` grown by the length of `new`; then the repeats summed.
        let (mut a, mut b) = (self.met.len(), new.len());
        self.met.try_reserve_exact(b).ok()?;
        self.met.resize(a + b, 0);
        let mut to = a + b;
        while b > 0 {
            to -= 1;
            if a > 0 && self.met[a - 1] >> 32 > new[b - 1] >> 32 {
                a -= 1;
                self.met[to] = self.met[a];
            } else {
                b -= 1;
                self.met[to] = new[b];
            }
        }
        sum_slacks(&mut self.met);
        Some(())
    }

    /// The units of the radii probed: no row is nearer than `units - slack`, and a row not met is
    /// at least `units` away.
    pub fn units(&self) -> u64 {
        multi_index::units(&self.radii)
    }

    /// The ordinals of the rows met whose slacks add up to the threshold of a lookup within `k`
    /// (every row within `k` is among them, or was handed out by an earlier call) and that no
    /// earlier call handed out, ascending; they are marked read. `None` when memory for them is
    /// refused (then none is marked).
    pub fn unread_within(&mut self, k: u32) -> Option<Vec<u32>> {
        let threshold = multi_index::slack_threshold(&self.radii, k);
        let unread = |m: u64| m & READ == 0 && m & SLACK >= threshold;
        let mut found = Vec::new();
        found.try_reserve_exact(self.met.iter().filter(|&&m| unread(m)).count()).ok()?;
        for m in &mut self.met {
            if unread(*m) {
                *m |= READ;
                found.push((*m >> 32) as u32);
            }
        }
        // (the bits grown to the last row found within the bound, or not at all when memory for
        // them is refused: then those rows' meetings are summed as before)
        let words = found.iter().rev().map(|&o| o as usize / 64 + 1).find(|&w| w <= READ_WORDS).unwrap_or(0);
        if words > self.read.len() && self.read.try_reserve_exact(words - self.read.len()).is_ok() {
            self.read.resize(words, 0);
        }
        for &o in &found {
            if let Some(word) = self.read.get_mut(o as usize / 64) {
                *word |= 1 << (o % 64);
            }
        }
        Some(found)
    }
}

/// Sums the slacks of the meetings of each ordinal into one (sorted by ordinal; whether one of
/// them was read is kept).
fn sum_slacks(met: &mut Vec<u64>) {
    let mut to = 0;
    let mut at = 0;
    while at < met.len() {
        let ordinal = met[at] >> 32;
        let (mut slack, mut read) = (0u64, 0u64);
        while at < met.len() && met[at] >> 32 == ordinal {
            slack += met[at] & SLACK;
            read |= met[at] & READ;
            at += 1;
        }
        met[to] = ordinal << 32 | read | slack.min(SLACK);
        to += 1;
    }
    met.truncate(to);
}

/// Sorts meetings `ordinal << 32 | slack` (none read) by ordinal and sums the slacks of each
/// ordinal into one ([`sum_slacks`]). Unless they are in order already: by hashing when many
/// meetings are of the same rows (the rows of a cluster of similar codes, met in most segments),
/// else by [`sort_by_ordinal`].
pub fn sum_by_ordinal(met: &mut Vec<u64>, interrupt: crate::Interrupt) {
    if met.is_sorted_by_key(|m| m >> 32) {
        // (one probe's run, as a round that probes one more segment at radius 0 meets)
    } else if met.len() < 64 || sum_by_hashing(met, interrupt).is_none() {
        sort_by_ordinal(met, interrupt);
    }
    sum_slacks(met);
}

/// [`sum_by_ordinal`] by summing the slacks of each ordinal in a hash table, then sorting the
/// ordinals met, when they are at most a quarter of the meetings; `None` (and `met` as it was)
/// else, or when memory for the table is refused.
fn sum_by_hashing(met: &mut Vec<u64>, interrupt: crate::Interrupt) -> Option<()> {
    const EMPTY: u64 = u64::MAX;
    let most = met.len() / 4;
    // (at most half full)
    let slots = (most * 2).next_power_of_two().max(2);
    let mut table: Vec<u64> = Vec::new();
    table.try_reserve_exact(slots).ok()?;
    table.resize(slots, EMPTY);
    let shift = 64 - slots.trailing_zeros();
    let mut distinct = 0;
    for (n, &m) in met.iter().enumerate() {
        if n % crate::interrupt::STEP == 0 {
            interrupt.check();
        }
        debug_assert!(m & READ == 0);
        let ordinal = m >> 32;
        let mut at = (ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
        loop {
            let slot = &mut table[at];
            if *slot == EMPTY {
                if distinct == most {
                    return None;
                }
                distinct += 1;
                *slot = m;
                break;
            }
            if *slot >> 32 == ordinal {
                *slot = ordinal << 32 | ((*slot & SLACK) + (m & SLACK)).min(SLACK);
                break;
            }
            at = (at + 1) & (slots - 1);
        }
    }
    met.clear();
    met.extend(table.iter().filter(|&&slot| slot != EMPTY));
    sort_by_ordinal(met, interrupt);
    Some(())
}

/// Sorts meetings `ordinal << 32 | slack` by ordinal (the meetings of one ordinal then adjacent,
/// in no particular order): a radix sort on the ordinal's bits, 11 at a time (two passes for up to
/// 4M rows), through a second buffer of the same size, checking `interrupt` every
/// [`crate::interrupt::STEP`] meetings; an ordinary sort when there are few of them or no memory
/// for the buffer. (A lookup meets thousands to millions of rows; a comparison sort
/// of them was most of its time.)
pub fn sort_by_ordinal(met: &mut Vec<u64>, interrupt: crate::Interrupt) {
    const DIGIT: u32 = 11;
    if met.len() < 1024 {
        met.sort_unstable();
        return;
    }
    let mut other: Vec<u64> = Vec::new();
    if other.try_reserve_exact(met.len()).is_err() {
        crate::interrupt::sort_in_pieces(met, &|a, b| a.cmp(b), 1 << 20, interrupt);
        return;
    }
    other.resize(met.len(), 0);
    let largest = met.iter().map(|m| m >> 32).max().unwrap_or(0);
    let bits = 64 - largest.leading_zeros();
    let mut shift = 32;
    while shift < 32 + bits {
        let mut starts = [0usize; 1 << DIGIT];
        let digit = |m: u64| ((m >> shift) & ((1 << DIGIT) - 1)) as usize;
        for range in crate::interrupt::ranges(met.len(), interrupt) {
            for &m in &met[range] {
                starts[digit(m)] += 1;
            }
        }
        let mut at = 0;
        for start in starts.iter_mut() {
            (*start, at) = (at, at + *start);
        }
        for range in crate::interrupt::ranges(met.len(), interrupt) {
            for &m in &met[range] {
                let d = digit(m);
                other[starts[d]] = m;
                starts[d] += 1;
            }
        }
        std::mem::swap(met, &mut other);
        shift += DIGIT;
    }
}

/// The `capacity` smallest keys offered that are above a cursor, for nearest rows in passes of
/// bounded memory: a pass offers every row's (distance, TID order) key; the keys kept are the
/// next ones in order after the cursor. When memory for one more key is refused, the keys held
/// are the pass's capacity from then on (a smaller batch, and one more pass).
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

    /// Offers a key; an error only when memory for the first key kept is refused.
    pub fn offer(&mut self, key: (u32, u64)) -> Result<(), TryReserveError> {
        if self.after.is_some_and(|after| key <= after) {
            return Ok(());
        }
        if self.heap.len() < self.capacity {
            if self.heap.len() == self.heap.capacity() {
                if let Err(refused) = self.heap.try_reserve(1) {
                    if self.heap.is_empty() {
                        return Err(refused);
                    }
                    // (the keys held are all this pass keeps: the key is offered to them as full)
                    self.capacity = self.heap.len();
                    return self.offer(key);
                }
            }
            self.heap.push(key);
        } else if self.heap.peek().is_some_and(|&top| key < top) {
            // (in place: a pop leaves room for the push)
            self.heap.pop();
            self.heap.push(key);
        }
        Ok(())
    }

    /// The largest key that could still be kept (`None`: any), to skip work on rows beyond it.
    pub fn bound(&self) -> Option<(u32, u64)> {
        (self.heap.len() == self.capacity).then(|| *self.heap.peek().expect("full"))
    }

    /// The keys kept, ascending, and whether they are all the keys above the cursor (the pass
    /// held fewer than its capacity). Sorted in pieces with checks of `interrupt` between them
    /// (a pass may keep tens of millions of keys under a large `work_mem`).
    pub fn finish(self, interrupt: crate::Interrupt) -> (Vec<(u32, u64)>, bool) {
        let all = self.heap.len() < self.capacity;
        let mut keys = self.heap.into_vec();
        crate::interrupt::sort_in_pieces(&mut keys, &|a, b| a.cmp(b), 1 << 20, interrupt);
        (keys, all)
    }
}

#[cfg(test)]
pub(crate) mod tests;
