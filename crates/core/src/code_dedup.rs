//! The near-duplicate constraint on binary codes of any length (`bit(n)`): [`CodeNearSet`], the
//! in-memory lookup its commit-time recheck uses to compare a whole table against a transaction's
//! codes in one pass (the counterpart of [`crate::dedup::NearSet`] for `simhash64`).
//!
//! The members are cut into segments as an index of codes cuts them
//! ([`SegmentPlan::for_table`]: about `log2(members)` bits each), and each probed segment's
//! (value, member) pairs are kept sorted. A query probes each segment within the radius
//! [`segment_radii`] gives it (radii adding up to `k + 1 - probed segments`, the generalised
//! pigeonhole: a member within `k` has some probed segment within that segment's radius of the
//! query's), then checks each candidate's distance. When no radii make probing exact (`k` about
//! half of every segment's width or more) or probing would meet about as many candidates as there
//! are members, every member is compared instead. Segments are taken from the codes with their
//! lean bits dealt apart ([`crate::bit_deal`]) when they have some.

use std::collections::HashMap;

use crate::bit_deal::BitDeal;
use crate::code_runs::CodeRuns;
use crate::dedup::{first_come_filed, KeptFiling, NearSetError, Verdict};
use crate::interrupt::{Interrupt, STEP};
use crate::multi_index::{expected_work, hamming_bytes, probes, segment_radii, Costs, SegmentPlan, MAX_CODE_BITS};

/// The bytes of the longest code probed.
const MAX_CODE_BYTES: usize = MAX_CODE_BITS as usize / 8;

/// The plan and each segment's radius (`None`: not probed), and per probed segment its sorted
/// (value, member) pairs.
type Probed = (SegmentPlan, Vec<Option<u32>>, Vec<Vec<(u32, u32)>>);

/// A set of equal-length codes that answers "which members are within `k` bits of `q`?".
pub struct CodeNearSet {
    k: u32,
    /// The members' bytes, `bytes` each, one after the other.
    codes: Vec<u8>,
    bytes: usize,
    count: usize,
    /// `None`: compare every member.
    probed: Option<Probed>,
    /// The deal the segments are taken with (`None`: the codes as they are).
    deal: Option<BitDeal>,
}

