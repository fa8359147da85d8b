//! The layout of the `simhash` index access method, without pages (the PostgreSQL side is
//! `src/index/`): of every row up to page format 4, and since format 5 of the rows inserted after
//! the build (the rows of the build are in a dense part of their own, [`crate::dense`]).
//!
//! Every fingerprint is filed four times, once per 16-bit segment, in the bucket of that segment's
//! top `bits` bits. `bits` is chosen when the index is built so that a bucket averages at most a
//! page ([`bucket_bits`]), and is at least [`MIN_BUCKET_BITS`], so that an index built on an empty
//! or small table (before a load) still spreads what it is given; it stays fixed as the table grows
//! (like the lists of an IVF index), so a table that grows far beyond its size at build time is
//! worth a REINDEX.
//!
//! A radius lookup `d(fp, q) <= k` with `k` up to [`MAX_PROBED_RADIUS`] reads, in each segment `n`,
//! the buckets of the values within `r_n` bits of the query's segment, where the radii `r_n` add up
//! to `k - 3` (the pigeonhole of [`crate::probes::segment_radii`]: a fingerprint within `k` has some
//! segment within its radius), checks the distance of every entry there, and reports a match only
//! in the first segment whose value is within that segment's radius of the query's
//! ([`reported_in`]), so that each row comes out once. A larger radius reads every bucket of
//! segment 0 (each row once).
//!
//! A bucket holds the entries of many segment values (2^(16 - bits) of them), most of which a probe
//! does not ask for. So the entries of a page are kept sorted by their segment value where
//! possible (a page as built, or once full), and a probe checks only the runs of the values it asks
//! for there ([`for_each_probed`]), and every entry of the page's unsorted rest. Many lookups at
//! once (the near-duplicate constraint's recheck) read a page once for all of them: each entry
//! whose value one of them asks for is checked against those that ask ([`Askers`],
//! [`for_each_asked`]).

use crate::distance::{SEGMENTS, SEGMENT_BITS};
use crate::probes::{segment_probes, segment_radii};

pub use crate::probes::MAX_PROBED_RADIUS;

/// The most bucket bits: one bucket per 16-bit segment value.
pub const MAX_BUCKET_BITS: u32 = SEGMENT_BITS;

/// The fewest bucket bits: 256 buckets per segment. An index built on an empty table then holds
/// about 150,000 rows before its buckets grow chains of pages, and a lookup at k = 11 among ten
/// million rows inserted later reads a few thousand pages, not all of them. The index of a small
/// table takes a page per bucket it fills: 1,024 pages (8 MB) at most.
pub const MIN_BUCKET_BITS: u32 = 8;

/// The bucket bits for `rows` rows with `per_page` entries to a page: the fewest with which a
/// bucket averages at most one page ([`MIN_BUCKET_BITS`] to [`MAX_BUCKET_BITS`]).
pub fn bucket_bits(rows: u64, per_page: u64) -> u32 {
    let pages = rows.div_ceil(per_page.max(1));
    (MIN_BUCKET_BITS..MAX_BUCKET_BITS).find(|&bits| pages <= 1u64 << bits).unwrap_or(MAX_BUCKET_BITS)
}

/// Segment `n` (0..4, most significant first) of `fp`.
pub fn segment_value(fp: u64, n: u32) -> u16 {
    (fp >> ((SEGMENTS - 1 - n % SEGMENTS) * SEGMENT_BITS)) as u16
}

/// The bucket of fingerprint `fp` in segment `n` (0..4): the segment's top `bits` bits.
pub fn bucket_of(fp: u64, n: u32, bits: u32) -> u32 {
    u32::from(segment_value(fp, n)) >> (SEGMENT_BITS - bits)
}

/// The probes of segment `n` for a lookup of `query` within `k`, grouped by bucket: each bucket
/// read (ascending, distinct) with the segment values asked for in it (ascending); `None` when `k`
/// exceeds [`MAX_PROBED_RADIUS`].
pub fn probes_by_bucket(query: u64, n: u32, k: u32, bits: u32) -> Option<Vec<(u32, Vec<u16>)>> {
    let radius = segment_radii(k)?[(n % SEGMENTS) as usize];
    let mut probes: Vec<(u32, Vec<u16>)> = Vec::new();
    // The probes are ascending, so the values of a bucket are adjacent.
    for value in segment_probes(segment_value(query, n), radius) {
        let bucket = u32::from(value) >> (SEGMENT_BITS - bits);
        match probes.last_mut() {
            Some((last, values)) if *last == bucket => values.push(value),
            _ => probes.push((bucket, vec![value])),
        }
    }
    Some(probes)
}

