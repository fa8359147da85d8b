//! Multi-index hashing of binary codes of any length (`bit(n)`, 64 to 4,096 bits): the segments of
//! a code, the radius of each segment that makes a lookup exact, the probe values of a segment, and
//! the distance of two codes. The design is `docs/design/codes-of-any-length.md`.
//!
//! A code of `n` bits is cut into `m` segments of `w` bits, most significant (first) bits first,
//! the last one narrower when `w` does not divide `n` ([`SegmentPlan`]); `w` is chosen at build
//! from the number of rows, near `log2(rows)` (Norouzi, Punjani and Fleet, "Fast search in Hamming
//! space with multi-index hashing", 2012), so that a segment value holds about one row.
//!
//! The generalised pigeonhole: if two codes differ in at most `k` bits and segment `i` is given a
//! radius `r_i`, and `sum(r_i + 1) >= k + 1`, then some segment `i` differs in at most `r_i` bits
//! (else the codes would differ in at least `sum(r_i + 1) > k` bits). A segment may also be left
//! out (no radius: it adds nothing to the sum), which a small `k` among many segments does: k = 8
//! over 16 segments probes 9 of them with their own value only. Probing every segment with the
//! values within its radius of the query's segment is therefore complete ([`segment_radii`]
//! chooses the radii, and the tests check completeness by brute force).
//!
//! The radii minimise the expected work of a lookup on uniformly random codes ([`Costs`]): each
//! probe value costs a run lookup, and each row found in a probed run costs a candidate check
//! (reading its code and counting the differing bits), `rows / 2^w` of them per probe value.

use crate::distance::popcount;

/// The longest code indexed, in bits (the target; PostgreSQL's `bit(n)` goes much further).
pub const MAX_CODE_BITS: u32 = 4096;

/// The narrowest segment a plan chooses: the 64-bit index's 16, so that a small table still has
/// few segments (a 4,096-bit code: 256 of them).
pub const MIN_SEGMENT_BITS: u32 = 16;

/// The widest segment: a segment value fits a `u32`.
pub const MAX_SEGMENT_BITS: u32 = 32;

/// How a code of `code_bits` bits is cut: `count` segments, all `width` bits wide but the last,
/// which is `last_width` bits (1..=width).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentPlan {
    pub code_bits: u32,
    pub width: u32,
    pub count: u32,
    pub last_width: u32,
}

/// Why a code or a plan is refused (the SQL side maps both to 22023).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The code length is 0 or above [`MAX_CODE_BITS`].
    CodeBits(u32),
    /// The segment width is 0 or above [`MAX_SEGMENT_BITS`].
    Width(u32),
}

impl SegmentPlan {
    /// The plan of codes of `code_bits` bits cut into segments of `width` bits (1 to 32; widths
    /// below [`MIN_SEGMENT_BITS`] are allowed here for tests and small examples).
    pub fn with_width(code_bits: u32, width: u32) -> Result<SegmentPlan, PlanError> {
        if code_bits == 0 || code_bits > MAX_CODE_BITS {
            return Err(PlanError::CodeBits(code_bits));
        }
        if width == 0 || width > MAX_SEGMENT_BITS {
            return Err(PlanError::Width(width));
        }
        let width = width.min(code_bits);
        let count = code_bits.div_ceil(width);
        Ok(SegmentPlan { code_bits, width, count, last_width: code_bits - width * (count - 1) })
    }

    /// The plan an index built on `rows` rows of `code_bits`-bit codes takes: segments of about
    /// `log2(rows)` bits ([`width_for_rows`]), as many segments as that width needs, then the
    /// width evened out over them: 256 bits among 10,000,000 rows (log2 = 23.3) make 11 segments
    /// of 22 bits and a last one of 14, not 11 of 23 and a last one of 3.
    pub fn for_table(code_bits: u32, rows: u64) -> Result<SegmentPlan, PlanError> {
        if code_bits == 0 || code_bits > MAX_CODE_BITS {
            return Err(PlanError::CodeBits(code_bits));
        }
        let target = width_for_rows(rows).min(code_bits);
        let count = code_bits.div_ceil(target);
        SegmentPlan::with_width(code_bits, code_bits.div_ceil(count))
    }

    /// The width of segment `i` (0..count).
    pub fn width_of(&self, i: u32) -> u32 {
        if i + 1 == self.count {
            self.last_width
        } else {
            self.width
        }
    }

