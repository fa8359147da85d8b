//! The near-duplicate constraint: its limits, and [`NearSet`], the in-memory lookup its commit-time
//! recheck uses to compare a whole table against a transaction's fingerprints in one pass.

use crate::bit_deal::BitDeal64;
use crate::distance::{hamming, segment};
use crate::interrupt::Interrupt;
use crate::probes::{segment_probes, segment_radii};

/// The largest radius the constraint handles: that of the exact segment probes (a pair within
/// `k <= 11` bits shares a segment within `k / 4` bits, see [`crate::probes`]).
pub const MAX_DEDUP_RADIUS: u32 = crate::probes::MAX_PROBED_RADIUS;

/// A set of fingerprints that answers "which members are within `k` bits of `v`?" with the
/// pigeonhole rule: a member within `k` of `v` has a segment within that segment's radius of `v`'s
/// (radii adding up to `k - 3`, [`segment_radii`]; 1, 17 or 137 values per segment).
///
/// The commit-time recheck asks it once for every row of a table, so a question must cost little.
/// Each segment has a table of its 65,536 values, filed in one of two ways:
/// - while the members' probes are few (at most [`PROBES_FILED_UP_TO`] in all), each member under
///   every value within its segment's radius, so that `v` reads one value per segment;
/// - else each member under its own value (memory in proportion to the members, for a big COPY),
///   and `v` reads every value within the radius of its own.
///
/// When the members have lean bits (nearly the same in all), their segments are taken from the
/// members with their bits dealt ([`crate::bit_deal`]), and so is `v`'s.
pub struct NearSet {
    k: u32,
    fps: Vec<u64>,
    deal: Option<BitDeal64>,
    /// The values within each segment's radius of 0 (XOR with a value: those within the radius).
    masks: [Vec<u16>; 4],
    /// Members filed under the values within their radius, or else under their own value.
    probes_filed: bool,
    segments: [ValueTable; 4],
}

/// Above this many probes in all (4 bytes each), [`NearSet`] files each member under its own
/// segment values only (64 MB).
pub const PROBES_FILED_UP_TO: usize = 1 << 24;

/// Member indexes filed by 16-bit value: those of value `v` are `members[starts[v]..starts[v + 1]]`.
struct ValueTable {
    starts: Vec<u32>,
    members: Vec<u32>,
}

impl ValueTable {
    /// The table of `(value, member)` pairs, which `pairs` yields twice alike (a counting sort);
    /// `None` when memory runs out.
    fn new<I: Iterator<Item = (u16, u32)>>(pairs: impl Fn() -> I) -> Option<Self> {
        let zeros = |n: usize| {
            let mut v: Vec<u32> = Vec::new();
            v.try_reserve_exact(n).ok()?;
            v.resize(n, 0);
            Some(v)
        };
        let mut starts = zeros((1 << 16) + 1)?;
        for (value, _) in pairs() {
            starts[usize::from(value) + 1] += 1;
        }
        for v in 0..1 << 16 {
            starts[v + 1] += starts[v];
        }
        let mut next = zeros(1 << 16)?;
        next.copy_from_slice(&starts[..1 << 16]);
        let mut members = zeros(starts[1 << 16] as usize)?;
        for (value, member) in pairs() {
            let slot = &mut next[usize::from(value)];
            members[*slot as usize] = member;
            *slot += 1;
        }
        Some(ValueTable { starts, members })
    }

    fn of(&self, value: u16) -> &[u32] {
        let v = usize::from(value);
        &self.members[self.starts[v] as usize..self.starts[v + 1] as usize]
    }
}

/// Why a [`NearSet`] could not be made.
#[derive(Debug, PartialEq, Eq)]
pub enum NearSetError {
    /// `k` exceeds [`MAX_DEDUP_RADIUS`].
    RadiusOutOfRange,
    /// Its tables do not fit in memory (or the members are more than `u32::MAX`).
    OutOfMemory,
}

impl NearSet {
    pub fn new(fps: Vec<u64>, k: u32) -> Result<Self, NearSetError> {
        Self::filed(fps, k, PROBES_FILED_UP_TO)
    }

