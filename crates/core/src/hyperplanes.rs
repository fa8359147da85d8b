//! Random-hyperplane SimHash of an embedding (Charikar 2002, "Similarity estimation techniques from
//! rounding algorithms"): bit i of the code of a vector v is 1 iff v lies on the non-negative side
//! of a random hyperplane through the origin, `dot(v, h_i) >= 0`. For two vectors at angle θ, a
//! hyperplane whose normal is isotropic (i.i.d. standard normal entries) separates them with
//! probability exactly θ / π, so the Hamming distance of two b-bit codes is Binomial(b, θ / π) and
//! Hamming / b estimates θ / π ([`cosine_radius`] turns a cosine threshold into a radius).
//!
//! Codes are stored data, so everything here is pinned down to the bit and does not depend on the
//! platform's libm, on CPU features or on the order a compiler might choose:
//!
//! - **Entries.** `h_i[j]` depends on `(seed, i, j)` only (not on the dimension or the code length:
//!   the code of b bits is the first b bits of any longer code, and a vector padded with zeros
//!   keeps its code). Counter-based, from splitmix64's output function `next(x)` =
//!   `mix(x + 0x9e3779b97f4a7c15)` (`mix`: Stafford's 64-bit finaliser "Mix13", as in splitmix64):
//!   `key = next(seed ^ KEY_DOMAIN)`, `row_i = next(key ^ i)`, `w(i, n) = next(row_i ^ n)`.
//!   The pair `(h_i[2m], h_i[2m + 1])` is Box-Muller of the words `w(i, 2m)` and `w(i, 2m + 1)`:
//!   `u1 = (top 53 bits of w(i, 2m) + 1) / 2^53` in (0, 1], `u2 = (top 53 bits of w(i, 2m + 1)) / 2^53`
//!   in [0, 1), `r = sqrt(-2 ln u1)`, `t = 2π u2` (`std::f64::consts::TAU * u2`),
//!   `h_i[2m] = r cos t`, `h_i[2m + 1] = r sin t`, each rounded to the nearest `f32`. `ln`, `cos`
//!   and `sin` are the `libm` crate's (musl's algorithms, in pure Rust, binary64); `sqrt` and the
//!   arithmetic are IEEE 754 operations, rounded the same on every platform.
//! - **Dot products.** `s_i = Σ_j (v_j as f64) * (h_i[j] as f64)`, added in f64 in the order
//!   j = 0, 1, ..., d - 1 from +0. Each product of two f32 values is exact in f64 (24 + 24 < 53
//!   significant bits), so the only roundings are the additions, in that fixed order. (The code
//!   below computes 8 planes at once, one accumulator each: every plane's sum is still added in
//!   the order of j, so vectorising across planes does not change a bit. Rust never fuses a
//!   multiplication and an addition into an FMA by itself.)
//! - **Signs.** Bit i is 1 iff `s_i >= 0`: a sum of exactly zero (either sign) gives 1. The zero
//!   vector (every element +0 or -0) has no direction and no code ([`None`], NULL in SQL), as a
//!   text without features has no fingerprint. A positive multiple of v has the same direction
//!   and, up to rounding in planes v nearly lies in, the same code (exactly the same when the
//!   factor is a power of 2).
//! - **Order.** Bit 0 is the most significant: byte 0 holds bits 0-7, its high bit first (as
//!   PostgreSQL's `bit(n)` and the `simhash64 <-> bit(64)` cast list them); the unused low bits of
//!   the last byte are 0.
//!
//! Cost: generating a matrix of b x d entries is about 20 ns per entry; a code is b x d
//! multiply-adds. [`PlaneCache`] keeps generated matrices up to a bound, so that a backend
//! generates each one once; a matrix beyond the bound is generated block by block for every
//! vector ([`code_uncached`]), slow but in bounded memory.

use crate::interrupt::Interrupt;
use std::rc::Rc;

/// The longest code, in bits.
pub const MAX_BITS: usize = 4096;
/// The largest dimension accepted (pgvector's `vector` has at most 16,000).
pub const MAX_DIMENSIONS: usize = 65_536;
/// Planes computed together (one f64 accumulator each); a matrix is stored in blocks of this many
/// planes, padded with the next planes of the same seed.
pub const LANES: usize = 8;
/// The default bound of [`PlaneCache`]: 64 MiB of entries (4 bytes each), enough for 1,024 planes of
/// 16,000 dimensions or 4,096 planes of 4,096 dimensions.
pub const CACHE_BYTES: usize = 64 << 20;