    /// Segment `i` (0..count) of `code` (the code's bytes, first bit = most significant bit of the
    /// first byte, as PostgreSQL stores `bit(n)`), its first bit the most significant. `code` must
    /// hold at least `code_bits` bits.
    pub fn segment(&self, code: &[u8], i: u32) -> u32 {
        let start = (i * self.width) as usize;
        let width = self.width_of(i);
        let first = start / 8;
        // The 8 bytes from `first` (zeros beyond the code's end), in one load where the code
        // holds them: a build reads every row's segments, and a copy of a variable length there
        // is a call to `memcpy` each.
        let window = match code.get(first..first + 8) {
            Some(bytes) => u64::from_be_bytes(bytes.try_into().expect("8 bytes")),
            None => code[first..].iter().take(8).enumerate().fold(0, |w, (n, &b)| w | u64::from(b) << (56 - 8 * n)),
        };
        let bits = window << (start % 8);
        (bits >> (64 - width)) as u32
    }
}

/// The segment width for a table of `rows` rows: `log2(rows)` rounded, within
/// [`MIN_SEGMENT_BITS`]..=[`MAX_SEGMENT_BITS`] (a segment value then holds about one row).
pub fn width_for_rows(rows: u64) -> u32 {
    let log2 = (rows.max(1) as f64).log2().round() as u32;
    log2.clamp(MIN_SEGMENT_BITS, MAX_SEGMENT_BITS)
}

/// The relative costs of a lookup's two kinds of work, for choosing radii: finding the run of one
/// probe value (a directory read and a binary search), and checking one candidate row found there
/// (reading its code from the index and counting the differing bits). Both are about one cache or
/// buffer miss; the benchmark is what should tune them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    pub probe: f64,
    pub candidate: f64,
}

impl Default for Costs {
    fn default() -> Costs {
        Costs { probe: 1.0, candidate: 1.0 }
    }
}

/// The expected work of a lookup: probe values, candidate rows met in the probed runs (a row found
/// in two segments counts twice), and the codes read to check the candidates the slack filter
/// keeps ([`slack_threshold`]), on uniformly random codes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    pub probes: f64,
    pub candidates: f64,
    pub checks: f64,
}

impl Work {
    /// The work weighed by `costs`.
    pub fn cost(&self, costs: Costs) -> f64 {
        self.probes * costs.probe + self.candidates * costs.candidate
    }
}

/// The number of `width`-bit values within `radius` bits of one: `sum(C(width, j), j <= radius)`.
pub fn probe_count(width: u32, radius: u32) -> u64 {
    (0..=radius.min(width)).map(|j| binomial(width, j)).sum()
}

/// `C(n, r)` (exact for `n <= 64`).
fn binomial(n: u32, r: u32) -> u64 {
    (0..u64::from(r)).fold(1u64, |acc, i| acc * (u64::from(n) - i) / (i + 1))
}

/// The expected work of probing the segments of `plan` with `radii` (`None`: not probed) in a
/// table of `rows` uniformly random codes.
pub fn expected_work(plan: &SegmentPlan, radii: &[Option<u32>], rows: u64) -> Work {
    let mut work = Work { probes: 0.0, candidates: 0.0, checks: 0.0 };
    for (i, radius) in radii.iter().enumerate() {
        if let Some(r) = *radius {
            let width = plan.width_of(i as u32);
            let probes = probe_count(width, r) as f64;
            work.probes += probes;
            work.candidates += probes * rows as f64 / 2f64.powi(width as i32);
        }
    }
    work.checks = work.candidates;
    work
}

/// The units of `radii`: `sum(r_i + 1)` over the probed segments.
pub fn units(radii: &[Option<u32>]) -> u64 {
    radii.iter().map(|r| r.map_or(0, |r| u64::from(r) + 1)).sum()
}