impl CodeNearSet {
    /// The set of `count` codes `codes` (`bytes` bytes each, one after the other) of `bits` bits
    /// (1 to [`crate::multi_index::MAX_CODE_BITS`] for probing; longer codes, and codes of no bits,
    /// are compared whole) within radius `k`. `OutOfMemory` when its tables do not fit. (The count
    /// is given: codes of 0 bits take no bytes, yet each is a member, within `k` of any other.)
    /// `interrupt` is called between the segments' sorts.
    pub fn new(
        codes: Vec<u8>,
        count: usize,
        bits: u32,
        k: u32,
        interrupt: Interrupt,
    ) -> Result<CodeNearSet, NearSetError> {
        let bytes = (bits as usize).div_ceil(8);
        assert_eq!(codes.len(), count * bytes, "count codes of bits bits");
        u32::try_from(count).map_err(|_| NearSetError::OutOfMemory)?;
        let mut set = CodeNearSet { k, codes, bytes, count, probed: None, deal: None };
        let Ok(plan) = SegmentPlan::for_table(bits, count as u64) else { return Ok(set) };
        let Some(radii) = segment_radii(&plan, k, count as u64, Costs::default()) else { return Ok(set) };
        let work = expected_work(&plan, &radii, count as u64);
        if work.probes + work.candidates >= count as f64 {
            return Ok(set);
        }
        set.deal = BitDeal::for_codes(bits, count, &|m| set.code(m), interrupt);
        // The members with their bits dealt, while the tables are made.
        let dealt = match &set.deal {
            Some(deal) => deal.dealt_all(&set.codes, bytes, interrupt).map_err(|_| NearSetError::OutOfMemory)?,
            None => Vec::new(),
        };
        let segmented = |m: usize| if set.deal.is_some() { &dealt[m * bytes..(m + 1) * bytes] } else { set.code(m) };
        let mut tables = Vec::new();
        tables.try_reserve_exact(radii.len()).map_err(|_| NearSetError::OutOfMemory)?;
        for (i, radius) in radii.iter().enumerate() {
            interrupt.check();
            let mut table: Vec<(u32, u32)> = Vec::new();
            if radius.is_some() {
                table.try_reserve_exact(count).map_err(|_| NearSetError::OutOfMemory)?;
                table.extend((0..count).map(|m| (plan.segment(segmented(m), i as u32), m as u32)));
                table.sort_unstable();
            }
            tables.push(table);
        }
        set.probed = Some((plan, radii, tables));
        Ok(set)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Member `m`'s bytes.
    pub fn code(&self, m: usize) -> &[u8] {
        &self.codes[m * self.bytes..(m + 1) * self.bytes]
    }

    /// Calls `found(i)` for each member `i` within `k` of `q` (`q` of the members' length; a member
    /// may be reported more than once). Comparing every member, it calls `interrupt` every
    /// [`crate::interrupt::STEP`] members.
    pub fn for_each_near(&self, q: &[u8], found: &mut dyn FnMut(usize), interrupt: Interrupt) {
        let mut check = |m: usize| {
            if hamming_bytes(self.code(m), q).is_some_and(|d| d <= self.k) {
                found(m);
            }
        };
        let Some((plan, radii, tables)) = &self.probed else {
            for m in 0..self.count {
                if m % STEP == STEP - 1 {
                    interrupt.check();
                }
                check(m);
            }
            return;
        };
        // (members visited, for a check every STEP of them: many members may share a probe)
        let mut visited = 0usize;
        let mut room = [0u8; MAX_CODE_BYTES];
        let segmented = match &self.deal {
            Some(deal) => {
                deal.apply(q, &mut room[..self.bytes]);
                &room[..self.bytes]
            }
            None => q,
        };
        for (i, radius) in radii.iter().enumerate() {
            let Some(radius) = *radius else { continue };
            let table = &tables[i];
            for probe in probes(plan.segment(segmented, i as u32), plan.width_of(i as u32), radius) {
                let start = table.partition_point(|&(v, _)| v < probe);
                for &(_, m) in table[start..].iter().take_while(|&&(v, _)| v == probe) {
                    visited += 1;
                    if visited.is_multiple_of(STEP) {
                        interrupt.check();
                    }
                    check(m as usize);
                }
            }
        }
    }
}

/// [`crate::dedup::first_come`] for `rows` rows of binary codes: `code(i)` is row `i`'s code, its
/// length in bits and its bytes (read where the caller keeps them: no copy of every row's). Codes of unequal lengths are never near (the constraint's distance at
/// commit). The kept rows of each length are filed in a [`CodeRuns`] (the structure of an index's
/// tail copy), so a row meets only the kept rows its probes find; `interrupt` is called between
/// pieces of that work.
pub fn first_come_codes<'a>(
    rows: usize,
    code: &'a dyn Fn(usize) -> (u32, &'a [u8]),
    k: u32,
    near_other: &mut dyn FnMut(usize) -> bool,
    alive: &mut dyn FnMut(usize) -> bool,
    similar: &mut dyn FnMut(usize, usize) -> bool,
    interrupt: Interrupt,
) -> Result<Vec<Verdict>, NearSetError> {
    let mut kept = KeptCodes { code, k, runs: HashMap::new(), interrupt };
    // Room for every row's code: a row kept is then filed without running out of memory.
    let mut lengths: HashMap<u32, usize> = HashMap::new();
    for (i, (bits, _)) in (0..rows).map(code).enumerate() {
        if i % STEP == STEP - 1 {
            interrupt.check();
        }
        if !lengths.contains_key(&bits) {
            lengths.try_reserve(1).map_err(|_| NearSetError::OutOfMemory)?;
        }
        *lengths.entry(bits).or_default() += 1;
    }
    kept.runs.try_reserve(lengths.len()).map_err(|_| NearSetError::OutOfMemory)?;
    for (bits, rows) in lengths {
        let mut runs = CodeRuns::new(bits);
        runs.try_reserve(rows).map_err(|_| NearSetError::OutOfMemory)?;
        kept.runs.insert(bits, runs);
    }
    first_come_filed(rows, &mut kept, near_other, alive, similar)
}