/// Mixed into the seed so that these planes share no stream with another use of splitmix64
/// (the ASCII bytes of "hyperpln").
const KEY_DOMAIN: u64 = 0x6879_7065_7270_6c6e;
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// What is wrong with an embedding or a code length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EmbeddingError {
    /// No elements.
    Empty,
    /// More than [`MAX_DIMENSIONS`] elements (the count).
    TooManyDimensions(usize),
    /// NaN or an infinity at this (0-based) position.
    NotFinite(usize),
    /// A code length outside 1..=[`MAX_BITS`].
    BadBits(i64),
}

/// Stafford's "Mix13" finaliser, the output function of splitmix64 (a bijection of u64).
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// splitmix64's output for the state `x` (never maps 0 to 0, unlike `mix`).
#[inline]
fn next(x: u64) -> u64 {
    mix(x.wrapping_add(GAMMA))
}

/// The key of plane `i` of `seed`: the words of its entries are `next(row ^ n)`.
#[inline]
fn row_key(seed: u64, i: usize) -> u64 {
    next(next(seed ^ KEY_DOMAIN) ^ i as u64)
}

/// Box-Muller: two independent standard normal values from two independent uniform words.
#[inline]
fn normal_pair(w1: u64, w2: u64) -> (f32, f32) {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    let u1 = ((w1 >> 11) + 1) as f64 * SCALE; // (0, 1]: ln(u1) is finite
    let u2 = (w2 >> 11) as f64 * SCALE; // [0, 1)
    let r = (-2.0 * libm::log(u1)).sqrt();
    let t = std::f64::consts::TAU * u2;
    ((r * libm::cos(t)) as f32, (r * libm::sin(t)) as f32)
}

/// Entry j of plane i of `seed`: the definition every matrix follows (see the module documentation).
pub fn plane_entry(seed: u64, i: usize, j: usize) -> f32 {
    let row = row_key(seed, i);
    let m = (j / 2) as u64;
    let (even, odd) = normal_pair(next(row ^ (2 * m)), next(row ^ (2 * m + 1)));
    if j.is_multiple_of(2) {
        even
    } else {
        odd
    }
}

/// Writes planes `first .. first + LANES` of `seed` over `dims` dimensions into `block`
/// (`dims * LANES` entries, laid out `[j][lane]`).
fn fill_block(seed: u64, first: usize, dims: usize, block: &mut [f32]) {
    debug_assert_eq!(block.len(), dims * LANES);
    for lane in 0..LANES {
        let row = row_key(seed, first + lane);
        for m in 0..dims.div_ceil(2) {
            let (even, odd) = normal_pair(next(row ^ (2 * m as u64)), next(row ^ (2 * m as u64 + 1)));
            block[2 * m * LANES + lane] = even;
            if 2 * m + 1 < dims {
                block[(2 * m + 1) * LANES + lane] = odd;
            }
        }
    }
}

/// The sums `s_i` of the [`LANES`] planes of `block` (each added in the order of j, from +0).
#[inline]
fn block_sums(v: &[f32], block: &[f32]) -> [f64; LANES] {
    let mut acc = [0.0f64; LANES];
    for (x, h) in v.iter().zip(block.chunks_exact(LANES)) {
        let x = *x as f64;
        for lane in 0..LANES {
            acc[lane] += x * h[lane] as f64;
        }
    }
    acc
}

/// Sets the bits of `sums` that are `>= 0` into `code` (bit `first + lane`, most significant first),
/// up to bit `bits - 1`.
fn set_bits(code: &mut [u8], first: usize, bits: usize, sums: &[f64; LANES]) {
    for (lane, s) in sums.iter().enumerate() {
        let i = first + lane;
        if i < bits && *s >= 0.0 {
            code[i / 8] |= 0x80 >> (i % 8);
        }
    }
}

/// Checks an embedding: not empty, at most [`MAX_DIMENSIONS`], every element finite. `Ok(false)`
/// for the zero vector, which has no code.
pub fn check_vector(v: &[f32]) -> Result<bool, EmbeddingError> {
    if v.is_empty() {
        return Err(EmbeddingError::Empty);
    }
    if v.len() > MAX_DIMENSIONS {
        return Err(EmbeddingError::TooManyDimensions(v.len()));
    }
    if let Some(j) = v.iter().position(|x| !x.is_finite()) {
        return Err(EmbeddingError::NotFinite(j));
    }
    Ok(v.iter().any(|x| *x != 0.0))
}