/// The least *slack* of a row within `k` bits when the segments are probed with `radii` (at least
/// `k + 1` units, [`units`]): a row is met in probed segment `i` when that segment differs from
/// the query's in `d_i <= r_i` bits, with slack `r_i + 1 - d_i` (at least 1); a row within `k`
/// bits has slacks adding up to at least `units(radii) - k` over the segments it is met in.
/// So a lookup given more units than the `k + 1` of the pigeonhole reads the codes of fewer rows:
/// with `k + 2`, only the rows met in two segments or at least one bit inside a segment's radius.
///
/// Proof: let `b_i = r_i + 1` (0 for a segment not probed) and `M` the segments the row is met
/// in. Outside `M`, `d_i >= b_i` (for a segment not probed, `d_i >= 0 = b_i`). So
/// `k >= sum_i d_i >= sum_{M} d_i + sum_{not M} b_i = sum_{M} d_i + units - sum_{M} b_i`, that is
/// `sum_{M} (b_i - d_i) >= units - k`.
pub fn slack_threshold(radii: &[Option<u32>], k: u32) -> u64 {
    units(radii).saturating_sub(u64::from(k)).max(1)
}

/// [`expected_work`] with the codes read under the slack filter of a lookup within `k`: the rows
/// met in one segment with slack at least the threshold, plus (when it is 2 or more) about the
/// rows met twice, an entry pair of one random row.
pub fn expected_work_within(plan: &SegmentPlan, radii: &[Option<u32>], k: u32, rows: u64) -> Work {
    let mut work = expected_work(plan, radii, rows);
    let threshold = slack_threshold(radii, k);
    if threshold > 1 {
        let mut checks = 0.0;
        for (i, radius) in radii.iter().enumerate() {
            // Met with slack >= threshold: d_i <= r_i + 1 - threshold.
            if let Some(within) = radius.and_then(|r| (u64::from(r) + 1).checked_sub(threshold)) {
                let width = plan.width_of(i as u32);
                checks += probe_count(width, within.min(u64::from(width)) as u32) as f64 * rows as f64
                    / 2f64.powi(width as i32);
            }
        }
        checks += work.candidates * work.candidates / (2.0 * rows.max(1) as f64);
        work.checks = checks.min(work.candidates);
    }
    work
}

/// The relative costs of a lookup's three kinds of work, in units of a random page access: a
/// probe (a directory position and a binary search in a run, its page often shared with the
/// previous probe's), a candidate met in a run (its ordinal read from a page already at hand),
/// a check (a candidate's code read from the code store, a random page, and compared).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LookupCosts {
    pub probe: f64,
    pub candidate: f64,
    pub check: f64,
}

impl LookupCosts {
    /// The cost of `work`.
    pub fn of(&self, work: Work) -> f64 {
        work.probes * self.probe + work.candidates * self.candidate + work.checks * self.check
    }
}

/// The most units beyond `k + 1` [`lookup_radii`] tries.
pub const MAX_EXTRA_UNITS: u32 = 6;

/// The radii of a lookup within `k` bits among `rows` rows at the least expected cost under the
/// slack filter ([`slack_threshold`], [`expected_work_within`]): for `k + 1` to
/// `k + 1 + MAX_EXTRA_UNITS` units, the greedy of [`segment_budgets`] (candidates weighed as met
/// and checked, and as met alone), the cheapest of them; `None` when no probing can.
pub fn lookup_radii(plan: &SegmentPlan, k: u32, rows: u64, costs: LookupCosts) -> Option<Vec<Option<u32>>> {
    // (least cost, then fewest units: the radii, by growing each greedy once)
    let mut best: Option<(f64, u32, Vec<Option<u32>>)> = None;
    let weights = [
        Costs { probe: costs.probe, candidate: costs.candidate + costs.check },
        Costs { probe: costs.probe, candidate: costs.candidate },
    ];
    for weight in weights {
        greedy(plan, k.saturating_add(1 + MAX_EXTRA_UNITS), rows, weight, |unit, budgets| {
            if unit <= k {
                return;
            }
            let radii: Vec<Option<u32>> = budgets.iter().map(|b| b.checked_sub(1)).collect();
            let cost = costs.of(expected_work_within(plan, &radii, k, rows));
            if best.as_ref().is_none_or(|(least, units, _)| cost < *least || (cost == *least && unit < *units)) {
                best = Some((cost, unit, radii));
            }
        });
    }
    best.map(|(_, _, radii)| radii)
}