/// The kept rows of [`first_come_codes`], per code length.
struct KeptCodes<'a, 'i> {
    code: &'a dyn Fn(usize) -> (u32, &'a [u8]),
    k: u32,
    runs: HashMap<u32, CodeRuns>,
    interrupt: Interrupt<'i>,
}

impl KeptFiling for KeptCodes<'_, '_> {
    fn file(&mut self, i: usize) -> Result<(), NearSetError> {
        let (bits, code) = (self.code)(i);
        let runs = self.runs.get_mut(&bits).expect("a length of the rows");
        runs.push(code, i as u64).map_err(|_| NearSetError::OutOfMemory)?;
        runs.seal(self.interrupt).map_err(|_| NearSetError::OutOfMemory)
    }

    fn for_each_within(&mut self, i: usize, found: &mut dyn FnMut(usize)) {
        let (bits, code) = (self.code)(i);
        if i % STEP == STEP - 1 {
            self.interrupt.check();
        }
        let runs = self.runs.get_mut(&bits).expect("a length of the rows");
        runs.for_each_within(code, self.k, self.interrupt, &mut |_, key, _| found(key as usize));
    }
}

/// Table rows read in the one pass for the cost of one code looked up through an index of codes
/// (a few probes and candidates, each about a buffer read, against a row read with its visibility
/// check; not measured: the same order as the `simhash64` index's, `crate::cost`).
pub const ROWS_PER_INDEX_LOOKUP: f64 = 30.0;