    /// [`NearSet::new`], filing the members under their probes if those are at most `limit`.
    fn filed(fps: Vec<u64>, k: u32, limit: usize) -> Result<Self, NearSetError> {
        let radii = segment_radii(k).ok_or(NearSetError::RadiusOutOfRange)?;
        u32::try_from(fps.len()).map_err(|_| NearSetError::OutOfMemory)?;
        let masks = radii.map(|radius| segment_probes(0, radius));
        let probes = masks.iter().map(|m| m.len().saturating_mul(fps.len())).fold(0, usize::saturating_add);
        let probes_filed = probes <= limit;
        // (At most bit_deal::SAMPLE members counted.)
        let deal = BitDeal64::for_values(&fps, Interrupt::NEVER);
        let dealt = |fp: u64| deal.as_ref().map_or(fp, |deal| deal.apply(fp));
        let value = |fp: u64, n: usize| segment(dealt(fp), n as i32).expect("n < 4");
        let mut segments = Vec::with_capacity(4);
        for (n, masks) in masks.iter().enumerate() {
            let members = || fps.iter().enumerate().map(move |(i, &fp)| (value(fp, n), i as u32));
            let table = if probes_filed {
                ValueTable::new(|| members().flat_map(|(v, i)| masks.iter().map(move |&m| (v ^ m, i))))
            } else {
                ValueTable::new(members)
            };
            segments.push(table.ok_or(NearSetError::OutOfMemory)?);
        }
        let segments = segments.try_into().ok().expect("four segments");
        Ok(NearSet { k, fps, deal, masks, probes_filed, segments })
    }

    pub fn fingerprints(&self) -> &[u64] {
        &self.fps
    }

    /// Calls `found(i)` for each member `fps[i]` within `k` of `v` (a member may be reported once
    /// per segment it shares); `interrupt` every [`crate::interrupt::STEP`] members compared (many
    /// members may share a segment value).
    pub fn for_each_near(&self, v: u64, found: &mut dyn FnMut(usize), interrupt: crate::Interrupt) {
        let dealt = self.deal.as_ref().map_or(v, |deal| deal.apply(v));
        let mut visited = 0usize;
        for (n, table) in self.segments.iter().enumerate() {
            let value = segment(dealt, n as i32).expect("n < 4");
            let mut visit = |probe: u16| {
                for &i in table.of(probe) {
                    visited += 1;
                    if visited.is_multiple_of(crate::interrupt::STEP) {
                        interrupt.check();
                    }
                    if hamming(self.fps[i as usize], v) <= self.k {
                        found(i as usize);
                    }
                }
            };
            if self.probes_filed {
                visit(value);
            } else {
                self.masks[n].iter().for_each(|&mask| visit(value ^ mask));
            }
        }
    }
}

/// What the deferred check decides for one row of a transaction ([`first_come`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Stored: no kept earlier row of the transaction and no row of another is within k.
    Kept,
    /// No longer stored (deleted, updated, rolled back): neither kept nor refused.
    Gone,
    /// Within k of a row of another transaction.
    NearOther,
    /// Within k of the earlier row `j` of the transaction, which is kept.
    NearEarlier(usize),
}

/// Up to this many rows, [`first_come`] compares each row with every kept one; above, it files
/// the kept rows by segment value ([`KeptRows`]).
pub const FIRST_COME_DIRECT_UP_TO: usize = 256;

/// The rows `fps` one transaction wrote, in the order it wrote them, judged as the row trigger
/// would have judged them one by one: a row is refused if it is a near-duplicate of a row of
/// another transaction (`near_other(i)`) or of an earlier row that was kept; else it is kept.
///
/// `alive(i)` says whether row `i` is still stored; it is asked only of rows that would be refused
/// and of the kept rows that would refuse them (so most rows are never asked), and a row that is
/// gone is neither kept nor refused. `near_other` is asked once per row, in order.
/// `similar(i, j)` says whether row `i` within `k` of the earlier kept row `j` is a near-duplicate
/// of it (with verification: whether their texts are similar enough; else always); it is asked
/// only of such pairs where both rows are alive, for `i` in order and then `j` in order.
///
/// Without verification the kept rows are pairwise more than `k` apart, so a row meets few of them
/// however many copies of one text the transaction wrote; with it, a row meets every kept row
/// within `k`, as the row trigger's lookup does.
///
/// `interrupt` is called every [`crate::interrupt::STEP`] kept rows compared: kept rows that share
/// a segment value (and differ elsewhere) are all compared with each row that has that value.
pub fn first_come(
    fps: &[u64],
    k: u32,
    near_other: &mut dyn FnMut(usize) -> bool,
    alive: &mut dyn FnMut(usize) -> bool,
    similar: &mut dyn FnMut(usize, usize) -> bool,
    interrupt: crate::Interrupt,
) -> Result<Vec<Verdict>, NearSetError> {
    let radii = segment_radii(k).ok_or(NearSetError::RadiusOutOfRange)?;
    let filed = if fps.len() > FIRST_COME_DIRECT_UP_TO {
        let deal = BitDeal64::for_values(fps, interrupt);
        Some(KeptRows::new(fps.len(), radii, deal)?)
    } else {
        None
    };
    let mut kept = KeptFingerprints { fps, k, filed, listed: Vec::new(), visited: 0, interrupt };
    first_come_filed(fps.len(), &mut kept, near_other, alive, similar)
}