/// The radius of each segment of `plan` that makes a lookup within `k` bits exact at the least
/// expected work ([`expected_work`] weighed by `costs`) among `rows` rows, or `None` when no
/// probing can (k at least as large as half of every segment plus one, where a scan is the plan).
///
/// Objective: minimise `sum_i f_i(b_i)` over budgets `b_i = r_i + 1` (0 = segment not probed)
/// subject to `sum_i b_i = k + 1` (the generalised pigeonhole; a larger sum costs more probes and
/// candidates, which only the slack filter of [`lookup_radii`] can repay),
/// where `f_i(b) = probe_count(w_i, b - 1) * (costs.probe + costs.candidate * rows / 2^w_i)`.
/// Raising `b_i` by one costs `C(w_i, b_i) * (costs.probe + costs.candidate * rows / 2^w_i)`,
/// which grows with `b_i` while `b_i <= w_i / 2`: the `f_i` are convex there, so giving the
/// `k + 1` units one at a time to the segment where the next one costs least is optimal (radii
/// stop at `w_i / 2`, beyond which probing a segment costs more than reading all of it). Ties go
/// to the first segment, so equal segments get radii that differ by at most one, larger first.
pub fn segment_radii(plan: &SegmentPlan, k: u32, rows: u64, costs: Costs) -> Option<Vec<Option<u32>>> {
    segment_budgets(plan, k + 1, rows, costs)
}

/// The greedy of [`segment_radii`] for `units` units (`k + 1` for a lookup within `k`; more buy
/// slack, [`slack_threshold`]), or `None` when the segments cannot take them all.
pub fn segment_budgets(plan: &SegmentPlan, units: u32, rows: u64, costs: Costs) -> Option<Vec<Option<u32>>> {
    if units == 0 {
        return Some(vec![None; plan.count as usize]);
    }
    let mut radii = None;
    greedy(plan, units, rows, costs, |unit, budgets| {
        if unit == units {
            radii = Some(budgets.iter().map(|b| b.checked_sub(1)).collect());
        }
    });
    radii
}

/// The greedy of [`segment_budgets`] one unit at a time up to `units`, with `visit(unit,
/// budgets)` after each (the budgets of `u` units are those of `u - 1` and one more), until the
/// segments take no more.
fn greedy(plan: &SegmentPlan, units: u32, rows: u64, costs: Costs, mut visit: impl FnMut(u32, &[u32])) {
    let mut budgets = vec![0u32; plan.count as usize];
    let per_probe: Vec<f64> = (0..plan.count)
        .map(|i| costs.probe + costs.candidate * rows as f64 / 2f64.powi(plan.width_of(i) as i32))
        .collect();
    for unit in 1..=units {
        let Some(next) = (0..plan.count as usize)
            .filter(|&i| budgets[i] <= plan.width_of(i as u32) / 2)
            .map(|i| (i, binomial(plan.width_of(i as u32), budgets[i]) as f64 * per_probe[i]))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return;
        };
        budgets[next.0] += 1;
        visit(unit, &budgets);
    }
}

/// Every `width`-bit value within `radius` bits of `value`: `value` first, then the values `1`,
/// `2`, ... bits away (each distance in ascending order of the flipped bits), `probe_count(width,
/// radius)` of them, without allocating. `width` is 1..=32.
pub fn probes(value: u32, width: u32, radius: u32) -> Probes {
    assert!((1..=MAX_SEGMENT_BITS).contains(&width), "segment width {width} is out of range");
    Probes { value, width, radius: radius.min(width), flipped: 0, mask: Some(0) }
}

/// The iterator of [`probes`]: the masks of each weight in ascending order (Gosper's hack).
#[derive(Clone, Debug)]
pub struct Probes {
    value: u32,
    width: u32,
    radius: u32,
    flipped: u32,
    mask: Option<u64>,
}

impl Iterator for Probes {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let mask = self.mask?;
        // The next mask of the same weight, or the first of the next weight.
        let limit = 1u64 << self.width;
        let successor = if mask == 0 {
            limit
        } else {
            let low = mask & mask.wrapping_neg();
            let ripple = mask + low;
            ripple | (((ripple ^ mask) >> 2) / low)
        };
        self.mask = if successor < limit {
            Some(successor)
        } else if self.flipped < self.radius {
            self.flipped += 1;
            Some((1u64 << self.flipped) - 1)
        } else {
            None
        };
        Some(self.value ^ mask as u32)
    }
}

/// The share of uniformly random `bits`-bit codes within `k` bits of a given code:
/// `P(Binomial(bits, 1/2) <= k)`, summed in log space (exact enough for a selectivity at any
/// length up to [`MAX_CODE_BITS`]).
pub fn uniform_share_within(bits: u32, k: u32) -> f64 {
    if k >= bits {
        return 1.0;
    }
    let ln_half = -(bits as f64) * std::f64::consts::LN_2;
    let mut ln_term = ln_half; // ln(C(bits, 0) / 2^bits)
    let mut total = ln_term.exp();
    for j in 1..=k {
        ln_term += ((bits - j + 1) as f64).ln() - (j as f64).ln();
        total += ln_term.exp();
    }
    total.min(1.0)
}