/// Calls `each` with the entries of a page of a bucket of `bits` bits that a probe of `values`
/// (ascending) must check: among the first `sorted` entries, which are in ascending order of `key`
/// (their segment value), the runs whose value is one of `values`; then every entry after them.
///
/// Each run is found from where a uniform spread of the bucket's values would put it, galloping
/// from there: a page is thousands of bytes and mostly not in the CPU's caches, so a few reads near
/// the guess cost far less than a binary search's chain of dependent reads across the page. A run
/// is then read once, its end found as its entries are handed out.
pub fn for_each_probed<T>(
    entries: &[T],
    sorted: usize,
    values: &[u16],
    bits: u32,
    key: impl Fn(&T) -> u16,
    mut each: impl FnMut(&T),
) {
    let (sorted, rest) = entries.split_at(sorted.min(entries.len()));
    for &value in values {
        let guess = run_guess(value, sorted.len(), bits);
        let start = lower_bound_from(sorted, value, guess, &key);
        for entry in &sorted[start..] {
            if key(entry) != value {
                break;
            }
            each(entry);
        }
    }
    rest.iter().for_each(each);
}

/// Calls `each` with the entries of a page of a bucket of `bits` bits, in segment `n`, that a probe
/// of `values` (ascending) reads ([`for_each_probed`]) and that are within `k` of `query` (`fp`
/// gives an entry's fingerprint): the tight loop of a lookup, which checks tens of thousands of
/// entries at k = 11 among ten million rows.
///
/// It checks the run's end and the distance in one pass over each run, and is compiled a second
/// time with the POPCNT instruction, taken when the CPU has it (one test per page, not per entry;
/// see [`crate::distance::popcount`]). Against handing each entry to a callback that did both, a
/// lookup at k = 11 among ten million rows took 0.49 instead of 0.59 ms (0.23 instead of 0.32 ms
/// with the pages in the CPU's caches).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn for_each_near<T>(
    entries: &[T],
    sorted: usize,
    values: &[u16],
    bits: u32,
    n: u32,
    query: u64,
    k: u32,
    fp: impl Fn(&T) -> u64,
    each: impl FnMut(&T),
) {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked above).
        unsafe { near_with_popcnt(entries, sorted, values, bits, n, query, k, fp, each) };
        return;
    }
    near(entries, sorted, values, bits, n, query, k, fp, each);
}

/// [`near`] compiled with POPCNT.
///
/// # Safety
///
/// The CPU has the POPCNT instruction.
#[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
#[target_feature(enable = "popcnt")]
#[allow(clippy::too_many_arguments)]
unsafe fn near_with_popcnt<T>(
    entries: &[T],
    sorted: usize,
    values: &[u16],
    bits: u32,
    n: u32,
    query: u64,
    k: u32,
    fp: impl Fn(&T) -> u64,
    each: impl FnMut(&T),
) {
    near(entries, sorted, values, bits, n, query, k, fp, each);
}

/// The body of [`for_each_near`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn near<T>(
    entries: &[T],
    sorted: usize,
    values: &[u16],
    bits: u32,
    n: u32,
    query: u64,
    k: u32,
    fp: impl Fn(&T) -> u64,
    mut each: impl FnMut(&T),
) {
    let (sorted, rest) = entries.split_at(sorted.min(entries.len()));
    let shift = (SEGMENTS - 1 - n % SEGMENTS) * SEGMENT_BITS;
    let key = |entry: &T| (fp(entry) >> shift) as u16;
    for &value in values {
        let start = lower_bound_from(sorted, value, run_guess(value, sorted.len(), bits), &key);
        for entry in &sorted[start..] {
            let f = fp(entry);
            if (f >> shift) as u16 != value {
                break;
            }
            if (f ^ query).count_ones() <= k {
                each(entry);
            }
        }
    }
    for entry in rest {
        if (fp(entry) ^ query).count_ones() <= k {
            each(entry);
        }
    }
}