/// Checks a code length (1 to [`MAX_BITS`]).
pub fn check_bits(bits: i64) -> Result<usize, EmbeddingError> {
    match usize::try_from(bits) {
        Ok(b) if (1..=MAX_BITS).contains(&b) => Ok(b),
        _ => Err(EmbeddingError::BadBits(bits)),
    }
}

/// The first `bits` planes (rounded up to a whole block) of `seed` over `dims` dimensions.
pub struct Planes {
    seed: u64,
    dims: usize,
    blocks: usize,
    /// `blocks` blocks of `dims * LANES` entries, each laid out `[j][lane]`.
    entries: Vec<f32>,
}

impl Planes {
    /// Generates the matrix, checking for interrupts once per block; `None` when the memory for
    /// it cannot be had (the caller then computes the code block by block, [`code_uncached`]).
    pub fn new(seed: u64, dims: usize, bits: usize, interrupt: Interrupt<'_>) -> Option<Planes> {
        let blocks = bits.div_ceil(LANES);
        let len = blocks * dims * LANES;
        let mut entries = Vec::new();
        entries.try_reserve_exact(len).ok()?;
        entries.resize(len, 0.0f32);
        for (k, block) in entries.chunks_exact_mut(dims * LANES).enumerate() {
            interrupt.check();
            fill_block(seed, k * LANES, dims, block);
        }
        Some(Planes { seed, dims, blocks, entries })
    }

    /// Bytes of entries a matrix of `bits` planes of `dims` dimensions takes.
    pub fn bytes(dims: usize, bits: usize) -> usize {
        bits.div_ceil(LANES) * LANES * dims * std::mem::size_of::<f32>()
    }

    /// The number of planes held (a multiple of [`LANES`]).
    pub fn bits(&self) -> usize {
        self.blocks * LANES
    }

    /// The code of `v` (`v.len()` must be the matrix's dimension, `bits` at most [`Planes::bits`]):
    /// `bits.div_ceil(8)` bytes, most significant first; `None` for the zero vector. Checks for
    /// interrupts once per block of planes.
    pub fn code(&self, v: &[f32], bits: usize, interrupt: Interrupt<'_>) -> Option<Vec<u8>> {
        assert!(v.len() == self.dims && bits <= self.bits(), "a matrix of another shape");
        if v.iter().all(|x| *x == 0.0) {
            return None;
        }
        let mut code = vec![0u8; bits.div_ceil(8)];
        for (k, block) in self.entries.chunks_exact(self.dims * LANES).take(bits.div_ceil(LANES)).enumerate() {
            interrupt.check();
            set_bits(&mut code, k * LANES, bits, &block_sums(v, block));
        }
        Some(code)
    }
}

/// The code of `v` without a stored matrix: each block of planes is generated, used and dropped
/// (memory: one block, `8 * v.len()` entries; time: the generation, about 20 ns per entry, for
/// every vector). The same bits as [`Planes::code`].
pub fn code_uncached(seed: u64, v: &[f32], bits: usize, interrupt: Interrupt<'_>) -> Option<Vec<u8>> {
    if v.iter().all(|x| *x == 0.0) {
        return None;
    }
    let mut code = vec![0u8; bits.div_ceil(8)];
    let mut block = vec![0.0f32; v.len() * LANES];
    for k in 0..bits.div_ceil(LANES) {
        interrupt.check();
        fill_block(seed, k * LANES, v.len(), &mut block);
        set_bits(&mut code, k * LANES, bits, &block_sums(v, &block));
    }
    Some(code)
}

/// Generated matrices kept for reuse, at most `capacity` bytes of entries in all, least recently
/// used dropped first. A matrix serves every code length up to its own (codes are prefixes of
/// longer codes), so one of (seed, d) is kept, with the most planes asked for so far.
pub struct PlaneCache {
    capacity: usize,
    /// Most recently used last.
    entries: Vec<Rc<Planes>>,
}

impl PlaneCache {
    pub const fn new(capacity: usize) -> PlaneCache {
        PlaneCache { capacity, entries: Vec::new() }
    }