/// The number of bit positions at which `a` and `b` differ, or `None` when their lengths differ.
pub fn hamming_bytes(a: &[u8], b: &[u8]) -> Option<u32> {
    if a.len() != b.len() {
        return None;
    }
    let (a_words, a_rest) = a.split_at(a.len() / 8 * 8);
    let (b_words, b_rest) = b.split_at(b.len() / 8 * 8);
    let words = a_words.chunks_exact(8).zip(b_words.chunks_exact(8)).map(|(x, y)| {
        let x = u64::from_ne_bytes(x.try_into().expect("chunks of 8"));
        let y = u64::from_ne_bytes(y.try_into().expect("chunks of 8"));
        popcount(x ^ y)
    });
    let rest = a_rest.iter().zip(b_rest).map(|(x, y)| (x ^ y).count_ones());
    Some(words.sum::<u32>() + rest.sum::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_share_matches_direct_sums() {
        // 64 bits: the simhash64 model (probes::uniform_share_within).
        for k in [0, 3, 11, 32, 63] {
            let a = uniform_share_within(64, k);
            let b = crate::probes::uniform_share_within(k);
            assert!((a - b).abs() <= 1e-12 * b.max(1e-300), "k {k}: {a} vs {b}");
        }
        assert_eq!(uniform_share_within(256, 256), 1.0);
        assert!((uniform_share_within(256, 127) - 0.475_1).abs() < 1e-3);
        // 4,096 bits at a small radius: tiny but not NaN or zero-by-overflow of 2^4096.
        let tiny = uniform_share_within(4096, 100);
        assert!(tiny.is_finite() && (0.0..1e-300).contains(&tiny));
        assert!(uniform_share_within(4096, 2048) > 0.5);
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn plans() {
        let plan = SegmentPlan::with_width(256, 24).unwrap();
        assert_eq!((plan.count, plan.width, plan.last_width), (11, 24, 16));
        assert_eq!(SegmentPlan::with_width(256, 16).unwrap().count, 16);
        assert_eq!(
            SegmentPlan::with_width(8, 16).unwrap(),
            SegmentPlan { code_bits: 8, width: 8, count: 1, last_width: 8 }
        );
        assert_eq!(SegmentPlan::with_width(0, 16), Err(PlanError::CodeBits(0)));
        assert_eq!(SegmentPlan::with_width(4097, 16), Err(PlanError::CodeBits(4097)));
        assert_eq!(SegmentPlan::with_width(256, 33), Err(PlanError::Width(33)));
        // From the row count: log2 within 16..=32, the last segment evened out.
        assert_eq!(width_for_rows(0), 16);
        assert_eq!(width_for_rows(1_000_000), 20);
        assert_eq!(width_for_rows(10_000_000), 23);
        assert_eq!(width_for_rows(u64::MAX), 32);
        let ten_million = SegmentPlan::for_table(256, 10_000_000).unwrap();
        assert_eq!((ten_million.count, ten_million.width, ten_million.last_width), (12, 22, 14));
        let million = SegmentPlan::for_table(1024, 1_000_000).unwrap();
        assert_eq!((million.count, million.width, million.last_width), (52, 20, 4));
        assert_eq!(SegmentPlan::for_table(64, 1000).unwrap().count, 4);
        for bits in [1, 7, 64, 100, 256, 1000, 1024, 4096] {
            for rows in [0, 1000, 1_000_000, 10_000_000, 1 << 40] {
                let plan = SegmentPlan::for_table(bits, rows).unwrap();
                assert_eq!(plan.width * (plan.count - 1) + plan.last_width, bits);
                assert!((1..=plan.width).contains(&plan.last_width));
            }
        }
    }

    #[test]
    fn segments_read_the_bits_in_order() {
        // 0x0123456789abcdef fedcba98 76543210 as 96 bits, cut in 20-bit segments (4 x 20 + 16).
        let code = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98];
        let plan = SegmentPlan::with_width(96, 20).unwrap();
        assert_eq!((plan.count, plan.last_width), (5, 16));
        let segments: Vec<u32> = (0..5).map(|i| plan.segment(&code, i)).collect();
        assert_eq!(segments, [0x01234, 0x56789, 0xabcde, 0xffedc, 0xba98]);
        // Every width: the segments put back together are the code.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let code: Vec<u8> = (0..32).map(|_| xorshift(&mut state) as u8).collect();
        for width in 1..=32 {
            let plan = SegmentPlan::with_width(256, width).unwrap();
            let mut bits = Vec::new();
            for i in 0..plan.count {
                let value = plan.segment(&code, i);
                let w = plan.width_of(i);
                bits.extend((0..w).rev().map(|b| (value >> b) & 1 == 1));
            }
            let expected: Vec<bool> = (0..256).map(|b| code[b / 8] >> (7 - b % 8) & 1 == 1).collect();
            assert_eq!(bits, expected, "width {width}");
        }
    }

    #[test]
    fn probes_are_the_values_within_the_radius() {
        for (value, width, radius) in
            [(0u32, 4u32, 4u32), (0b1010, 4, 2), (0xabcde, 20, 2), (u32::MAX, 32, 2), (7, 3, 9)]
        {
            let probes: Vec<u32> = probes(value, width, radius).collect();
            assert_eq!(probes.len() as u64, probe_count(width, radius), "{value:x} {width} {radius}");
            let mut sorted = probes.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), probes.len(), "distinct");
            assert!(probes.iter().all(|&p| (p ^ value).count_ones() <= radius && u64::from(p) < 1u64 << width));
            assert!(probes.windows(2).all(|w| (w[0] ^ value).count_ones() <= (w[1] ^ value).count_ones()));
        }
        // Exhaustive for 8-bit values: exactly the values within the radius.
        for radius in 0..=8 {
            let mut found: Vec<u32> = probes(0x5a, 8, radius).collect();
            found.sort_unstable();
            let expected: Vec<u32> = (0..256).filter(|v: &u32| (v ^ 0x5a).count_ones() <= radius).collect();
            assert_eq!(found, expected);
        }
        assert_eq!([0, 1, 2, 3].map(|r| probe_count(16, r)), [1, 17, 137, 697]);
        assert_eq!(probe_count(24, 2), 301);
        assert_eq!(probe_count(32, 3), 5489);
    }

    #[test]
    fn hamming_of_byte_slices() {
        assert_eq!(hamming_bytes(&[], &[]), Some(0));
        assert_eq!(hamming_bytes(&[0xff], &[0x00]), Some(8));
        assert_eq!(hamming_bytes(&[0; 3], &[0; 4]), None);
        let mut state = 1u64;
        for len in [1, 7, 8, 9, 32, 33, 128, 512] {
            let a: Vec<u8> = (0..len).map(|_| xorshift(&mut state) as u8).collect();
            let b: Vec<u8> = (0..len).map(|_| xorshift(&mut state) as u8).collect();
            let naive: u32 = a.iter().zip(&b).map(|(x, y)| (x ^ y).count_ones()).sum();
            assert_eq!(hamming_bytes(&a, &b), Some(naive), "length {len}");
        }
    }

    /// Whether a pair whose segments differ in `distances` bits is found by some segment within
    /// its radius.
    fn caught(distances: &[u32], radii: &[Option<u32>]) -> bool {
        distances.iter().zip(radii).any(|(d, r)| r.is_some_and(|r| *d <= r))
    }

    /// Every vector of per-segment distances for segments of `widths` bits, with its total.
    fn distance_vectors(widths: &[u32]) -> Vec<(Vec<u32>, u32)> {
        let mut vectors: Vec<(Vec<u32>, u32)> = vec![(vec![], 0)];
        for &w in widths {
            vectors = vectors
                .into_iter()
                .flat_map(|(v, t)| (0..=w).map(move |d| ([v.clone(), vec![d]].concat(), t + d)))
                .collect();
        }
        vectors
    }

    /// Every pair of codes within k is found, by brute force. Whether a pair is found depends only
    /// on how many bits each segment differs in, so going through every vector of per-segment
    /// distances goes through every pair: n = 32 in eight 4-bit segments (5^8 vectors), n = 18 in
    /// 4-bit segments and a 2-bit last one, every k, with the radii of several table sizes.
    #[test]
    fn radii_are_complete_by_brute_force() {
        for (bits, width) in [(32, 4), (18, 4), (12, 3)] {
            let plan = SegmentPlan::with_width(bits, width).unwrap();
            let widths: Vec<u32> = (0..plan.count).map(|i| plan.width_of(i)).collect();
            let vectors = distance_vectors(&widths);
            for rows in [16, 1 << 10, 1 << 30] {
                for k in 0..=bits {
                    let Some(radii) = segment_radii(&plan, k, rows, Costs::default()) else {
                        // Only where probing would read every segment whole anyway.
                        assert!(k + 1 > widths.iter().map(|w| w / 2 + 1).sum::<u32>());
                        continue;
                    };
                    assert_eq!(radii.iter().map(|r| r.map_or(0, |r| r + 1)).sum::<u32>(), k + 1);
                    for (distances, total) in &vectors {
                        if *total <= k {
                            assert!(caught(distances, &radii), "{bits}/{width} k={k} {distances:?} {radii:?}");
                        }
                    }
                }
            }
        }
        // Tight: with one bit fewer in the budget some pair within k is missed.
        let plan = SegmentPlan::with_width(32, 4).unwrap();
        let radii = segment_radii(&plan, 9, 1 << 10, Costs::default()).unwrap();
        let distances: Vec<u32> = radii.iter().map(|r| r.map_or(0, |r| r + 1)).collect();
        assert_eq!(distances.iter().sum::<u32>(), 10);
        assert!(!caught(&distances, &radii));
    }

    /// The slack filter by brute force, as above: for radii of `k + 1` to `k + 6` units, every
    /// vector of per-segment distances within `k` has slacks (over the segments it is met in)
    /// adding up to at least the threshold, and some reach it exactly (it cannot be raised).
    #[test]
    fn slack_threshold_is_complete_by_brute_force() {
        let mut exact = 0;
        for (bits, width) in [(18, 4), (12, 3), (10, 10)] {
            let plan = SegmentPlan::with_width(bits, width).unwrap();
            let widths: Vec<u32> = (0..plan.count).map(|i| plan.width_of(i)).collect();
            let vectors = distance_vectors(&widths);
            for k in 0..=bits + 2 {
                for extra in 0..=6 {
                    let Some(radii) = segment_budgets(&plan, k + 1 + extra, 1 << 10, Costs::default()) else {
                        continue;
                    };
                    let threshold = slack_threshold(&radii, k);
                    assert_eq!(threshold, u64::from(extra) + 1);
                    for (distances, total) in &vectors {
                        if *total <= k {
                            let slack: u64 = distances
                                .iter()
                                .zip(&radii)
                                .filter_map(|(&d, r)| r.filter(|&r| d <= r).map(|r| u64::from(r + 1 - d)))
                                .sum();
                            assert!(slack >= threshold, "{bits}/{width} k={k} {distances:?} {radii:?}");
                            exact += usize::from(slack == threshold);
                        }
                    }
                }
            }
        }
        assert!(exact > 0);
    }

    /// The same end to end on 256-bit codes: random pairs within k share a probe in some segment,
    /// with the probes enumerated and the segments read from the bytes.
    #[test]
    fn probes_find_random_pairs_of_long_codes() {
        let mut state = 0x0123_4567_89ab_cdefu64;
        for (width, k) in [(16, 8), (16, 20), (24, 16), (20, 12), (31, 5)] {
            let plan = SegmentPlan::with_width(256, width).unwrap();
            let radii = segment_radii(&plan, k, 10_000_000, Costs::default()).unwrap();
            for _ in 0..50 {
                let query: Vec<u8> = (0..32).map(|_| xorshift(&mut state) as u8).collect();
                let mut other = query.clone();
                // k flips spread round-robin over the segments (the hardest case), at random offsets.
                for t in 0..k {
                    let i = t % plan.count;
                    let bit = i * plan.width + (xorshift(&mut state) % u64::from(plan.width_of(i))) as u32;
                    other[(bit / 8) as usize] ^= 0x80 >> (bit % 8);
                }
                let d = hamming_bytes(&query, &other).unwrap();
                assert!(d <= k);
                let found = (0..plan.count).any(|i| {
                    radii[i as usize].is_some_and(|r| {
                        probes(plan.segment(&query, i), plan.width_of(i), r).any(|p| p == plan.segment(&other, i))
                    })
                });
                assert!(found, "width {width} k={k} d={d}");
            }
        }
    }

    /// The greedy radii cost no more than the best of all radii up to half a segment, found by
    /// dynamic programming. (Beyond half a segment the probes of one segment approach all its
    /// values: a scan of every code, which the caller weighs against the probes anyway.)
    #[test]
    fn radii_minimise_the_expected_work() {
        for (bits, width, rows) in
            [(256, 16, 10_000_000u64), (256, 24, 10_000_000), (100, 20, 1_000_000), (64, 16, 100)]
        {
            let plan = SegmentPlan::with_width(bits, width).unwrap();
            let costs = Costs { probe: 1.0, candidate: 2.0 };
            for k in [0, 3, 8, 16, 32] {
                let radii = segment_radii(&plan, k, rows, costs).unwrap();
                let greedy = expected_work(&plan, &radii, rows).cost(costs);
                // best[b]: the least cost of budgets adding up to b over the segments so far.
                let mut best = vec![0.0f64; k as usize + 2];
                best[1..].fill(f64::INFINITY);
                for i in 0..plan.count {
                    let w = plan.width_of(i);
                    let mut next = vec![f64::INFINITY; best.len()];
                    for (have, cost) in best.iter().enumerate() {
                        for add in 0..=(w / 2 + 1) {
                            let to = (have + add as usize).min(k as usize + 1);
                            let extra = add.checked_sub(1).map_or(0.0, |r| segment_cost(&plan, i, r, rows, costs));
                            next[to] = next[to].min(cost + extra);
                        }
                    }
                    best = next;
                }
                let optimum = best[k as usize + 1];
                assert!(greedy <= optimum * (1.0 + 1e-9), "{bits}/{width} k={k}: {greedy} > {optimum}");
            }
        }
    }

    /// The expected cost of probing segment `i` of `plan` alone at `radius`.
    fn segment_cost(plan: &SegmentPlan, i: u32, radius: u32, rows: u64, costs: Costs) -> f64 {
        let mut radii = vec![None; plan.count as usize];
        radii[i as usize] = Some(radius);
        expected_work(plan, &radii, rows).cost(costs)
    }

    /// The radii of `k + 1` are those of `k` with one segment's radius raised by one (so the
    /// nearest-rows search grows its radius without repeating work).
    #[test]
    fn radii_grow_one_unit_at_a_time() {
        for (bits, width, rows) in [(256, 22, 10_000_000u64), (1024, 20, 1_000_000), (64, 16, 1000)] {
            let plan = SegmentPlan::with_width(bits, width).unwrap();
            let budget = |k| {
                segment_radii(&plan, k, rows, Costs::default())
                    .map(|r| r.iter().map(|r| r.map_or(0, |r| r + 1)).collect::<Vec<u32>>())
            };
            let mut previous = budget(0).unwrap();
            for k in 1..=40 {
                let Some(next) = budget(k) else { break };
                let raised: Vec<usize> = (0..next.len()).filter(|&i| next[i] != previous[i]).collect();
                assert_eq!(raised.len(), 1, "{bits}/{width} k={k}");
                assert_eq!(next[raised[0]], previous[raised[0]] + 1);
                previous = next;
            }
        }
    }

    #[test]
    fn radii_examples() {
        let plan = SegmentPlan::with_width(256, 16).unwrap();
        // k = 8 over 16 segments: 9 segments, their own value only.
        let radii = segment_radii(&plan, 8, 10_000_000, Costs::default()).unwrap();
        assert_eq!(radii.iter().filter(|r| **r == Some(0)).count(), 9);
        assert_eq!(radii.iter().filter(|r| r.is_none()).count(), 7);
        // k = 32: 17 units over 16 segments.
        let radii = segment_radii(&plan, 32, 10_000_000, Costs::default()).unwrap();
        assert_eq!(radii[0], Some(2));
        assert!(radii[1..].iter().all(|r| *r == Some(1)));
        // The 64-bit index's radii are the special case of four 16-bit segments.
        let plan = SegmentPlan::with_width(64, 16).unwrap();
        for k in 3..=11 {
            let radii = segment_radii(&plan, k, 1_000_000, Costs::default()).unwrap();
            let expected = crate::probes::segment_radii(k).unwrap().map(Some);
            assert_eq!(radii, expected, "k={k}");
        }
        // Nothing to probe beyond half of every segment.
        assert_eq!(segment_radii(&plan, 36, 1_000_000, Costs::default()), None);
    }
}