/// Calls `each` with the entries within `k` of `query` (`fp` gives an entry's fingerprint): the
/// tight loop of an ordered scan's pages, compiled with POPCNT where the CPU has it (as
/// [`for_each_near`]).
#[inline]
pub fn for_each_within<T>(entries: &[T], query: u64, k: u32, fp: impl Fn(&T) -> u64, each: impl FnMut(&T)) {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked above).
        unsafe { within_with_popcnt(entries, query, k, fp, each) };
        return;
    }
    within(entries, query, k, fp, each);
}

/// [`within`] compiled with POPCNT.
///
/// # Safety
///
/// The CPU has the POPCNT instruction.
#[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
#[target_feature(enable = "popcnt")]
unsafe fn within_with_popcnt<T>(entries: &[T], query: u64, k: u32, fp: impl Fn(&T) -> u64, each: impl FnMut(&T)) {
    within(entries, query, k, fp, each);
}

/// The body of [`for_each_within`].
#[inline(always)]
fn within<T>(entries: &[T], query: u64, k: u32, fp: impl Fn(&T) -> u64, mut each: impl FnMut(&T)) {
    for entry in entries {
        if (fp(entry) ^ query).count_ones() <= k {
            each(entry);
        }
    }
}

/// Where the run of segment value `value` should start among `sorted` entries of a bucket of
/// `bits` bits if its values were spread evenly (the values of a bucket differ in their low
/// 16 - bits bits).
pub fn run_guess(value: u16, sorted: usize, bits: u32) -> usize {
    let low_bits = SEGMENT_BITS - bits.min(SEGMENT_BITS);
    let low = usize::from(value) & ((1usize << low_bits) - 1);
    (low * sorted) >> low_bits
}

/// The first position of `sorted` (ascending by `key`) whose key is at least `value`, searched
/// outward from `guess` with steps of 1, 2, 4, ... and then a binary search of the last step.
fn lower_bound_from<T>(sorted: &[T], value: u16, guess: usize, key: &impl Fn(&T) -> u16) -> usize {
    let n = sorted.len();
    let guess = guess.min(n);
    // Every position before `lo` is below `value`; `hi` is `n` or at least `value`.
    let (lo, hi);
    if guess < n && key(&sorted[guess]) < value {
        let (mut below, mut step) = (guess + 1, 1);
        loop {
            let probe = guess + step;
            if probe >= n {
                (lo, hi) = (below, n);
                break;
            }
            if key(&sorted[probe]) >= value {
                (lo, hi) = (below, probe);
                break;
            }
            below = probe + 1;
            step *= 2;
        }
    } else {
        let (mut at_least, mut step) = (guess, 1);
        loop {
            if step > guess {
                (lo, hi) = (0, at_least);
                break;
            }
            let probe = guess - step;
            if key(&sorted[probe]) < value {
                (lo, hi) = (probe + 1, at_least);
                break;
            }
            at_least = probe;
            step *= 2;
        }
    }
    lo + sorted[lo..hi].partition_point(|e| key(e) < value)
}

/// Many lookups at once, one segment at a time (the near-duplicate constraint's recheck of the
/// fingerprints a transaction wrote): which of the queries probe each 16-bit value of the segment,
/// as (value, query) pairs in ascending order, so that a page of a bucket is read once for all the
/// queries that ask for any of its values ([`for_each_asked`]).
#[derive(Default)]
pub struct Askers {
    /// `value << 32 | query position`, ascending.
    pairs: Vec<u64>,
}

/// Above this many probes, [`Askers::fill`] sorts them by counting (a pass over the 65,536
/// values), below it with a comparison sort.
const COUNTING_SORT_FROM: usize = 1 << 16;

impl Askers {
    /// Fills in the probes of segment `n` of a lookup of each of `queries` within `k` (those of
    /// [`probes_by_bucket`]); `None` when `k` exceeds [`MAX_PROBED_RADIUS`].
    pub fn fill(&mut self, queries: &[u64], n: u32, k: u32) -> Option<()> {
        let masks = segment_probes(0, segment_radii(k)?[(n % SEGMENTS) as usize]);
        let total = queries.len() * masks.len();
        let pair = |q: usize, value: u16| u64::from(value) << 32 | q as u64;
        self.pairs.clear();
        if total < COUNTING_SORT_FROM {
            for (q, &query) in queries.iter().enumerate() {
                let value = segment_value(query, n);
                self.pairs.extend(masks.iter().map(|&mask| pair(q, value ^ mask)));
            }
            self.pairs.sort_unstable();
            return Some(());
        }
        // Counting sort: `next[v]` is where the next probe of value `v` goes.
        let mut next = vec![0usize; 1 << SEGMENT_BITS];
        for &query in queries {
            let value = segment_value(query, n);
            for &mask in &masks {
                next[usize::from(value ^ mask)] += 1;
            }
        }
        let mut start = 0;
        for slot in next.iter_mut() {
            (*slot, start) = (start, start + *slot);
        }
        self.pairs.resize(total, 0);
        for (q, &query) in queries.iter().enumerate() {
            let value = segment_value(query, n);
            for &mask in &masks {
                let slot = &mut next[usize::from(value ^ mask)];
                self.pairs[*slot] = pair(q, value ^ mask);
                *slot += 1;
            }
        }
        Some(())
    }