    /// The matrix for `bits` planes of `seed` over `dims` dimensions, generated if no kept matrix
    /// has them; `None` when it would take more than the capacity or its memory cannot be had (use
    /// [`code_uncached`]). The cache changes only once a new matrix is complete, so an interrupt
    /// leaves it as it was.
    pub fn get(&mut self, seed: u64, dims: usize, bits: usize, interrupt: Interrupt<'_>) -> Option<Rc<Planes>> {
        if let Some(at) = self.entries.iter().position(|p| p.seed == seed && p.dims == dims && p.bits() >= bits) {
            let planes = self.entries.remove(at);
            self.entries.push(planes.clone());
            return Some(planes);
        }
        let bytes = Planes::bytes(dims, bits);
        if bytes > self.capacity {
            return None;
        }
        let planes = Rc::new(Planes::new(seed, dims, bits, interrupt)?);
        self.entries.retain(|p| !(p.seed == seed && p.dims == dims));
        while self.bytes() + bytes > self.capacity {
            self.entries.remove(0);
        }
        self.entries.push(planes.clone());
        Some(planes)
    }

    /// Bytes of entries kept.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|p| Planes::bytes(p.dims, p.bits())).sum()
    }
}

/// The code of `v`, through `cache` when the matrix fits in it (see [`PlaneCache::get`]).
pub fn code(cache: &mut PlaneCache, seed: u64, v: &[f32], bits: usize, interrupt: Interrupt<'_>) -> Option<Vec<u8>> {
    match cache.get(seed, v.len(), bits, interrupt) {
        Some(planes) => planes.code(v, bits, interrupt),
        None => code_uncached(seed, v, bits, interrupt),
    }
}

/// What is wrong with the arguments of [`cosine_radius`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RadiusError {
    /// The cosine is not a number from -1 to 1.
    Cosine,
    /// The code length is not 1 to [`MAX_BITS`].
    Bits,
    /// The recall is not a number above 0 and below 1.
    Recall,
}