/// Whether the commit-time recheck of `pending` codes reads the table of `rows` rows once rather
/// than looking each code up: always without an index (`indexed` false: a lookup would read the
/// table too), else when the lookups would cost about as much as the pass.
pub fn one_pass_is_cheaper(rows: f64, indexed: bool, pending: usize) -> bool {
    !indexed || pending as f64 * ROWS_PER_INDEX_LOOKUP >= rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift).
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn random_code(state: &mut u64, bytes: usize) -> Vec<u8> {
        (0..bytes).map(|_| next(state) as u8).collect()
    }

    /// `code` with `flips` bits flipped (distinct positions among the first `bits`).
    fn flipped(state: &mut u64, code: &[u8], bits: u32, flips: u32) -> Vec<u8> {
        let mut out = code.to_vec();
        let mut done = std::collections::HashSet::new();
        while done.len() < flips as usize {
            let bit = (next(state) % u64::from(bits)) as usize;
            if done.insert(bit) {
                out[bit / 8] ^= 0x80 >> (bit % 8);
            }
        }
        out
    }

    #[test]
    fn equals_brute_force() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        // Probing with every segment at radius 0 (256 bits, k = 0 and 10; 64 bits, k = 3), with
        // radii of 1 and 2 (64 bits, k = 11; 128 bits, k = 20), and comparing every member.
        let probed = [(256u32, 0u32, 300usize), (256, 10, 2000), (64, 3, 1000), (64, 11, 5000), (128, 20, 20000)];
        let compared = [(256, 40, 500), (1024, 90, 300)];
        for (bits, k, members) in probed.into_iter().chain(compared) {
            let bytes = bits as usize / 8;
            let mut codes = Vec::new();
            let mut bases = Vec::new();
            for _ in 0..members {
                let code = random_code(&mut state, bytes);
                codes.extend_from_slice(&code);
                bases.push(code);
            }
            let set = CodeNearSet::new(codes, members, bits, k, Interrupt::NEVER).expect("fits");
            assert_eq!(set.len(), members);
            let largest_radius = set.probed.as_ref().map(|(_, radii, _)| radii.iter().flatten().max().copied());
            match (bits, k) {
                (64, 11) | (128, 20) => assert!(largest_radius.flatten() >= Some(1), "{largest_radius:?}"),
                (256, 40) | (1024, 90) => assert!(largest_radius.is_none()),
                _ => assert_eq!(largest_radius, Some(Some(0))),
            }
            // Queries: near members (at k, k - 1, k + 1 bits), and random ones.
            let mut queries = Vec::new();
            for (n, base) in bases.iter().enumerate().take(200) {
                let flips = [k, k.saturating_sub(1), k + 1][n % 3];
                queries.push(flipped(&mut state, base, bits, flips));
                queries.push(random_code(&mut state, bytes));
            }
            for q in &queries {
                let mut found = vec![false; members];
                set.for_each_near(q, &mut |m| found[m] = true, Interrupt::NEVER);
                let expected: Vec<bool> = bases.iter().map(|b| hamming_bytes(b, q).unwrap() <= k).collect();
                let members = |v: &[bool]| v.iter().enumerate().filter(|x| *x.1).map(|x| x.0).collect::<Vec<_>>();
                assert_eq!(members(&found), members(&expected), "bits {bits}, k {k}");
            }
        }
    }

    /// Equal to judging each row in order against every kept earlier row (and the row's own
    /// verdict of `near_other` and `alive`), for codes of two lengths, at radii probed and not, with
    /// more rows than a run seals (`code_runs::SEAL_ROWS`).
    #[test]
    fn first_come_codes_judges_rows_in_order() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for (bits, k, rows) in [(256u32, 8u32, 3000usize), (64, 3, 1200), (1024, 40, 600), (13, 2, 400)] {
            let bytes = (bits as usize).div_ceil(8);
            let bases: Vec<Vec<u8>> = (0..rows / 6 + 1).map(|_| random_code(&mut state, bytes)).collect();
            let mut owned: Vec<(u32, Vec<u8>)> = Vec::new();
            for n in 0..rows {
                // Mostly near copies of a few bases (within k, or just beyond), some of another length.
                let base = &bases[next(&mut state) as usize % bases.len()];
                let flips = (next(&mut state) % u64::from(k + 3)) as u32;
                let mut code = flipped(&mut state, base, bits, flips.min(bits));
                if let Some(last) = code.last_mut() {
                    // (the bits past the length are zero, as bit(n) stores them)
                    *last &= 0xFFu8 << ((8 - bits % 8) % 8);
                }
                owned.push(if n % 17 == 0 { (bits + 8, [code, vec![0]].concat()) } else { (bits, code) });
            }
            let codes: Vec<(u32, &[u8])> = owned.iter().map(|(b, c)| (*b, c.as_slice())).collect();
            let near_other: Vec<bool> = (0..rows).map(|_| next(&mut state).is_multiple_of(11)).collect();
            let alive: Vec<bool> = (0..rows).map(|_| !next(&mut state).is_multiple_of(9)).collect();
            let got = first_come_codes(
                codes.len(),
                &|i| codes[i],
                k,
                &mut |i| near_other[i],
                &mut |i| alive[i],
                &mut |_, _| true,
                Interrupt::NEVER,
            )
            .unwrap();
            let near =
                |i: usize, j: usize| codes[i].0 == codes[j].0 && hamming_bytes(codes[i].1, codes[j].1).unwrap() <= k;
            let mut want: Vec<Verdict> = Vec::new();
            for i in 0..rows {
                let earlier = (0..i).find(|&j| want[j] == Verdict::Kept && near(i, j));
                want.push(match (alive[i], near_other[i], earlier) {
                    (false, _, _) => Verdict::Gone,
                    (true, true, _) => Verdict::NearOther,
                    (true, false, Some(j)) => Verdict::NearEarlier(j),
                    (true, false, None) => Verdict::Kept,
                });
            }
            for i in (0..rows).filter(|&i| alive[i]) {
                assert_eq!(got[i], want[i], "row {i} of {rows}, {bits} bits, k = {k}");
            }
            let refused = got.iter().filter(|v| matches!(v, Verdict::NearEarlier(_))).count();
            assert!(refused > rows / 10, "{bits} bits: {refused} refused");
        }
    }

    /// Codes whose first bits are zero in all (a short value in a long type): the kept rows and
    /// the near set file them with their bits dealt apart, so that a lookup meets a few rows, and
    /// answer as a scan does.
    #[test]
    fn lean_codes_are_dealt_apart() {
        let mut state = 0x51f1_5eed_u64;
        for (bits, zeros, k, rows) in [(64u32, 14usize, 3u32, 40_000usize), (256, 100, 8, 20_000)] {
            let bytes = bits as usize / 8;
            let mut owned: Vec<Vec<u8>> = Vec::with_capacity(rows);
            for n in 0..rows {
                let mut code = match owned.last() {
                    Some(last) if n % 10 == 0 => flipped(&mut state, last, bits, k),
                    _ => random_code(&mut state, bytes),
                };
                for b in 0..zeros {
                    code[b / 8] &= !(0x80 >> (b % 8));
                }
                owned.push(code);
            }
            crate::code_runs::COMPARED.with(|c| c.set(0));
            let got = first_come_codes(
                rows,
                &|i| (bits, owned[i].as_slice()),
                k,
                &mut |_| false,
                &mut |_| true,
                &mut |_, _| true,
                Interrupt::NEVER,
            )
            .unwrap();
            // (64 bits: 140 a row, most of them the rows not yet sealed into a run, 4,597 without
            // the deal; 256 bits: 210 a row, 9,000 without.)
            let compared = crate::code_runs::COMPARED.with(|c| c.get());
            assert!(compared < 500 * rows, "{bits} bits: {compared} rows compared");
            let sample = 3_000;
            let mut want: Vec<Verdict> = Vec::new();
            for i in 0..sample {
                let near = |j: usize| hamming_bytes(&owned[i], &owned[j]).unwrap() <= k;
                let earlier = (0..i).find(|&j| want[j] == Verdict::Kept && near(j));
                want.push(earlier.map_or(Verdict::Kept, Verdict::NearEarlier));
            }
            assert_eq!(got[..sample], want[..]);
            assert!(got.iter().filter(|v| matches!(v, Verdict::NearEarlier(_))).count() >= rows / 10 - 1);

            let set = CodeNearSet::new(owned[..sample].concat(), sample, bits, k, Interrupt::NEVER).unwrap();
            assert!(set.deal.is_some() && set.probed.is_some());
            for q in &owned[sample - 100..sample + 100] {
                let mut found = vec![false; sample];
                set.for_each_near(q, &mut |m| found[m] = true, Interrupt::NEVER);
                let expected: Vec<bool> = owned[..sample].iter().map(|c| hamming_bytes(c, q).unwrap() <= k).collect();
                assert_eq!(found, expected, "{bits} bits");
            }
        }
    }

    #[test]
    fn one_pass_without_an_index_or_for_many_codes() {
        assert!(one_pass_is_cheaper(1e6, false, 1));
        assert!(!one_pass_is_cheaper(1e6, true, 1));
        assert!(one_pass_is_cheaper(1e6, true, 100_000));
    }

    #[test]
    fn probes_when_it_pays_and_compares_all_when_not() {
        let mut state = 7u64;
        let codes: Vec<u8> = (0..1000 * 32).map(|_| next(&mut state) as u8).collect();
        assert!(CodeNearSet::new(codes.clone(), 1000, 256, 8, Interrupt::NEVER).unwrap().probed.is_some());
        assert!(CodeNearSet::new(codes, 1000, 256, 200, Interrupt::NEVER).unwrap().probed.is_none());
        assert!(CodeNearSet::new(Vec::new(), 0, 256, 3, Interrupt::NEVER).unwrap().is_empty());
        // Codes of no bits: each a member, each within any radius of the empty query.
        let empty = CodeNearSet::new(Vec::new(), 3, 0, 0, Interrupt::NEVER).unwrap();
        assert_eq!(empty.len(), 3);
        let mut found = Vec::new();
        empty.for_each_near(&[], &mut |m| found.push(m), Interrupt::NEVER);
        assert_eq!(found, [0, 1, 2]);
    }
}