    /// The probes of the values `from..to` (`to` up to 65,536), ascending.
    fn of_values(&self, from: u32, to: u32) -> &[u64] {
        let at = |value: u32| self.pairs.partition_point(|&p| p >> 32 < u64::from(value));
        &self.pairs[at(from)..at(to)]
    }

    /// The queries (positions, ascending) that probe segment value `value`.
    pub fn of(&self, value: u16) -> impl Iterator<Item = u32> + '_ {
        self.of_values(u32::from(value), u32::from(value) + 1).iter().map(|&p| p as u32)
    }

    /// The segment values that some query probes, ascending, and the probes of each (value,
    /// queries' positions).
    pub fn values(&self) -> impl Iterator<Item = (u16, impl Iterator<Item = u32> + '_)> + '_ {
        self.pairs.chunk_by(|a, b| a >> 32 == b >> 32).map(|run| ((run[0] >> 32) as u16, run.iter().map(|&p| p as u32)))
    }

    /// The buckets of `bits` bits that some query probes, ascending.
    pub fn buckets(&self, bits: u32) -> Vec<u32> {
        let shift = 32 + SEGMENT_BITS - bits.min(SEGMENT_BITS);
        let mut buckets: Vec<u32> = self.pairs.iter().map(|&p| (p >> shift) as u32).collect();
        buckets.dedup();
        buckets
    }
}

/// Calls `each(entry, q)` for every entry of a page of `bucket` (of `bits` bits) and every query
/// `q` of `askers` that probes the entry's segment value (`key`): among the first `sorted`
/// entries, which are in ascending order of `key`, the run of each asked value, found by galloping
/// forward from the previous run; then each entry of the unsorted rest, with the queries of its
/// value. Each entry is checked once, whatever the number of queries that ask for its value.
pub fn for_each_asked<T>(
    entries: &[T],
    sorted: usize,
    askers: &Askers,
    bucket: u32,
    bits: u32,
    key: impl Fn(&T) -> u16,
    mut each: impl FnMut(&T, u32),
) {
    let (sorted, rest) = entries.split_at(sorted.min(entries.len()));
    let width = 1u32 << (SEGMENT_BITS - bits.min(SEGMENT_BITS));
    let asked = askers.of_values(bucket.saturating_mul(width), bucket.saturating_add(1).saturating_mul(width));
    let mut at = 0;
    for group in asked.chunk_by(|a, b| a >> 32 == b >> 32) {
        if at == sorted.len() {
            break;
        }
        let value = (group[0] >> 32) as u16;
        at += lower_bound_from(&sorted[at..], value, 0, &key);
        while let Some(entry) = sorted.get(at).filter(|entry| key(entry) == value) {
            for &p in group {
                each(entry, p as u32);
            }
            at += 1;
        }
    }
    for entry in rest {
        let value = u64::from(key(entry));
        let from = asked.partition_point(|&p| p >> 32 < value);
        for &p in asked[from..].iter().take_while(|&&p| p >> 32 == value) {
            each(entry, p as u32);
        }
    }
}