/// Where [`first_come_filed`] files the rows it keeps, and finds them again.
pub trait KeptFiling {
    /// Files row `i`, just kept; `Err(OutOfMemory)` when memory runs out.
    fn file(&mut self, i: usize) -> Result<(), NearSetError>;
    /// Calls `found(j)` for each filed row `j` within `k` of row `i` (perhaps more than once).
    fn for_each_within(&mut self, i: usize, found: &mut dyn FnMut(usize));
}

/// [`first_come`] for `n` rows of any kind of value, whose kept rows `kept` files and finds.
pub fn first_come_filed(
    n: usize,
    kept: &mut dyn KeptFiling,
    near_other: &mut dyn FnMut(usize) -> bool,
    alive: &mut dyn FnMut(usize) -> bool,
    similar: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<Vec<Verdict>, NearSetError> {
    let mut verdicts: Vec<Verdict> = Vec::new();
    verdicts.try_reserve_exact(n).map_err(|_| NearSetError::OutOfMemory)?;
    let mut candidates: Vec<usize> = Vec::new();
    for i in 0..n {
        if near_other(i) {
            verdicts.push(if alive(i) { Verdict::NearOther } else { Verdict::Gone });
            continue;
        }
        candidates.clear();
        // (With verification, many kept rows may be within k of a row.)
        let mut refused = false;
        kept.for_each_within(i, &mut |j| {
            if verdicts[j] == Verdict::Kept && !refused {
                refused = candidates.try_reserve(1).is_err();
                if !refused {
                    candidates.push(j);
                }
            }
        });
        if refused {
            return Err(NearSetError::OutOfMemory);
        }
        let mut verdict = Verdict::Kept;
        if !candidates.is_empty() {
            candidates.sort_unstable();
            candidates.dedup();
            if !alive(i) {
                verdict = Verdict::Gone;
            } else {
                for &j in &candidates {
                    if !alive(j) {
                        // Gone after all: no longer kept (and skipped where it is filed).
                        verdicts[j] = Verdict::Gone;
                    } else if similar(i, j) {
                        verdict = Verdict::NearEarlier(j);
                        break;
                    }
                }
            }
        }
        if verdict == Verdict::Kept {
            kept.file(i)?;
        }
        verdicts.push(verdict);
    }
    Ok(verdicts)
}

/// The kept fingerprints of [`first_come`]: in a list, compared each, or past
/// [`FIRST_COME_DIRECT_UP_TO`] rows filed by segment value.
struct KeptFingerprints<'a, 'i> {
    fps: &'a [u64],
    k: u32,
    filed: Option<KeptRows>,
    listed: Vec<usize>,
    /// Kept rows compared so far, for a check every STEP of them.
    visited: usize,
    interrupt: crate::Interrupt<'i>,
}

impl KeptFiling for KeptFingerprints<'_, '_> {
    fn file(&mut self, i: usize) -> Result<(), NearSetError> {
        match &mut self.filed {
            Some(filed) => filed.insert(i, self.fps[i]),
            // (at most FIRST_COME_DIRECT_UP_TO rows)
            None => self.listed.push(i),
        }
        Ok(())
    }

    fn for_each_within(&mut self, i: usize, found: &mut dyn FnMut(usize)) {
        let (fps, k, visited, interrupt) = (self.fps, self.k, &mut self.visited, self.interrupt);
        let mut within = |j: usize| {
            #[cfg(test)]
            tests::COMPARED.with(|c| c.set(c.get() + 1));
            *visited += 1;
            if visited.is_multiple_of(crate::interrupt::STEP) {
                interrupt.check();
            }
            if hamming(fps[j], fps[i]) <= k {
                found(j)
            }
        };
        match &self.filed {
            Some(filed) => filed.for_each_candidate(fps[i], &mut within),
            None => self.listed.iter().for_each(|&j| within(j)),
        }
    }
}

/// The kept rows of [`first_come`], each filed under its own value of each segment (a list per
/// value, linked through `next`); a row asks for the values within its segments' radii. With a
/// deal, the segments are those of the rows with their bits dealt ([`crate::bit_deal`]).
struct KeptRows {
    masks: [Vec<u16>; 4],
    deal: Option<BitDeal64>,
    /// The last row filed under each value of each segment (`NONE` if none).
    heads: Vec<u32>,
    /// The row filed before row `i` under its value of segment `n`: `next[4 * i + n]`.
    next: Vec<u32>,
}

impl KeptRows {
    const NONE: u32 = u32::MAX;

    fn new(rows: usize, radii: [u32; 4], deal: Option<BitDeal64>) -> Result<Self, NearSetError> {
        let filled = |n: usize| {
            let mut v: Vec<u32> = Vec::new();
            v.try_reserve_exact(n).map_err(|_| NearSetError::OutOfMemory)?;
            v.resize(n, Self::NONE);
            Ok(v)
        };
        if rows >= Self::NONE as usize {
            return Err(NearSetError::OutOfMemory);
        }
        let rows4 = rows.checked_mul(4).ok_or(NearSetError::OutOfMemory)?;
        Ok(KeptRows {
            masks: radii.map(|radius| segment_probes(0, radius)),
            deal,
            heads: filled(4 << 16)?,
            next: filled(rows4)?,
        })
    }

    fn dealt(&self, fp: u64) -> u64 {
        self.deal.as_ref().map_or(fp, |deal| deal.apply(fp))
    }

    fn insert(&mut self, i: usize, fp: u64) {
        let fp = self.dealt(fp);
        for n in 0..4 {
            let head = &mut self.heads[(n << 16) | usize::from(segment(fp, n as i32).expect("n < 4"))];
            self.next[4 * i + n] = *head;
            *head = i as u32;
        }
    }

    /// Calls `found(j)` for each filed row that shares a segment within its radius with `fp`
    /// (possibly more than once).
    fn for_each_candidate(&self, fp: u64, found: &mut dyn FnMut(usize)) {
        let fp = self.dealt(fp);
        for (n, masks) in self.masks.iter().enumerate() {
            let value = segment(fp, n as i32).expect("n < 4");
            for &mask in masks {
                let mut j = self.heads[(n << 16) | usize::from(value ^ mask)];
                while j != Self::NONE {
                    found(j as usize);
                    j = self.next[4 * j as usize + n];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// The kept rows this thread's `first_come` compared with a row.
        pub static COMPARED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Memory refused to file a kept row stops the judgement with `OutOfMemory` (the SQL layer's
    /// 53200), not an abort.
    #[test]
    fn first_come_stops_when_filing_runs_out_of_memory() {
        struct Refusing;
        impl KeptFiling for Refusing {
            fn file(&mut self, _: usize) -> Result<(), NearSetError> {
                Err(NearSetError::OutOfMemory)
            }
            fn for_each_within(&mut self, _: usize, _: &mut dyn FnMut(usize)) {}
        }
        let verdicts = first_come_filed(3, &mut Refusing, &mut |_| false, &mut |_| true, &mut |_, _| true);
        assert_eq!(verdicts, Err(NearSetError::OutOfMemory));
    }

    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Equal to a linear scan for every radius, on members and on flipped variants of them.
    #[test]
    fn near_set_matches_a_linear_scan() {
        let mut state = 7;
        let fps: Vec<u64> = (0..300).map(|_| next(&mut state)).collect();
        for (k, limit) in (0..=MAX_DEDUP_RADIUS).flat_map(|k| [(k, PROBES_FILED_UP_TO), (k, 0)]) {
            // Both ways of filing the members: under their probes, and (limit 0) under their values.
            let set = NearSet::filed(fps.clone(), k, limit).unwrap();
            assert_eq!(set.probes_filed, limit > 0);
            for q in 0..200 {
                let mut v = fps[q % fps.len()];
                for _ in 0..(next(&mut state) % 13) {
                    v ^= 1 << (next(&mut state) % 64);
                }
                let mut got = Vec::new();
                set.for_each_near(v, &mut |i| got.push(i), crate::Interrupt::NEVER);
                got.sort_unstable();
                got.dedup();
                let want: Vec<usize> = (0..fps.len()).filter(|&i| hamming(fps[i], v) <= k).collect();
                assert_eq!(got, want, "k = {k}, limit {limit}");
            }
        }
        assert_eq!(NearSet::new(fps, MAX_DEDUP_RADIUS + 1).err(), Some(NearSetError::RadiusOutOfRange));
        // No members, and members twice.
        let set = NearSet::new(Vec::new(), 11).unwrap();
        set.for_each_near(5, &mut |_| panic!("no members"), crate::Interrupt::NEVER);
        for limit in [PROBES_FILED_UP_TO, 0] {
            let set = NearSet::filed(vec![9, 9, 0xFFFF_FFFF_FFFF_0000], 3, limit).unwrap();
            let mut got = Vec::new();
            set.for_each_near(8, &mut |i| got.push(i), crate::Interrupt::NEVER);
            got.sort_unstable();
            got.dedup();
            assert_eq!(got, vec![0, 1]);
            // Segment values 0 and 0xFFFF at k = 11 (probes that wrap around neither end).
            let set = NearSet::filed(vec![0, u64::MAX, 0x0000_FFFF_0000_FFFF], 11, limit).unwrap();
            for (v, want) in [(0x7FFu64, vec![0]), (!0x7FFu64, vec![1]), (0x0000_FFFF_0000_FF00, vec![2])] {
                let mut got = Vec::new();
                set.for_each_near(v, &mut |i| got.push(i), crate::Interrupt::NEVER);
                got.sort_unstable();
                got.dedup();
                assert_eq!(got, want, "v {v:x} limit {limit}");
            }
        }
    }

    /// The rows judged one by one with every row's state known up front (`similar`: whether two
    /// rows within k are near-duplicates, by their text class).
    fn first_come_eagerly(
        fps: &[u64],
        k: u32,
        near_other: &[bool],
        alive: &[bool],
        similar: &dyn Fn(usize, usize) -> bool,
    ) -> Vec<Verdict> {
        let mut verdicts = Vec::new();
        for (i, &fp) in fps.iter().enumerate() {
            let earlier = (0..i).find(|&j| verdicts[j] == Verdict::Kept && hamming(fps[j], fp) <= k && similar(i, j));
            verdicts.push(match (alive[i], near_other[i], earlier) {
                (false, _, _) => Verdict::Gone,
                (true, true, _) => Verdict::NearOther,
                (true, false, Some(j)) => Verdict::NearEarlier(j),
                (true, false, None) => Verdict::Kept,
            });
        }
        verdicts
    }

    /// Equal to judging every row eagerly, for rows that are still stored; a gone row is never
    /// refused; only rows that would be refused, or would refuse, are asked whether they are alive.
    /// `n` fingerprints in clusters of near ones: `bases` random bases, each row a base with up to
    /// `k + 2` bits flipped.
    fn clustered(state: &mut u64, n: usize, bases: usize, k: u32) -> Vec<u64> {
        let bases: Vec<u64> = (0..bases).map(|_| next(state)).collect();
        (0..n)
            .map(|_| {
                let mut fp = bases[next(state) as usize % bases.len()];
                for _ in 0..next(state) % (u64::from(k) + 3) {
                    fp ^= 1 << (next(state) % 64);
                }
                fp
            })
            .collect()
    }

    #[test]
    fn first_come_judges_rows_in_order() {
        let mut state = 11;
        for (n, k) in [(0, 3), (1, 0), (40, 3), (200, 11), (256, 7), (257, 7), (1500, 11), (3000, 3)] {
            let fps = clustered(&mut state, n, n / 8 + 1, k);
            let near_other: Vec<bool> = (0..n).map(|_| next(&mut state).is_multiple_of(10)).collect();
            let alive: Vec<bool> = (0..n).map(|_| !next(&mut state).is_multiple_of(7)).collect();
            let mut asked = vec![false; n];
            let got = first_come(
                &fps,
                k,
                &mut |i| near_other[i],
                &mut |i| {
                    asked[i] = true;
                    alive[i]
                },
                &mut |_, _| true,
                crate::Interrupt::NEVER,
            )
            .unwrap();
            let want = first_come_eagerly(&fps, k, &near_other, &alive, &|_, _| true);
            for i in 0..n {
                if alive[i] {
                    assert_eq!(got[i], want[i], "row {i} of {n}, k = {k}");
                } else {
                    assert!(matches!(got[i], Verdict::Gone | Verdict::Kept), "row {i} of {n}: {:?}", got[i]);
                }
                if !near_other[i] && !(0..n).any(|j| j != i && hamming(fps[j], fps[i]) <= k) {
                    assert!(!asked[i], "row {i} of {n} was asked without a reason");
                }
            }
            if n > 0 {
                assert!(got.iter().any(|v| matches!(v, Verdict::NearEarlier(_))) || n < 40, "n {n}");
            }
        }
        assert_eq!(
            first_come(
                &[1],
                MAX_DEDUP_RADIUS + 1,
                &mut |_| false,
                &mut |_| true,
                &mut |_, _| true,
                crate::Interrupt::NEVER
            ),
            Err(NearSetError::RadiusOutOfRange)
        );
        // 100,000 copies of one fingerprint and of a near one (a dedup feed): the first is kept and
        // refuses the rest, each checked against the one kept row (not against every copy before
        // it); with the first gone, the second is kept.
        let copies: Vec<u64> = (0..100_000u64).map(|i| if i % 2 == 0 { 0xABCD } else { 0xABCF }).collect();
        for first_alive in [true, false] {
            let mut asked = 0usize;
            let verdicts = first_come(
                &copies,
                11,
                &mut |_| false,
                &mut |i| {
                    asked += 1;
                    i != 0 || first_alive
                },
                &mut |_, _| true,
                crate::Interrupt::NEVER,
            )
            .unwrap();
            let first = if first_alive { 0 } else { 1 };
            assert_eq!(verdicts[first], Verdict::Kept);
            assert!(verdicts[first + 1..].iter().all(|v| *v == Verdict::NearEarlier(first)));
            assert!(asked <= 2 * copies.len() + 1, "{asked}");
        }
        // Copies: the first is kept, each later one refused by it; once it is gone, the second is kept.
        let verdicts =
            first_come(&[5, 5, 5], 0, &mut |_| false, &mut |_| true, &mut |_, _| true, crate::Interrupt::NEVER)
                .unwrap();
        assert_eq!(verdicts, vec![Verdict::Kept, Verdict::NearEarlier(0), Verdict::NearEarlier(0)]);
        let verdicts =
            first_come(&[5, 5, 5], 0, &mut |_| false, &mut |i| i != 0, &mut |_, _| true, crate::Interrupt::NEVER)
                .unwrap();
        assert_eq!(verdicts, vec![Verdict::Gone, Verdict::Kept, Verdict::NearEarlier(1)]);
    }

    /// 50-bit values (the top 14 bits zero in all), every tenth a near copy of the one before.
    fn short_values(state: &mut u64, n: usize) -> Vec<u64> {
        let mut fps: Vec<u64> = Vec::with_capacity(n);
        for g in 1..=n as u64 {
            let fp = match fps.last() {
                Some(&last) if g % 10 == 0 => last ^ (1 << (next(state) % 50)) ^ (1 << (next(state) % 50)),
                _ => g.wrapping_mul(2_654_435_761) & ((1 << 50) - 1),
            };
            fps.push(fp);
        }
        fps
    }

    /// Values whose first segment takes 4 values: with their bits dealt, a row meets a few kept
    /// rows, not a quarter of them; the verdicts and the near set's answers are those of a scan.
    #[test]
    fn lean_bits_are_dealt_apart() {
        let mut state = 17;
        let fps = short_values(&mut state, 20_000);
        COMPARED.with(|c| c.set(0));
        let got = first_come(&fps, 3, &mut |_| false, &mut |_| true, &mut |_, _| true, Interrupt::NEVER).unwrap();
        // (13 a row; 8,925 without the deal, the first segment taking 4 values.)
        let compared = COMPARED.with(|c| c.get());
        assert!(compared < 100 * fps.len(), "{compared} kept rows compared");
        assert!(got.iter().filter(|v| matches!(v, Verdict::NearEarlier(_))).count() >= fps.len() / 10 - 1);
        let n = 4_000;
        let near_other = vec![false; n];
        let alive = vec![true; n];
        assert_eq!(got[..n], first_come_eagerly(&fps[..n], 3, &near_other, &alive, &|_, _| true)[..]);

        let members = fps[..n].to_vec();
        for limit in [PROBES_FILED_UP_TO, 0] {
            let set = NearSet::filed(members.clone(), 3, limit).unwrap();
            assert!(set.deal.is_some());
            for &v in fps[n - 100..n + 100].iter() {
                let mut got = Vec::new();
                set.for_each_near(v, &mut |i| got.push(i), Interrupt::NEVER);
                got.sort_unstable();
                got.dedup();
                let want: Vec<usize> = (0..n).filter(|&i| hamming(members[i], v) <= 3).collect();
                assert_eq!(got, want);
            }
        }
    }

    /// Rows that share a segment value and are all kept (more than k apart elsewhere): each meets
    /// every earlier one of its half, and the checks come every STEP kept rows compared, not every
    /// row. (The two halves' first segments are complements, 0x5555 and 0xAAAA: no bit is lean, so
    /// no deal moves them apart.)
    #[test]
    fn kept_rows_sharing_a_segment_are_interruptible() {
        use crate::interrupt::{tests::run_stopping, STEP};
        let mut state = 5;
        let n = 2000;
        let half = |i: usize| if i.is_multiple_of(2) { 0x5555u64 << 48 } else { 0xAAAAu64 << 48 };
        let fps: Vec<u64> = (0..n).map(|i| half(i) | next(&mut state) & 0x0000_FFFF_FFFF_FFFF).collect();
        let compared = n / 2 * (n / 2 - 1);
        let (stopped, calls) = run_stopping(usize::MAX, |i| {
            let verdicts = first_come(&fps, 3, &mut |_| false, &mut |_| true, &mut |_, _| true, i).unwrap();
            assert!(verdicts.iter().all(|v| *v == Verdict::Kept));
        });
        assert!(!stopped && calls >= compared / STEP, "{calls} checks for {compared} comparisons");
        // The pending set of a commit: one value that shares segment 0 with 3 STEP of its 6 STEP
        // members.
        let members: Vec<u64> =
            (0..6 * STEP).map(|i| half(i) | (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16).collect();
        let set = NearSet::new(members, 3).unwrap();
        let (stopped, calls) = run_stopping(usize::MAX, |i| set.for_each_near(half(0) | 1 << 40, &mut |_| {}, i));
        assert!(!stopped && calls == 3, "{calls} checks");
    }

    /// With verification: a row within k of an earlier kept row is refused only if `similar` says
    /// so (here: the same text class), as judged eagerly; `similar` is asked only of alive pairs
    /// within k, the later row first; kept rows may then be within k of each other.
    #[test]
    fn first_come_verified_judges_rows_in_order() {
        let mut state = 13;
        for (n, k) in [(1, 0), (60, 3), (300, 7), (2000, 11)] {
            let fps = clustered(&mut state, n, n / 10 + 1, k);
            let class: Vec<u64> = (0..n).map(|_| next(&mut state) % 3).collect();
            let near_other: Vec<bool> = (0..n).map(|_| next(&mut state).is_multiple_of(10)).collect();
            let alive: Vec<bool> = (0..n).map(|_| !next(&mut state).is_multiple_of(7)).collect();
            let similar = |i: usize, j: usize| class[i] == class[j];
            let got = first_come(
                &fps,
                k,
                &mut |i| near_other[i],
                &mut |i| alive[i],
                &mut |i, j| {
                    assert!(j < i && alive[i] && alive[j] && hamming(fps[i], fps[j]) <= k, "asked ({i}, {j})");
                    similar(i, j)
                },
                crate::Interrupt::NEVER,
            )
            .unwrap();
            let want = first_come_eagerly(&fps, k, &near_other, &alive, &similar);
            for i in (0..n).filter(|&i| alive[i]) {
                assert_eq!(got[i], want[i], "row {i} of {n}, k = {k}");
            }
            if n >= 300 {
                let kept_near = (0..n).any(|i| {
                    got[i] == Verdict::Kept
                        && alive[i]
                        && (0..i).any(|j| got[j] == Verdict::Kept && alive[j] && hamming(fps[i], fps[j]) <= k)
                });
                assert!(kept_near, "n {n}: no kept rows within k of each other (dissimilar texts)");
                assert!(got.iter().any(|v| matches!(v, Verdict::NearEarlier(_))), "n {n}");
            }
        }
    }
}