/// The radius to search `bits`-bit codes with, for pairs of vectors of cosine similarity at least
/// `cosine`: the smallest k with P[Binomial(bits, p) <= k] >= `recall`, where p = arccos(cosine) / π
/// is the probability that one plane separates two vectors at exactly that cosine (pairs of higher
/// cosine are found with a higher probability). The binomial terms are computed in log space
/// (no underflow at 4,096 bits) with the `libm` crate, so the result is the same everywhere.
pub fn cosine_radius(cosine: f64, bits: i64, recall: f64) -> Result<u32, RadiusError> {
    if !(-1.0..=1.0).contains(&cosine) {
        return Err(RadiusError::Cosine);
    }
    let b = check_bits(bits).map_err(|_| RadiusError::Bits)? as u32;
    if !(recall > 0.0 && recall < 1.0) {
        return Err(RadiusError::Recall);
    }
    let p = libm::acos(cosine) / std::f64::consts::PI;
    if p <= 0.0 {
        return Ok(0);
    }
    if p >= 1.0 {
        return Ok(b);
    }
    // P[X = k] for k = 0..=b, from ln P[X = 0] = b ln(1 - p) by the ratio
    // (b - k) / (k + 1) * p / (1 - p).
    let odds = libm::log(p) - libm::log1p(-p);
    let mut ln_term = b as f64 * libm::log1p(-p);
    let mut terms = Vec::with_capacity(b as usize + 1);
    for k in 0..=b {
        terms.push(libm::exp(ln_term));
        ln_term += libm::log((b - k) as f64 / (k + 1) as f64) + odds;
    }
    if recall <= 0.5 {
        // The lower tail, summed from k = 0: P[X <= k] >= recall.
        let mut cdf = 0.0;
        for (k, term) in terms.iter().enumerate() {
            cdf += term;
            if cdf >= recall {
                return Ok(k as u32);
            }
        }
        return Ok(b);
    }
    // A recall near 1: the upper tail, summed from k = b, P[X > k] <= 1 - recall (exact for a
    // recall of 0.5 or more). A sum from below rounds to within about 1e-13 of 1 at 4,096 bits and
    // never reached a recall beyond that (the radius came out as b, or short of the quantile).
    let miss = 1.0 - recall;
    let mut above = 0.0; // P[X > k]
    let mut k = b;
    while k > 0 && above + terms[k as usize] <= miss {
        above += terms[k as usize];
        k -= 1;
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interrupt::tests::run_stopping;
    use crate::test_values::Lcg;

    const NEVER: Interrupt<'static> = Interrupt::NEVER;

    fn hex(code: &[u8]) -> String {
        code.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn hamming(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    fn angle(a: &[f64], b: &[f64]) -> f64 {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        (dot / (norm(a) * norm(b))).clamp(-1.0, 1.0).acos()
    }

    fn f32s(v: &[f64]) -> Vec<f32> {
        v.iter().map(|x| *x as f32).collect()
    }

    /// The generator is a stored format: these entries (their f32 bit patterns) must never change.
    #[test]
    fn golden_plane_entries() {
        let entries: Vec<u32> =
            [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 63, 383), (7, 0, 0), (-1i64 as u64, 4095, 65535)]
                .iter()
                .map(|&(seed, i, j)| plane_entry(seed, i, j).to_bits())
                .collect();
        assert_eq!(entries, GOLDEN_ENTRIES, "{entries:#010x?}");
    }
    const GOLDEN_ENTRIES: [u32; 7] =
        [0xbfe77b6c, 0x3f995c49, 0x3f19586d, 0xbe537ae9, 0xbfc8d68a, 0xbf85a90e, 0x3e7ff13a];

    /// Fixed vectors -> fixed codes (the same values the SQL golden test expects).
    #[test]
    fn golden_codes() {
        let v3 = [1.0f32, 2.0, 3.0];
        let ramp: Vec<f32> = (0..384).map(|j| ((j % 17) as f32 - 8.0) / 8.0).collect();
        let mut cache = PlaneCache::new(CACHE_BYTES);
        let got = [
            hex(&code(&mut cache, 0, &v3, 64, NEVER).unwrap()),
            hex(&code(&mut cache, 42, &v3, 64, NEVER).unwrap()),
            hex(&code(&mut cache, 0, &[-1.0, -2.0, -3.0], 64, NEVER).unwrap()),
            hex(&code(&mut cache, 0, &ramp, 64, NEVER).unwrap()),
            hex(&code(&mut cache, 0, &ramp, 12, NEVER).unwrap()),
            hex(&code(&mut cache, 0, &[0.5], 8, NEVER).unwrap()),
        ];
        assert_eq!(got, GOLDEN_CODES, "{got:?}");
    }
    const GOLDEN_CODES: [&str; 6] =
        ["aaea1d2fcfbe23af", "0887f56e61ef5437", "5515e2d03041dc50", "4d1120f121c4faef", "4d10", "26"];

    #[test]
    fn entries_are_standard_normal() {
        // 200,000 entries of several planes and seeds: mean 0, variance 1, the tails of N(0, 1).
        let values: Vec<f64> =
            (0..100).flat_map(|i| (0..2000).map(move |j| plane_entry(i as u64 % 3, i, j) as f64)).collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let beyond2 = values.iter().filter(|x| x.abs() > 2.0).count() as f64 / n; // 0.0455
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "variance {var}");
        assert!((beyond2 - 0.0455).abs() < 0.003, "P[|x| > 2] = {beyond2}");
        // Neighbouring entries (a Box-Muller pair) and rows are uncorrelated.
        let corr = |a: &dyn Fn(usize) -> f32, b: &dyn Fn(usize) -> f32| {
            (0..50_000).map(|k| a(k) as f64 * b(k) as f64).sum::<f64>() / 50_000.0
        };
        assert!(corr(&|k| plane_entry(0, 0, 2 * k), &|k| plane_entry(0, 0, 2 * k + 1)).abs() < 0.02);
        assert!(corr(&|k| plane_entry(0, 0, k), &|k| plane_entry(0, 1, k)).abs() < 0.02);
        assert!(corr(&|k| plane_entry(0, 0, k), &|k| plane_entry(1, 0, k)).abs() < 0.02);
    }

    #[test]
    fn matrix_cached_and_uncached_and_entrywise_agree() {
        let mut rng = Lcg(5);
        for (dims, bits) in [(1, 1), (3, 64), (17, 13), (100, 256), (385, 1000)] {
            let v = f32s(&rng.gaussian(dims));
            let planes = Planes::new(9, dims, bits, NEVER).unwrap();
            let cached = planes.code(&v, bits, NEVER).unwrap();
            assert_eq!(cached, code_uncached(9, &v, bits, NEVER).unwrap());
            // The definition, one plane at a time.
            let mut naive = vec![0u8; bits.div_ceil(8)];
            for i in 0..bits {
                let s = (0..dims).fold(0.0f64, |s, j| s + v[j] as f64 * plane_entry(9, i, j) as f64);
                if s >= 0.0 {
                    naive[i / 8] |= 0x80 >> (i % 8);
                }
            }
            assert_eq!(cached, naive, "d = {dims}, b = {bits}");
        }
    }

    #[test]
    fn shorter_codes_are_prefixes_and_zero_padding_is_neutral() {
        let mut rng = Lcg(11);
        let v = f32s(&rng.gaussian(50));
        let long = code_uncached(3, &v, 1024, NEVER).unwrap();
        for bits in [1, 7, 8, 9, 64, 100, 1023] {
            let short = code_uncached(3, &v, bits, NEVER).unwrap();
            let mut prefix = long[..bits.div_ceil(8)].to_vec();
            if bits % 8 != 0 {
                *prefix.last_mut().unwrap() &= 0xff << (8 - bits % 8);
            }
            assert_eq!(short, prefix, "b = {bits}");
        }
        let mut padded = v.clone();
        padded.extend([0.0, -0.0, 0.0]);
        assert_eq!(code_uncached(3, &padded, 1024, NEVER).unwrap(), long);
        // Scaling by a power of 2 keeps every bit; the opposite vector flips every bit
        // (unless a sum is exactly 0).
        let doubled: Vec<f32> = v.iter().map(|x| x * 2.0).collect();
        assert_eq!(code_uncached(3, &doubled, 1024, NEVER).unwrap(), long);
        let negated: Vec<f32> = v.iter().map(|x| -x).collect();
        assert_eq!(hamming(&code_uncached(3, &negated, 1024, NEVER).unwrap(), &long), 1024);
    }

    #[test]
    fn zero_sums_and_the_zero_vector() {
        assert_eq!(code_uncached(0, &[0.0, -0.0], 64, NEVER), None);
        assert_eq!(Planes::new(0, 3, 64, NEVER).unwrap().code(&[0.0; 3], 64, NEVER), None);
        assert_eq!(check_vector(&[0.0, -0.0]), Ok(false));
        // A sum of exactly 0 gives 1: v = (h_0[1], -h_0[0]) is orthogonal to plane 0, and its two
        // products are exact and opposite.
        let (a, b) = (plane_entry(0, 0, 0), plane_entry(0, 0, 1));
        let v = [b, -a];
        let w = [-b, a];
        assert_eq!(code_uncached(0, &v, 1, NEVER).unwrap(), vec![0x80]);
        assert_eq!(code_uncached(0, &w, 1, NEVER).unwrap(), vec![0x80]);
    }

    #[test]
    fn checks() {
        assert_eq!(check_vector(&[]), Err(EmbeddingError::Empty));
        assert_eq!(check_vector(&[1.0, f32::NAN]), Err(EmbeddingError::NotFinite(1)));
        assert_eq!(check_vector(&[f32::NEG_INFINITY]), Err(EmbeddingError::NotFinite(0)));
        assert_eq!(
            check_vector(&vec![1.0; MAX_DIMENSIONS + 1]),
            Err(EmbeddingError::TooManyDimensions(MAX_DIMENSIONS + 1))
        );
        assert_eq!(check_vector(&vec![1.0; MAX_DIMENSIONS]), Ok(true));
        assert_eq!(check_bits(0), Err(EmbeddingError::BadBits(0)));
        assert_eq!(check_bits(4097), Err(EmbeddingError::BadBits(4097)));
        assert_eq!(check_bits(-1), Err(EmbeddingError::BadBits(-1)));
        assert_eq!(check_bits(4096), Ok(4096));
    }

    #[test]
    fn cache_is_bounded_and_reuses_longer_matrices() {
        let bytes_64 = Planes::bytes(100, 64);
        let mut cache = PlaneCache::new(3 * bytes_64);
        let a = cache.get(1, 100, 64, NEVER).unwrap();
        let b = cache.get(1, 100, 10, NEVER).unwrap();
        assert!(Rc::ptr_eq(&a, &b), "a longer matrix serves a shorter code");
        let c = cache.get(1, 100, 128, NEVER).unwrap();
        assert_eq!(cache.bytes(), 2 * bytes_64, "the shorter matrix of (seed, d) is replaced");
        assert!(Rc::ptr_eq(&c, &cache.get(1, 100, 64, NEVER).unwrap()));
        cache.get(2, 100, 64, NEVER).unwrap();
        assert_eq!(cache.bytes(), 3 * bytes_64);
        cache.get(3, 100, 64, NEVER).unwrap(); // evicts the least recently used: seed 1's
        assert_eq!(cache.bytes(), 2 * bytes_64);
        assert!(cache.get(1, 100, 4 * 64, NEVER).is_none(), "beyond the bound: not generated");
        assert!(cache.bytes() <= 3 * bytes_64);
        // Through code(): the same bits either way.
        let v = f32s(&Lcg(3).gaussian(100));
        assert_eq!(code(&mut cache, 1, &v, 4 * 64, NEVER), code_uncached(1, &v, 4 * 64, NEVER));
    }

    #[test]
    fn generation_and_codes_stop_on_interrupt_and_leave_the_cache_as_it_was() {
        let (stopped, calls) = run_stopping(3, |i| Planes::new(0, 10, 64, i));
        assert!(stopped && calls == 3);
        let (stopped, _) = run_stopping(2, |i| code_uncached(0, &[1.0; 10], 64, i));
        assert!(stopped);
        let (stopped, calls) = run_stopping(usize::MAX, |i| code_uncached(0, &[1.0; 10], 64, i));
        assert!(!stopped && calls == 8, "one check per block of 8 planes");
        let mut cache = PlaneCache::new(CACHE_BYTES);
        let (stopped, _) = run_stopping(2, |i| cache.get(0, 10, 64, i).is_some());
        assert!(stopped);
        assert_eq!(cache.bytes(), 0);
    }

    /// Hamming / b estimates angle / π: the mean over random pairs at every angle, for
    /// b = 64, 256, 1,024 (bench/embed.sh checks 100,000 pairs).
    #[test]
    fn hamming_over_bits_estimates_angle_over_pi() {
        let mut rng = Lcg(7);
        let dims = 48;
        let pairs: Vec<(Vec<f64>, Vec<f64>)> = (0..1500)
            .map(|k| {
                let u = rng.gaussian(dims);
                let noise = rng.gaussian(dims);
                let t = (k % 30) as f64 / 10.0; // from the same vector to nearly orthogonal
                (u.clone(), u.iter().zip(&noise).map(|(a, n)| a + t * n).collect())
            })
            .collect();
        let truth = pairs.iter().map(|(a, b)| angle(a, b)).sum::<f64>() / std::f64::consts::PI / pairs.len() as f64;
        let mut cache = PlaneCache::new(CACHE_BYTES);
        for bits in [64, 256, 1024] {
            let mean = pairs
                .iter()
                .map(|(a, b)| {
                    let ca = code(&mut cache, 0, &f32s(a), bits, NEVER).unwrap();
                    let cb = code(&mut cache, 0, &f32s(b), bits, NEVER).unwrap();
                    hamming(&ca, &cb) as f64 / bits as f64
                })
                .sum::<f64>()
                / pairs.len() as f64;
            assert!((mean - truth).abs() < 0.03 * truth, "b = {bits}: mean {mean} against {truth}");
        }
    }

    /// Planes are isotropic: for fixed pairs of very anisotropic vectors (sparse, all positive), the
    /// fraction of many planes (several seeds) separating them is angle / π.
    #[test]
    fn separation_is_angle_over_pi_for_anisotropic_pairs() {
        let e = |k: usize| {
            let mut v = vec![0.0f32; 16];
            v[k] = 1.0;
            v
        };
        let pairs = [
            (e(0), e(1), 0.5),
            (vec![1.0; 16], e(3), libm::acos(0.25) / std::f64::consts::PI),
            (vec![1.0, 1.0, 0.0, 0.0], vec![1.0, 0.0, 0.0, 0.0], 0.25),
            (vec![3.0, 4.0], vec![4.0, 3.0], libm::acos(24.0 / 25.0) / std::f64::consts::PI),
        ];
        for (a, b, truth) in pairs {
            let planes = 16 * 1024;
            let separated: u32 = (0..16)
                .map(|seed| {
                    hamming(
                        &code_uncached(seed, &a, 1024, NEVER).unwrap(),
                        &code_uncached(seed, &b, 1024, NEVER).unwrap(),
                    )
                })
                .sum();
            let fraction = separated as f64 / planes as f64;
            // 4.5 standard deviations of a Binomial(planes, truth) fraction.
            let sd = (truth * (1.0 - truth) / planes as f64).sqrt();
            assert!((fraction - truth).abs() < 4.5 * sd, "{fraction} against {truth} for {a:?}, {b:?}");
        }
    }

    #[test]
    fn cosine_radius_is_the_binomial_quantile() {
        assert_eq!(cosine_radius(1.0, 64, 0.95), Ok(0));
        assert_eq!(cosine_radius(-1.0, 64, 0.95), Ok(64));
        assert_eq!(cosine_radius(0.0, 64, 0.5), Ok(32)); // the median of Binomial(64, 1/2)
                                                         // Checked against a direct sum of binomial terms.
        for (cosine, bits, recall) in
            [(0.9, 64, 0.95), (0.95, 256, 0.99), (0.8, 1024, 0.9), (0.5, 4096, 0.95), (0.99, 64, 0.5)]
        {
            let p = libm::acos(cosine) / std::f64::consts::PI;
            let mut cdf = 0.0;
            let mut want = bits as u32;
            for k in 0..=bits {
                cdf += binomial_pmf(bits, k, p);
                if cdf >= recall {
                    want = k as u32;
                    break;
                }
            }
            assert_eq!(cosine_radius(cosine, bits as i64, recall), Ok(want), "{cosine} {bits} {recall}");
        }
        assert_eq!(cosine_radius(0.9, 64, 0.95), Ok(14));
        // Recalls near 1 and near 0, against the quantiles computed with 60 digits (mpmath):
        // summed from below, the first four came out as 4096, 4096, 64 and 3654.
        for (cosine, bits, recall, want) in [
            (0.0, 4096, 0.999999999999, 2273),
            (0.5, 4096, 0.9999999999999999, 1616),
            (0.5, 64, 0.9999999999999998, 53),
            (-0.9, 4096, 0.9999999999999999, 3684),
            (0.5, 4096, 0.99999999999999, 1599),
            (0.0, 4096, 0.95, 2101),
            (0.5, 4096, 0.95, 1415),
            (0.99999999999, 4096, 0.999999999999, 4),
            (1e-300, 4096, 1e-300, 897),
            (0.5, 4096, 1e-300, 363),
            (0.9, 64, 1e-300, 0),
            (0.0, 64, 0.5, 32),
        ] {
            assert_eq!(cosine_radius(cosine, bits, recall), Ok(want), "{cosine} {bits} {recall}");
        }
        // More recall never gives a smaller radius, across the switch between the tails at 0.5.
        for bits in [1, 64, 4096] {
            for cosine in [0.9, 0.0, -0.9] {
                let mut last = 0;
                for recall in [
                    1e-300,
                    1e-10,
                    0.1,
                    0.4999999,
                    0.5,
                    0.5000001,
                    0.9,
                    0.95,
                    1.0 - 1e-9,
                    1.0 - 1e-15,
                    1.0 - f64::EPSILON / 2.0,
                ] {
                    let k = cosine_radius(cosine, bits, recall).unwrap();
                    assert!(k >= last && k <= bits as u32, "{cosine} {bits} {recall}: {k} after {last}");
                    last = k;
                }
            }
        }
        assert_eq!(cosine_radius(1.5, 64, 0.95), Err(RadiusError::Cosine));
        assert_eq!(cosine_radius(f64::NAN, 64, 0.95), Err(RadiusError::Cosine));
        assert_eq!(cosine_radius(0.9, 0, 0.95), Err(RadiusError::Bits));
        assert_eq!(cosine_radius(0.9, 64, 1.0), Err(RadiusError::Recall));
        assert_eq!(cosine_radius(0.9, 64, 0.0), Err(RadiusError::Recall));
        assert_eq!(cosine_radius(0.9, 64, f64::NAN), Err(RadiusError::Recall));
        // More recall or a lower cosine never gives a smaller radius.
        let mut last = 0;
        for c in (0..=100).rev() {
            let k = cosine_radius(c as f64 / 100.0, 256, 0.95).unwrap();
            assert!(k >= last);
            last = k;
        }
    }

    /// P[Binomial(n, p) = k] by exact binomial coefficients in f64 (for n up to a few thousand).
    fn binomial_pmf(n: usize, k: usize, p: f64) -> f64 {
        let ln_choose: f64 = (0..k).map(|i| ((n - i) as f64 / (i + 1) as f64).ln()).sum();
        (ln_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp()
    }
}