/// Whether a match `fp` (within `k` of `query`, `k` at most [`MAX_PROBED_RADIUS`]) found while
/// reading segment `n`'s buckets is reported there: `n` is the first segment whose value is within
/// that segment's radius ([`segment_radii`]) of the query's. Every match has such a segment, and
/// its bucket is read there.
pub fn reported_in(fp: u64, query: u64, n: u32, k: u32) -> bool {
    let Some(radii) = segment_radii(k) else { return n == 0 };
    let close = |m: u32| {
        crate::distance::popcount(u64::from(segment_value(fp, m) ^ segment_value(query, m))) <= radii[m as usize]
    };
    n < SEGMENTS && close(n) && (0..n).all(|m| !close(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    /// A xorshift generator from `seed` (not 0), for the random tests.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// The buckets of segment `n` that a lookup of `query` within `k` reads, ascending and
    /// distinct, computed apart from [`probes_by_bucket`] (which the scan uses) as a reference;
    /// `None` when `k` exceeds [`MAX_PROBED_RADIUS`] (then every bucket of segment 0 is read).
    fn probe_buckets(query: u64, n: u32, k: u32, bits: u32) -> Option<Vec<u32>> {
        let radius = segment_radii(k)?[n as usize];
        let mut buckets: Vec<u32> = segment_probes(segment_value(query, n), radius)
            .into_iter()
            .map(|value| u32::from(value) >> (SEGMENT_BITS - bits))
            .collect();
        buckets.dedup(); // the probes are ascending, so equal buckets are adjacent
        Some(buckets)
    }

    #[test]
    fn bucket_bits_fill_about_a_page() {
        assert_eq!(bucket_bits(0, 500), MIN_BUCKET_BITS);
        assert_eq!(bucket_bits(500 << 8, 500), 8);
        assert_eq!(bucket_bits((500 << 8) + 1, 500), 9);
        assert_eq!(bucket_bits(1_000_000, 500), 11);
        assert_eq!(bucket_bits(u64::MAX, 500), MAX_BUCKET_BITS);
    }

    /// Every fingerprint within k of the query is reported exactly once, in a bucket the lookup
    /// reads, for every radius the probes answer and several bucket sizes.
    #[test]
    fn each_match_is_reported_once_in_a_read_bucket() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..300 {
            let query = next();
            for k in 0..=MAX_PROBED_RADIUS {
                for bits in [0, 5, 12, 16] {
                    // Candidates near the query: flip up to k random bits, plus some farther away.
                    for flips in [0, 1, k / 2, k, k + 1, 20] {
                        let mut fp = query;
                        for _ in 0..flips {
                            fp ^= 1 << (next() % 64);
                        }
                        if hamming(fp, query) > k {
                            continue; // (the scan checks the distance first)
                        }
                        let reported: Vec<u32> = (0..SEGMENTS)
                            .filter(|&n| {
                                let read = probe_buckets(query, n, k, bits).unwrap();
                                read.binary_search(&bucket_of(fp, n, bits)).is_ok() && reported_in(fp, query, n, k)
                            })
                            .collect();
                        assert_eq!(reported.len(), 1, "fp {fp:x} q {query:x} k {k} bits {bits}");
                    }
                }
            }
        }
    }

    #[test]
    fn probes_by_bucket_group_the_probe_values() {
        let query = 0x0123_4567_89AB_CDEF;
        for k in 0..=MAX_PROBED_RADIUS {
            for bits in [0, 5, 11, 16] {
                for n in 0..SEGMENTS {
                    let grouped = probes_by_bucket(query, n, k, bits).unwrap();
                    let buckets: Vec<u32> = grouped.iter().map(|(b, _)| *b).collect();
                    assert_eq!(buckets, probe_buckets(query, n, k, bits).unwrap());
                    let values: Vec<u16> = grouped.iter().flat_map(|(_, v)| v.iter().copied()).collect();
                    assert_eq!(values, segment_probes(segment_value(query, n), segment_radii(k).unwrap()[n as usize]));
                    for (bucket, values) in &grouped {
                        assert!(values.iter().all(|&v| u32::from(v) >> (SEGMENT_BITS - bits) == *bucket));
                        assert!(values.windows(2).all(|w| w[0] < w[1]));
                    }
                }
            }
        }
        assert!(probes_by_bucket(0, 0, MAX_PROBED_RADIUS + 1, 8).is_none());
    }

    /// The runs hold exactly the sorted entries whose value is asked for, then the unsorted rest.
    #[test]
    fn probed_entries_are_the_asked_values_and_the_rest() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
        for _ in 0..500 {
            let len = (next() % 40) as usize;
            // Values from a small range, so that runs of equal values occur.
            let mut entries: Vec<(u16, usize)> = (0..len).map(|i| ((next() % 24) as u16, i)).collect();
            let sorted = if len == 0 { 0 } else { (next() as usize) % (len + 1) };
            entries[..sorted].sort_by_key(|e| e.0);
            let mut values: Vec<u16> = (0..next() % 8).map(|_| (next() % 26) as u16).collect();
            values.sort_unstable();
            values.dedup();
            // Values 0..26 in buckets of 16 or 32 values, or a single bucket of every value.
            let bits = [0, 11, 12][(next() % 3) as usize];
            let mut found: Vec<(u16, usize)> = Vec::new();
            for_each_probed(&entries, sorted, &values, bits, |e| e.0, |e| found.push(*e));
            let expected: Vec<(u16, usize)> =
                entries[..sorted].iter().filter(|e| values.contains(&e.0)).chain(&entries[sorted..]).copied().collect();
            assert_eq!(found, expected, "entries {entries:?} sorted {sorted} values {values:?}");
        }
        // A sorted count beyond the entries (a corrupt page) reads them all as sorted.
        let entries = [(1u16, 0usize), (2, 1)];
        let mut count = 0;
        for_each_probed(&entries, 9, &[2], 16, |e| e.0, |_| count += 1);
        assert_eq!(count, 1);
    }

    /// The tight loops hand out exactly what the probe's runs, then a distance test, give.
    #[test]
    fn near_entries_are_the_probed_entries_within_k() {
        let mut next = xorshift(0x0DDB_1A5E_5BAD_5EEDu64);
        for round in 0..400 {
            let query = next();
            let n = (round % 4) as u32;
            let k = [0, 3, 7, 11, 20][round % 5];
            let bits = [0, 8, 11, 15, 16][(next() % 5) as usize];
            // Entries near the query (so that some are within k), in few segment values.
            let len = (next() % 60) as usize;
            let mut entries: Vec<(u64, usize)> =
                (0..len).map(|i| ((0..next() % 14).fold(query, |fp, _| fp ^ 1 << (next() % 64)), i)).collect();
            let sorted = if len == 0 { 0 } else { (next() as usize) % (len + 1) };
            entries[..sorted].sort_by_key(|e| segment_value(e.0, n));
            let probes = probes_by_bucket(query, n, k.min(MAX_PROBED_RADIUS), bits).unwrap();
            let values = &probes[(next() as usize) % probes.len()].1;
            let mut expected = Vec::new();
            for_each_probed(
                &entries,
                sorted,
                values,
                bits,
                |e| segment_value(e.0, n),
                |e| {
                    if hamming(e.0, query) <= k {
                        expected.push(*e);
                    }
                },
            );
            let mut found = Vec::new();
            for_each_near(&entries, sorted, values, bits, n, query, k, |e| e.0, |e| found.push(*e));
            assert_eq!(found, expected, "round {round}");
            // (And the body compiled without POPCNT, which CPUs without it run.)
            let mut plain = Vec::new();
            near(&entries, sorted, values, bits, n, query, k, |e| e.0, |e| plain.push(*e));
            assert_eq!(plain, expected, "round {round}");
            let mut within: Vec<(u64, usize)> = Vec::new();
            for_each_within(&entries, query, k, |e| e.0, |e| within.push(*e));
            let all: Vec<(u64, usize)> = entries.iter().filter(|e| hamming(e.0, query) <= k).copied().collect();
            assert_eq!(within, all, "round {round}");
        }
    }

    #[test]
    fn askers_are_the_queries_that_probe_each_value() {
        let queries: Vec<u64> = vec![0x0123_4567_89AB_CDEF, 0xFFFF_0000_1234_8000, 0x0123_4567_89AB_CDEE, 0];
        let mut askers = Askers::default();
        for k in [0, 3, 4, 7, 9, 11] {
            for n in 0..SEGMENTS {
                askers.fill(&queries, n, k).unwrap();
                let mut expected: Vec<Vec<u32>> = vec![Vec::new(); 1 << SEGMENT_BITS];
                for (q, &query) in queries.iter().enumerate() {
                    for (_, values) in probes_by_bucket(query, n, k, 16).unwrap() {
                        for value in values {
                            expected[usize::from(value)].push(q as u32);
                        }
                    }
                }
                for value in 0..=u16::MAX {
                    let of: Vec<u32> = askers.of(value).collect();
                    assert_eq!(of, expected[usize::from(value)], "k {k} n {n} value {value}");
                }
                for bits in [0, 8, 11, 16] {
                    let mut buckets: Vec<u32> = queries
                        .iter()
                        .flat_map(|&q| probes_by_bucket(q, n, k, bits).unwrap().into_iter().map(|(b, _)| b))
                        .collect();
                    buckets.sort_unstable();
                    buckets.dedup();
                    assert_eq!(askers.buckets(bits), buckets, "k {k} n {n} bits {bits}");
                }
            }
        }
        assert!(askers.fill(&queries, 0, MAX_PROBED_RADIUS + 1).is_none());
        assert!(Askers::default().of(7).next().is_none());
        assert!(Askers::default().buckets(11).is_empty());
    }

    #[test]
    fn askers_sort_many_probes_by_counting_like_few() {
        // 700 queries at k = 11 make 95,900 probes per segment (a counting sort), with duplicates
        // and values at both ends; each query alone is below the threshold (a comparison sort).
        let mut queries: Vec<u64> = (0..690u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        queries.extend([0, u64::MAX, u64::MAX, 0xFFFF_FFFF_0000_0000, queries[5], queries[5], 1, 2, 3, 4]);
        let (mut many, mut one) = (Askers::default(), Askers::default());
        for n in 0..SEGMENTS {
            many.fill(&queries, n, 11).unwrap();
            let mut expected: Vec<u64> = Vec::new();
            for (q, &query) in queries.iter().enumerate() {
                one.fill(&[query], n, 11).unwrap();
                expected.extend(one.pairs.iter().map(|&p| p | q as u64));
            }
            expected.sort_unstable();
            assert_eq!(many.pairs, expected, "segment {n}");
            // Refilled with fewer queries: nothing of the earlier fill is left.
            many.fill(&queries[..2], n, 3).unwrap();
            assert_eq!(many.pairs.len(), 2);
        }
    }

    #[test]
    fn asked_entries_are_each_entry_with_the_queries_of_its_value() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut askers = Askers::default();
        for round in 0..300 {
            // Queries and entries whose segment 3 falls in a few buckets of 11 bits (32 values
            // each), so that runs of equal values and shared probes occur.
            let near = |x: u64| (x & 0x3F) | ((x >> 8) & 1) << 10;
            let queries: Vec<u64> = (0..1 + next() % 6).map(|_| near(next())).collect();
            let k = [3, 7, 11][round % 3];
            askers.fill(&queries, 3, k).unwrap();
            let len = (next() % 60) as usize;
            let mut entries: Vec<(u16, usize)> = (0..len).map(|i| (near(next()) as u16, i)).collect();
            let sorted = if len == 0 { 0 } else { (next() as usize) % (len + 1) };
            entries[..sorted].sort_by_key(|e| e.0);
            let bits = [0, 11, 16][(next() % 3) as usize];
            for bucket in askers.buckets(bits) {
                let in_bucket: Vec<(u16, usize)> =
                    entries.iter().filter(|e| u32::from(e.0) >> (SEGMENT_BITS - bits) == bucket).copied().collect();
                let sorted = in_bucket.iter().take_while(|e| entries[..sorted].contains(e)).count();
                let mut found: Vec<((u16, usize), u32)> = Vec::new();
                for_each_asked(&in_bucket, sorted, &askers, bucket, bits, |e| e.0, |e, q| found.push((*e, q)));
                let mut expected: Vec<((u16, usize), u32)> = Vec::new();
                for e in &in_bucket {
                    for (q, &query) in queries.iter().enumerate() {
                        let radius = segment_radii(k).unwrap()[3];
                        if (e.0 ^ segment_value(query, 3)).count_ones() <= radius {
                            expected.push((*e, q as u32));
                        }
                    }
                }
                found.sort_unstable();
                expected.sort_unstable();
                assert_eq!(
                    found, expected,
                    "entries {in_bucket:?} sorted {sorted} queries {queries:x?} k {k} bits {bits}"
                );
            }
        }
    }

    #[test]
    fn asked_entries_are_those_each_query_finds_alone() {
        // The batched read (for_each_asked) against one read per query (for_each_probed with the
        // query's probed values, then the match test of the scan: the radius and reported_in).
        let mut next = xorshift(0x2545_F491_4F6C_DD1Du64);
        let (mut askers, mut matched) = (Askers::default(), 0);
        for round in 0..200 {
            // Fingerprints near a few centres (so that matches occur), some with segment values
            // at the top of the range.
            fn near(next: &mut impl FnMut() -> u64) -> u64 {
                let centre = [0u64, u64::MAX, 0x0123_4567_89AB_CDEF][(next() % 3) as usize];
                (0..(next() % 8)).fold(centre, |fp, _| fp ^ 1 << (next() % 64))
            }
            let mut queries: Vec<u64> = (0..1 + next() % 5).map(|_| near(&mut next)).collect();
            queries.push(queries[0]); // a duplicate
            let k = [0, 3, 5, 9, 11][round % 5];
            let bits = [8, 11, 16][(next() % 3) as usize];
            let len = (next() % 50) as usize;
            let fps: Vec<u64> = (0..len).map(|_| near(&mut next)).collect();
            for n in 0..SEGMENTS {
                askers.fill(&queries, n, k).unwrap();
                for bucket in askers.buckets(bits) {
                    let mut page: Vec<(u64, usize)> = fps
                        .iter()
                        .copied()
                        .enumerate()
                        .map(|(i, fp)| (fp, i))
                        .filter(|&(fp, _)| bucket_of(fp, n, bits) == bucket)
                        .collect();
                    let sorted = if page.is_empty() { 0 } else { (next() as usize) % (page.len() + 1) };
                    page[..sorted].sort_by_key(|e| segment_value(e.0, n));
                    let matches = |fp: u64, query: u64| hamming(fp, query) <= k && reported_in(fp, query, n, k);
                    let mut found = Vec::new();
                    for_each_asked(
                        &page,
                        sorted,
                        &askers,
                        bucket,
                        bits,
                        |e| segment_value(e.0, n),
                        |e, q| {
                            if matches(e.0, queries[q as usize]) {
                                found.push((q as usize, e.1));
                            }
                        },
                    );
                    let mut alone = Vec::new();
                    for (q, &query) in queries.iter().enumerate() {
                        let probes = probes_by_bucket(query, n, k, bits).unwrap();
                        let Some((_, values)) = probes.iter().find(|(b, _)| *b == bucket) else { continue };
                        for_each_probed(
                            &page,
                            sorted,
                            values,
                            bits,
                            |e| segment_value(e.0, n),
                            |e| {
                                if matches(e.0, query) {
                                    alone.push((q, e.1));
                                }
                            },
                        );
                    }
                    found.sort_unstable();
                    alone.sort_unstable();
                    matched += found.len();
                    assert_eq!(
                        found, alone,
                        "queries {queries:x?} page {page:x?} sorted {sorted} k {k} bits {bits} n {n}"
                    );
                }
            }
        }
        assert!(matched > 100, "only {matched} matches: the test compares little");
    }

    #[test]
    fn asked_entries_of_a_corrupt_page_or_no_queries() {
        let mut askers = Askers::default();
        // A "sorted" prefix out of order, and a sorted count beyond the entries: it ends.
        let entries: Vec<(u16, usize)> = vec![(9, 0), (3, 1), (7, 2), (3, 3), (1, 4)];
        askers.fill(&[0x0003, 0x0007], 3, 3).unwrap();
        let mut count = 0;
        for_each_asked(&entries, 99, &askers, 0, 8, |e| e.0, |_, _| count += 1);
        assert!(count <= entries.len() * 2);
        // No queries: nothing is asked.
        askers.fill(&[], 3, 11).unwrap();
        assert!(askers.buckets(8).is_empty());
        for_each_asked(&entries, 2, &askers, 0, 8, |e| e.0, |_, _| panic!("nothing was asked"));
    }

    #[test]
    fn lower_bound_from_any_guess() {
        let sorted: Vec<u16> = vec![1, 1, 3, 3, 3, 4, 7, 9, 9, 12];
        for value in 0..14u16 {
            let expected = sorted.partition_point(|&v| v < value);
            for guess in 0..=sorted.len() + 2 {
                assert_eq!(lower_bound_from(&sorted, value, guess, &|&v| v), expected, "value {value} guess {guess}");
            }
        }
        assert_eq!(lower_bound_from(&[] as &[u16], 5, 3, &|&v| v), 0);
    }

    #[test]
    fn large_radii_read_every_bucket() {
        assert!(probe_buckets(0, 0, MAX_PROBED_RADIUS + 1, 8).is_none());
        assert_eq!(probe_buckets(0, 0, 11, 0).unwrap(), vec![0]);
        assert_eq!(probe_buckets(0xFFFF_0000_0000_0000, 0, 0, 16).unwrap(), vec![0xFFFF]);
    }
}
