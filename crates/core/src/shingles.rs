//! Character n-gram shingles of folded text, and the two fingerprints built on them:
//! [`minhash64`] (1-bit MinHash) and [`simhash_ngrams`] (SimHash of the n-grams).
//!
//! Shingles are taken from the folded text ([`crate::fold`]) with punctuation and symbols left out:
//! letters, digits and combining marks remain, with one space between two words of a spaced script
//! (not next to a Chinese character or kana), so that punctuation and spacing changes are not edits. A text
//! shorter than n characters is one shingle; a text with no letter or digit has none.

use std::sync::LazyLock;

use crate::fingerprint::weighted_vote_interruptible;
use crate::fold::{fold_chars, fold_unscripted};
use crate::interrupt::{Interrupt, STEP};

/// The shingle length the SQL functions use by default.
pub const DEFAULT_SHINGLE: usize = 3;
/// The longest shingle accepted.
pub const MAX_SHINGLE: usize = 32;

/// The text shingles are cut from: folded, only letters, digits and single spaces.
pub fn shingle_text(text: &str) -> String {
    shingle_chars(text, Interrupt::NEVER).into_iter().collect()
}

/// [`shingle_text`] as characters: folded and kept in one pass where no script conversion applies
/// (the same characters as the two steps, which the rest of the text takes).
fn shingle_chars(text: &str, interrupt: Interrupt<'_>) -> Vec<char> {
    // A character folds to at most as many as it has bytes, and a space is kept only after a
    // character left out: the text's length in bytes is room enough.
    let mut chars = vec!['\0'; text.len() + 1];
    let mut keeper = Keeper::new();
    let unscripted = fold_unscripted(text, interrupt, |c| match c {
        Some(c) => keeper.push(&mut chars, c),
        None => keeper.leave_out(),
    });
    if unscripted {
        chars.truncate(keeper.kept);
        return chars;
    }
    drop(chars);
    let mut chars = fold_chars(text, interrupt);
    keep_shingle_chars(&mut chars, interrupt);
    chars
}

/// Keeps the characters of folded text that shingles are cut from, in place (a space is added only
/// where at least one character was left out, so the text never grows).
fn keep_shingle_chars(chars: &mut Vec<char>, interrupt: Interrupt<'_>) {
    let mut keeper = Keeper::new();
    let (len, mut start) = (chars.len(), 0);
    while start < len {
        interrupt.check();
        let end = (start + STEP).min(len);
        for i in start..end {
            // (kept <= i: writing at `kept` never overwrites a character not yet read)
            let c = chars[i];
            keeper.push(chars, c);
        }
        start = end;
    }
    chars.truncate(keeper.kept);
}

/// The characters shingles are cut from, written one at a time into the start of a buffer.
///
/// Chinese and Japanese have no spaces between words: a space is kept only between two characters
/// of spaced scripts, where punctuation or whitespace separated them.
struct Keeper {
    classes: &'static CharacterClasses,
    /// How many characters are written.
    kept: usize,
    /// Whether the last character kept is of a spaced script, and whether one was left out since.
    previous_spaced: bool,
    separated: bool,
}

impl Keeper {
    fn new() -> Keeper {
        Keeper { classes: &CHARACTER_CLASSES, kept: 0, previous_spaced: false, separated: false }
    }

    /// Folded character `c`: kept (after a space, where one is due) or left out.
    #[inline]
    fn push(&mut self, out: &mut [char], c: char) {
        let (keep, spaced) = self.classes.of(c);
        // Without a branch on either answer (punctuation and spaces are a sixth of a text): the
        // space, then the character, each written always and kept or overwritten.
        out[self.kept] = ' ';
        self.kept += usize::from(keep & self.separated & self.previous_spaced & spaced);
        out[self.kept] = c;
        self.kept += usize::from(keep);
        self.separated = !keep;
        self.previous_spaced = if keep { spaced } else { self.previous_spaced };
    }

    /// A character that is never kept (whitespace, punctuation).
    #[inline]
    fn leave_out(&mut self) {
        self.separated = true;
    }
}

/// Builds the character classes now rather than on first use.
pub fn preload() {
    LazyLock::force(&CHARACTER_CLASSES);
}

/// Whether a character is kept for shingles: letters, digits and combining marks (Devanagari vowel
/// signs and Thai tone marks belong to their word).
fn is_kept(c: char) -> bool {
    c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(c)
}

/// Whether a character is of a script that spaces its words: not a Chinese character, kana or CJK
/// symbol (Hangul spaces its words).
fn is_spaced(c: char) -> bool {
    let c = c as u32;
    !(((0x2E80..=0x9FFF).contains(&c) && !(0x3130..=0x318F).contains(&c))
        || (0xF900..=0xFAFF).contains(&c)
        || (0x20000..=0x3FFFF).contains(&c))
}

/// [`is_kept`] and [`is_spaced`] of every character of the Basic Multilingual Plane, as two
/// bitmaps of 8 KB (the Unicode tables behind `is_alphanumeric` are searched, not indexed).
struct CharacterClasses {
    kept: [u64; 0x10000 / 64],
    spaced: [u64; 0x10000 / 64],
}

impl CharacterClasses {
    /// Whether `c` is kept and whether it is of a spaced script.
    #[inline]
    fn of(&self, c: char) -> (bool, bool) {
        let code = c as usize;
        if code < 0x10000 {
            (self.kept[code / 64] >> (code % 64) & 1 != 0, self.spaced[code / 64] >> (code % 64) & 1 != 0)
        } else {
            (is_kept(c), is_spaced(c))
        }
    }
}

static CHARACTER_CLASSES: LazyLock<CharacterClasses> = LazyLock::new(|| {
    let mut classes = CharacterClasses { kept: [0; 0x10000 / 64], spaced: [0; 0x10000 / 64] };
    for c in (0..0x10000u32).filter_map(char::from_u32) {
        let code = c as usize;
        classes.kept[code / 64] |= u64::from(is_kept(c)) << (code % 64);
        classes.spaced[code / 64] |= u64::from(is_spaced(c)) << (code % 64);
    }
    classes
});

/// The hash of every n-character window of `chars` (one window, the whole text, if it is shorter):
/// FNV-1a-64 over the code points (no re-encoding to UTF-8), then SplitMix64's finaliser.
fn shingle_hashes(chars: &[char], n: usize) -> impl Iterator<Item = u64> + '_ {
    let n = n.clamp(1, chars.len().max(1));
    chars.windows(n).map(|window| {
        mix(window.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)))
    })
}

/// SplitMix64's finaliser. FNV-1a alone is a poor source of bits for short keys: over all ASCII
/// 3-grams, bits 33-39 are nearly constant (bit 36 is 1 for every English 3-gram of a text), which
/// pinned those bits in every n-gram SimHash and put unrelated English texts 8 bits apart.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The 1-bit MinHash of the set of n-character shingles of `text`: 64 min-hashes, one bit each
/// ([`minhash64_with`] with one min-hash per bit).
pub fn minhash64(text: &str, n: usize) -> Option<u64> {
    minhash64_with(text, n, 1)
}

/// The most min-hashes one bit of [`minhash64_with`] may combine.
pub const MAX_HASHES_PER_BIT: usize = 4;

/// A 64-bit MinHash of the set of n-character shingles of `text` in which each bit combines
/// `hashes_per_bit` (1 to [`MAX_HASHES_PER_BIT`]) min-hashes.
///
/// One-permutation hashing: each shingle is hashed once (FNV-1a-64 over its code points, then
/// SplitMix64's finaliser); the hash's top 32 bits pick one of 64 x `hashes_per_bit` bins
/// (multiply-shift; with one hash per bit that is the top 6 bits), its low 58 bits are its value,
/// and each bin keeps its least value. An empty bin (a text with fewer than about
/// 4 x 64 x `hashes_per_bit` shingles leaves some) takes the value of a non-empty bin chosen by a
/// hash of its number (optimal densification, Shrivastava 2017), so that every bin agrees between
/// two texts with the probability of their Jaccard similarity J. Each bin gives one bit of a hash of its value and
/// number; bit i is the exclusive or of its `hashes_per_bit` bins' bits. A bit whose bins all agree
/// agrees; otherwise it agrees by chance, half the time. So two texts differ in about
/// 32 x (1 - J^r) bits, r = `hashes_per_bit`: with r = 2 the distance grows faster as J falls
/// below 1, which separates J = 0.9 from J = 0.7 by more bits (6 against 16) than r = 1 (3 against 10).
pub fn minhash64_with(text: &str, n: usize, hashes_per_bit: usize) -> Option<u64> {
    minhash64_interruptible(text, n, hashes_per_bit, Interrupt::NEVER)
}

/// [`minhash64_with`], checking `interrupt` as it goes.
pub fn minhash64_interruptible(text: &str, n: usize, hashes_per_bit: usize, interrupt: Interrupt<'_>) -> Option<u64> {
    const EMPTY: u64 = u64::MAX;
    let per_bit = hashes_per_bit.clamp(1, MAX_HASHES_PER_BIT);
    let bin_count = 64 * per_bit;
    let chars = shingle_chars(text, interrupt);
    let mut bins = [EMPTY; 64 * MAX_HASHES_PER_BIT];
    let bins = &mut bins[..bin_count];
    for (i, h) in shingle_hashes(&chars, n).enumerate() {
        if i % STEP == 0 {
            interrupt.check();
        }
        let bin = (((h >> 32) * bin_count as u64) >> 32) as usize;
        let value = h & ((1 << 58) - 1);
        if value < bins[bin] {
            bins[bin] = value;
        }
    }
    if bins.iter().all(|&b| b == EMPTY) {
        return None;
    }
    let mut fp = 0u64;
    for i in 0..bin_count {
        let mut value = bins[i];
        let mut attempt = 0u64;
        while value == EMPTY {
            attempt += 1;
            value = bins[(mix((i as u64) << 32 | attempt) % bin_count as u64) as usize];
        }
        // The bit is drawn from the value and the bin number, so that a bin filled from another
        // does not simply repeat its bit (a one-shingle text would be all ones or all zeros). The
        // number goes to the top 6 bits, where the 58-bit value has none; bin numbers from 64 on
        // wrap their higher bits to the bottom rather than lose them.
        fp ^= (mix(value ^ (i as u64).rotate_right(6)) & 1) << (i / per_bit);
    }
    Some(fp)
}

/// The SimHash of the *set* of n-character shingles of `text`: every distinct shingle votes once,
/// with weight 1, with the hash [`minhash64`] uses.
///
/// Why a set: weighted by its count, a shingle common in the language (的, "the") outvotes the
/// rest in a long text, so unrelated long texts of one language landed 16-20 bits apart instead of
/// about 32, and the false-positive rule kept the radius at 0 (the quality harness).
pub fn simhash_ngrams(text: &str, n: usize) -> Option<u64> {
    simhash_ngrams_interruptible(text, n, Interrupt::NEVER)
}

/// [`simhash_ngrams`], checking `interrupt` as it goes.
pub fn simhash_ngrams_interruptible(text: &str, n: usize, interrupt: Interrupt<'_>) -> Option<u64> {
    let chars = shingle_chars(text, interrupt);
    if chars.is_empty() {
        return None;
    }
    let mut hashes = Vec::with_capacity(chars.len().saturating_sub(n.max(1)) + 1);
    for (i, h) in shingle_hashes(&chars, n).enumerate() {
        if i % STEP == 0 {
            interrupt.check();
        }
        hashes.push(h);
    }
    drop(chars);
    // The distinct hashes (in ascending order, which the vote does not depend on).
    let hashes = sorted_distinct(hashes, interrupt);
    Some(weighted_vote_interruptible(hashes.into_iter().map(|h| (h, 1)), interrupt))
}

/// The set of n-character shingles of a text, as 64-bit keys: the set [`minhash64`] and
/// [`simhash_ngrams`] fingerprint (empty for a text with no letter or digit).
///
/// A shingle of up to 3 characters is its code points packed into 63 bits (21 each) and multiplied
/// by an odd constant: one to one, so set operations on the keys are exactly those on the shingles,
/// for the cost of one multiplication per shingle. A longer shingle's key is the hash
/// [`minhash64`] uses; two shingles share it with probability 2^-64 (about 1e-12 for two texts of
/// 4,000 shingles).
///
/// The distinct keys in ascending order. The keys are spread evenly, so one pass that scatters them
/// into about twice as many buckets as there are keys, by their top bits, leaves them nearly
/// sorted, and an insertion sort finishes in linear time (a list of more than 65,536 keys, whose
/// scattering would miss the cache, is radix-sorted by its top bytes instead); two sets then meet
/// in one sequential merge ([`Overlap::of`]). (A hash table was slower: its random probes into two
/// tables of 32 KB each miss the cache.)
#[derive(Clone, Debug, Default)]
pub struct ShingleSet {
    hashes: Vec<u64>,
}

impl ShingleSet {
    /// The shingle set of `text` (n-character shingles of its folded letters and digits).
    pub fn of(text: &str, n: usize) -> ShingleSet {
        ShingleSet::of_interruptible(text, n, Interrupt::NEVER)
    }

    /// [`ShingleSet::of`], checking `interrupt` as it goes.
    pub fn of_interruptible(text: &str, n: usize, interrupt: Interrupt<'_>) -> ShingleSet {
        let chars = shingle_chars(text, interrupt);
        if chars.is_empty() {
            return ShingleSet::default();
        }
        let keys = shingle_keys(&chars, n, interrupt);
        drop(chars);
        ShingleSet { hashes: sorted_distinct(keys, interrupt) }
    }

    /// The number of distinct shingles.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn contains(&self, key: u64) -> bool {
        self.hashes.binary_search(&key).is_ok()
    }

    /// The keys in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.hashes.iter().copied()
    }
}

/// The longest shingle whose characters are packed into its key (21 bits each).
const PACKED: usize = 3;

/// The key of every n-character window of `chars` (one window, the whole text, if it is shorter;
/// see [`ShingleSet`]). No kept character is U+0000, so packed windows of different lengths differ.
fn shingle_keys(chars: &[char], n: usize, interrupt: Interrupt<'_>) -> Vec<u64> {
    if n > PACKED {
        let mut keys = Vec::with_capacity(chars.len().saturating_sub(n.max(1)) + 1);
        for (i, h) in shingle_hashes(chars, n).enumerate() {
            if i % STEP == 0 {
                interrupt.check();
            }
            keys.push(h);
        }
        return keys;
    }
    let key = |packed: u64| packed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let n = n.clamp(1, chars.len().max(1));
    let mask = (1u64 << (21 * n)) - 1;
    let mut packed = chars[..n.min(chars.len())].iter().fold(0u64, |p, &c| p << 21 | u64::from(c));
    let mut keys = Vec::with_capacity(chars.len().saturating_sub(n) + 1);
    keys.push(key(packed));
    for piece in chars[n.min(chars.len())..].chunks(STEP) {
        interrupt.check();
        for &c in piece {
            packed = (packed << 21 | u64::from(c)) & mask;
            keys.push(key(packed));
        }
    }
    keys
}

/// `hashes` sorted, without repeats (see [`ShingleSet`]); for a long list, checking `interrupt`
/// as it goes.
fn sorted_distinct(hashes: Vec<u64>, interrupt: Interrupt<'_>) -> Vec<u64> {
    if hashes.len() > LONG {
        return sorted_distinct_long(hashes, interrupt);
    }
    interrupt.check();
    sorted_distinct_short(hashes)
}

/// Lists longer than this take [`sorted_distinct_long`].
const LONG: usize = 1 << 16;

/// [`sorted_distinct`] for a long list, checking `interrupt` as it goes: recent repeats left out
/// as for a short one, then a radix sort by the top bytes ([`radix_sort`]: its passes write 256
/// sequential streams, where scattering a long list into 2n buckets misses the cache at every
/// hash), then repeats left out.
fn sorted_distinct_long(mut hashes: Vec<u64>, interrupt: Interrupt<'_>) -> Vec<u64> {
    drop_recent_repeats::<true>(&mut hashes, interrupt);
    let mut scratch = Vec::new();
    radix_sort(&mut hashes, 64, &mut scratch, interrupt);
    drop(scratch);
    drop_sorted_repeats::<true>(&mut hashes, interrupt);
    hashes
}

/// Sorts `v`, whose hashes all agree above bit `bits`: std's sort for a short one (in the cache),
/// else 256 buckets by the 8 bits below `bits`, each sorted the same way; a check every [`STEP`]
/// hashes and before each sort (of at most [`RADIX_SORT_MAX`] hashes, unless all are equal).
fn radix_sort(v: &mut [u64], bits: u32, scratch: &mut Vec<u64>, interrupt: Interrupt<'_>) {
    if v.len() <= RADIX_SORT_MAX || bits == 0 {
        interrupt.check();
        v.sort_unstable();
        return;
    }
    let shift = bits - 8;
    let digit = |h: u64| (h >> shift) as usize & 0xFF;
    let mut starts = [0usize; 257];
    for piece in v.chunks(STEP) {
        interrupt.check();
        for &h in piece {
            starts[digit(h) + 1] += 1;
        }
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    scratch.clear();
    scratch.reserve(v.len());
    for piece in v.chunks(STEP) {
        interrupt.check();
        scratch.extend_from_slice(piece);
    }
    let mut next = starts;
    for piece in scratch.chunks(STEP) {
        interrupt.check();
        for &h in piece {
            let bucket = &mut next[digit(h)];
            v[*bucket] = h;
            *bucket += 1;
        }
    }
    for bucket in 0..256 {
        radix_sort(&mut v[starts[bucket]..starts[bucket + 1]], shift, scratch, interrupt);
    }
}

/// Buckets up to this many hashes go to std's sort (a few milliseconds).
const RADIX_SORT_MAX: usize = 1 << 16;

/// [`sorted_distinct`] for a short list (no checks: a few hundred microseconds at most):
/// scattered by their top bits into about twice as many buckets as there are hashes, then sorted
/// by insertion (only hashes of one bucket can be out of order), then repeats left out.
fn sorted_distinct_short(mut hashes: Vec<u64>) -> Vec<u64> {
    if hashes.len() >= 64 {
        drop_recent_repeats::<false>(&mut hashes, Interrupt::NEVER);
    }
    let n = hashes.len();
    let mut sorted = if n < 64 {
        let mut v = hashes;
        v.sort_unstable();
        v
    } else {
        let bits = usize::BITS - (n - 1).leading_zeros() + 1;
        let shift = 64 - bits;
        let mut starts = vec![0u32; (1 << bits) + 1];
        for &h in &hashes {
            starts[(h >> shift) as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut v = vec![0u64; n];
        for &h in &hashes {
            let bucket = &mut starts[(h >> shift) as usize];
            v[*bucket as usize] = h;
            *bucket += 1;
        }
        for i in 1..n {
            let h = v[i];
            let mut j = i;
            while j > 0 && v[j - 1] > h {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = h;
        }
        v
    };
    drop_sorted_repeats::<false>(&mut sorted, Interrupt::NEVER);
    sorted
}

/// Most repeats come soon after the first (the, 的): a table of the last hash seen per top bits
/// leaves them out before the sort, without a branch (each hash is written, and kept when it is
/// not in the table). An entry starts with other top bits than its own, so it matches nothing.
fn drop_recent_repeats<const CHECK: bool>(hashes: &mut Vec<u64>, interrupt: Interrupt<'_>) {
    const BITS: u32 = 10;
    let mut recent: [u64; 1 << BITS] = std::array::from_fn(|slot| ((slot ^ 1) as u64) << (64 - BITS));
    let mut kept = 0;
    for i in 0..hashes.len() {
        if CHECK && i % STEP == 0 {
            interrupt.check();
        }
        let h = hashes[i];
        let slot = &mut recent[(h >> (64 - BITS)) as usize];
        hashes[kept] = h;
        kept += usize::from(*slot != h);
        *slot = h;
    }
    hashes.truncate(kept);
}

/// Leaves out the repeats of a sorted list, without a branch on whether a hash repeats (half of
/// them do in English text): each is written, and kept when it differs from the one before.
fn drop_sorted_repeats<const CHECK: bool>(sorted: &mut Vec<u64>, interrupt: Interrupt<'_>) {
    if let Some(&first) = sorted.first() {
        let (mut kept, mut previous) = (1, first);
        for i in 1..sorted.len() {
            if CHECK && i % STEP == 0 {
                interrupt.check();
            }
            let h = sorted[i];
            sorted[kept] = h;
            kept += usize::from(h != previous);
            previous = h;
        }
        sorted.truncate(kept);
    }
}

/// How two shingle sets overlap: the sizes of both and of their intersection. The exact
/// similarity that the fingerprints estimate ([`Overlap::jaccard`]: `E[minhash64(a) <~> minhash64(b)]
/// = 32 x (1 - J^r)` for the same n), and the containment of the smaller set in the larger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub common: usize,
    pub a: usize,
    pub b: usize,
}

impl Overlap {
    /// The overlap of two sets: one merge of the two ascending lists.
    pub fn of(a: &ShingleSet, b: &ShingleSet) -> Overlap {
        Overlap::of_interruptible(a, b, Interrupt::NEVER)
    }

    /// [`Overlap::of`], checking `interrupt` as it goes.
    pub fn of_interruptible(a: &ShingleSet, b: &ShingleSet, interrupt: Interrupt<'_>) -> Overlap {
        let (a, b) = (&a.hashes, &b.hashes);
        let (mut i, mut j, mut common) = (0, 0, 0);
        while i < a.len() && j < b.len() {
            interrupt.check();
            let (a_end, b_end) = ((i + STEP).min(a.len()), (j + STEP).min(b.len()));
            while i < a_end && j < b_end {
                let (x, y) = (a[i], b[j]);
                common += usize::from(x == y);
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
        }
        Overlap { common, a: a.len(), b: b.len() }
    }

    /// Jaccard similarity |A ∩ B| / |A ∪ B|, 0 to 1; `None` when either set is empty (a text with
    /// no letter or digit has no fingerprint either).
    pub fn jaccard(&self) -> Option<f64> {
        (self.a > 0 && self.b > 0).then(|| self.common as f64 / (self.a + self.b - self.common) as f64)
    }

    /// Containment |A ∩ B| / min(|A|, |B|): 1 when every shingle of the smaller set is in the
    /// larger one (a text and the same text with boilerplate added); `None` when either is empty.
    pub fn containment(&self) -> Option<f64> {
        (self.a > 0 && self.b > 0).then(|| self.common as f64 / self.a.min(self.b) as f64)
    }
}

/// [`Overlap`] of the n-character shingle sets of two texts.
pub fn overlap(a: &str, b: &str, n: usize) -> Overlap {
    Overlap::of(&ShingleSet::of(a, n), &ShingleSet::of(b, n))
}

/// [`Overlap::jaccard`] of the n-character shingle sets of two texts.
pub fn jaccard(a: &str, b: &str, n: usize) -> Option<f64> {
    overlap(a, b, n).jaccard()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    #[test]
    fn cjk_unified_ideographs_are_alphanumeric() {
        assert!((0x4E00..=0x9FFF).filter_map(char::from_u32).all(char::is_alphanumeric));
    }

    /// The oracle: Jaccard of the sets of character windows themselves (no hashing).
    fn jaccard_of_windows(a: &str, b: &str, n: usize) -> f64 {
        let set = |t: &str| {
            let chars = shingle_chars(t, Interrupt::NEVER);
            chars.windows(n.min(chars.len())).map(|w| w.to_vec()).collect::<std::collections::HashSet<_>>()
        };
        let (a, b) = (set(a), set(b));
        a.intersection(&b).count() as f64 / a.union(&b).count() as f64
    }

    #[test]
    fn shingle_text_drops_punctuation_and_folds() {
        assert_eq!(shingle_text("Hello,ＷＯＲＬＤ!  軟體。"), "hello world软件");
        assert_eq!(shingle_text("PostgreSQL 数据库"), shingle_text("PostgreSQL数据库"));
        assert_eq!(shingle_text("हिन्दी भाषा"), "हिन्दी भाषा");
        assert_eq!(shingle_text("한국어 문장"), "한국어 문장");
        assert_eq!(shingle_text("，。！"), "");
    }

    #[test]
    fn empty_or_punctuation_only_has_no_fingerprint() {
        assert_eq!(minhash64("", 3), None);
        assert_eq!(minhash64("，。！？", 3), None);
        assert_eq!(simhash_ngrams("...", 3), None);
        assert!(minhash64("ab", 3).is_some());
        let one = minhash64("好", 3).unwrap();
        assert!((16..=48).contains(&one.count_ones()), "{one:016x}");
    }

    #[test]
    fn equal_after_folding() {
        let a = "PostgreSQL 資料庫的軟體開發";
        let b = "postgresql，数据库的软件开发！";
        assert_eq!(minhash64(a, 3), minhash64(b, 3));
        assert_eq!(simhash_ngrams(a, 3), simhash_ngrams(b, 3));
    }

    /// The shingle hash has no nearly constant bit, even over short ASCII keys (plain FNV-1a has
    /// seven): no bit is 1 for fewer than 47 % or more than 53 % of all 17,576 three-letter words.
    #[test]
    fn shingle_hash_bits_are_balanced() {
        let letters: Vec<char> = ('a'..='z').collect();
        let mut ones = [0u32; 64];
        let mut total = 0;
        for &a in &letters {
            for &b in &letters {
                for &c in &letters {
                    let h = shingle_hashes(&[a, b, c], 3).next().unwrap();
                    for (bit, count) in ones.iter_mut().enumerate() {
                        *count += (h >> bit & 1) as u32;
                    }
                    total += 1;
                }
            }
        }
        for (bit, &count) in ones.iter().enumerate() {
            let share = f64::from(count) / f64::from(total);
            assert!((0.47..=0.53).contains(&share), "bit {bit}: {share:.3}");
        }
    }

    /// Unrelated texts of one language land about 32 bits apart in `simhash_ngrams`: common
    /// shingles vote once, like any other.
    #[test]
    fn ngrams_of_unrelated_texts_are_far_apart() {
        let a = "The quick brown fox jumps over the lazy dog while the farmer watches from the gate. ".repeat(3)
            + "Then the dog wakes up and chases the fox across the field and into the woods beyond the river.";
        let b = "Install the package with the package manager, then edit the configuration file and restart \
                 the service so that the new settings take effect on the next boot of the machine.";
        let d = hamming(simhash_ngrams(&a, 3).unwrap(), simhash_ngrams(b, 3).unwrap());
        assert!(d >= 20, "distance {d}");
    }

    /// A text with one shingle fills every bin with one value: the bits still differ from bin to
    /// bin, with any number of hashes per bit (the fingerprint does not repeat itself).
    #[test]
    fn one_shingle_bits_do_not_repeat() {
        for per_bit in 1..=MAX_HASHES_PER_BIT {
            let fp = minhash64_with("好", 3, per_bit).unwrap();
            assert!((16..=48).contains(&fp.count_ones()), "{per_bit}: {fp:016x}");
            assert_ne!(fp >> 32, fp & 0xffff_ffff, "{per_bit}: {fp:016x}");
            assert_ne!(fp >> 48, fp & 0xffff, "{per_bit}: {fp:016x}");
        }
    }

    /// The mean distance over many pairs tracks 32 x (1 - J^r), r = hashes per bit: one (the
    /// plain 1-bit MinHash) and more, for long texts and for short ones (filled-in bins), and for
    /// r = 3, whose 192 bins are not a power of two.
    #[test]
    fn distance_estimates_jaccard_to_the_power_r() {
        for (per_bit, n, length, edits, trials) in [
            (1, 3, 400, 20, 200),
            (2, 4, 1200, 30, 200),
            (2, 4, 120, 4, 300),
            (3, 4, 1200, 30, 300),
            (3, 4, 150, 4, 300),
            (4, 4, 600, 6, 300),
        ] {
            let base: Vec<char> = (0..length).map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000).unwrap()).collect();
            let mut total_error = 0.0;
            for t in 0..trials {
                let mut edited = base.clone();
                for e in 0..edits {
                    let at = (t * 131 + e * 977) % edited.len();
                    edited[at] = char::from_u32(0x4e00 + ((t * 31 + e) % 500) as u32).unwrap();
                }
                let (original, edited): (String, String) = (base.iter().collect(), edited.into_iter().collect());
                let j = jaccard_of_windows(&original, &edited, n);
                let (a, b) =
                    (minhash64_with(&original, n, per_bit).unwrap(), minhash64_with(&edited, n, per_bit).unwrap());
                total_error += hamming(a, b) as f64 - 32.0 * (1.0 - j.powi(per_bit as i32));
            }
            let bias = total_error / trials as f64;
            assert!(bias.abs() < 1.0, "r = {per_bit}, {length} characters: mean distance - 32(1-J^r) = {bias}");
        }
    }

    /// The bucket sort gives what a plain sort gives, repeats and all sizes around its cut-over.
    #[test]
    fn sorted_distinct_sorts() {
        for n in [0, 1, 2, 63, 64, 65, 1000, 4097, LONG, LONG + 1, 3 * LONG + 5, 20 * RADIX_SORT_MAX] {
            let mut state = n as u64 + 1;
            let v: Vec<u64> = (0..n)
                .map(|i| {
                    state = mix(state);
                    if i % 7 == 0 {
                        state % 50
                    } else {
                        state
                    }
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(sorted_distinct(v, Interrupt::NEVER), expected, "{n}");
        }
        // Crowded lists: every hash with the same top 40 bits (the radix sort goes down five
        // bytes), and one value repeated; the checks come all along a long list.
        let crowded: Vec<u64> =
            (0..5 * RADIX_SORT_MAX as u64).map(|i| 0xAB_CDEF_0123 << 24 | mix(i) & 0xFF_FFFF).collect();
        let mut expected = crowded.clone();
        expected.sort_unstable();
        expected.dedup();
        let (stopped, checks) = crate::interrupt::tests::run_stopping(usize::MAX, |i| {
            assert_eq!(sorted_distinct(crowded.clone(), i), expected);
        });
        assert!(!stopped && checks >= 3 * crowded.len() / STEP, "{checks} checks");
        assert!(crate::interrupt::tests::run_stopping(checks / 2, |i| sorted_distinct(crowded.clone(), i)).0);
        assert_eq!(sorted_distinct(vec![42; 3 * LONG], Interrupt::NEVER), vec![42]);
    }

    /// The keys of short shingles are their characters packed, one to one: the key sets of two
    /// texts meet exactly where their windows do (the oracle compares the windows themselves).
    #[test]
    fn packed_keys_are_one_to_one() {
        let windows = ["a", "b", "ab", "ba", "abc", "cab", "中", "中文", " a", "a ", "\u{10FFFF}\u{10FFFF}\u{10FFFF}"];
        let keys: Vec<u64> =
            windows.iter().map(|w| shingle_keys(&w.chars().collect::<Vec<_>>(), 3, Interrupt::NEVER)[0]).collect();
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b), "{}", windows[i]);
        }
    }

    /// The hashed sets give the Jaccard of the windows themselves, for every shingle length and
    /// for texts shorter than n (one shingle, the whole text).
    /// The one-pass fold and keep gives the characters of the two steps, for every text (random
    /// texts from an alphabet of every kind of character the paths tell apart).
    #[test]
    fn one_pass_shingle_chars_equal_two_steps() {
        let two_steps = |text: &str| {
            let mut chars = fold_chars(text, Interrupt::NEVER);
            keep_shingle_chars(&mut chars, Interrupt::NEVER);
            chars
        };
        let alphabet: Vec<char> =
            "aZ9 \t\n\u{a0}\u{3000}…,.-'ÀΣσς\u{301}ﬁＡ１，한국어ไทย\u{e48}नमस्ते中文繁體軟體資訊程式，。😀\u{2019}"
                .chars()
                .collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let len = (state >> 58) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    alphabet[(state >> 33) as usize % alphabet.len()]
                })
                .collect();
            assert_eq!(shingle_chars(&text, Interrupt::NEVER), two_steps(&text), "{text:?}");
        }
        for text in ["", " ", "…", "a … b", "  Hello,   World!  ", "x...y", "don\u{2019}t", "ΣΑΣ"] {
            assert_eq!(shingle_chars(text, Interrupt::NEVER), two_steps(text), "{text:?}");
        }
    }

    #[test]
    fn jaccard_equals_the_windows_oracle() {
        let texts = [
            "海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。",
            "海量網頁去重是搜尋引擎的基礎工作，相似的文章只應該保留一份，以節省儲存與頻寬。",
            "The quick brown fox jumps over the lazy dog near the river bank.",
            "the quick brown fox jumped over a lazy dog near the river bank",
            "ab",
            "abc",
        ];
        for n in [1, 2, 3, 4, 5, 8] {
            for a in texts {
                for b in texts {
                    let expected = jaccard_of_windows(a, b, n);
                    let got = jaccard(a, b, n).unwrap();
                    assert!((got - expected).abs() < 1e-12, "n = {n}: {a} / {b}: {got} != {expected}");
                }
            }
        }
    }

    /// Long texts (many checks): the set's keys are those of each window computed on its own, the
    /// merge counts what a hash set counts, each fingerprint is the same with checks, and every
    /// computation stops when a check unwinds.
    #[test]
    fn long_texts_are_interruptible_with_the_same_results() {
        let a = crate::interrupt::tests::long_text(40 * STEP, 1);
        let b = crate::interrupt::tests::long_text(30 * STEP, 2);
        for n in [1, 3, 4] {
            let chars = shingle_chars(&a, Interrupt::NEVER);
            let mut expected: Vec<u64> = chars
                .windows(n)
                .map(|w| match n {
                    1..=3 => w.iter().fold(0u64, |p, &c| p << 21 | u64::from(c)).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    _ => shingle_hashes(w, n).next().unwrap(),
                })
                .collect();
            expected.sort_unstable();
            expected.dedup();
            let (sa, sb) = (ShingleSet::of(&a, n), ShingleSet::of(&b, n));
            assert_eq!(sa.iter().collect::<Vec<_>>(), expected);
            let in_a: std::collections::HashSet<u64> = sa.iter().collect();
            let common = sb.iter().filter(|k| in_a.contains(k)).count();
            assert_eq!(Overlap::of(&sa, &sb), Overlap { common, a: sa.len(), b: sb.len() });
        }
        let run = |stop_at| {
            crate::interrupt::tests::run_stopping(stop_at, |i| {
                assert_eq!(minhash64_interruptible(&a, 3, 2, i), minhash64_with(&a, 3, 2));
                assert_eq!(simhash_ngrams_interruptible(&a, 3, i), simhash_ngrams(&a, 3));
                let (sa, sb) = (ShingleSet::of_interruptible(&a, 3, i), ShingleSet::of_interruptible(&b, 3, i));
                assert_eq!(Overlap::of_interruptible(&sa, &sb, i), overlap(&a, &b, 3));
            })
        };
        let (stopped, checks) = run(usize::MAX);
        assert!(!stopped && checks >= 100, "{checks} checks");
        for stop_at in [1, checks / 5, checks / 2, checks - 1] {
            assert!(run(stop_at).0, "{stop_at}");
        }
    }

    /// `simhash_ngrams` votes the distinct hashes, which it now finds with the bucket sort: the
    /// same fingerprint as the plain sort it used before.
    #[test]
    fn ngram_fingerprints_equal_the_plain_sort() {
        for text in crate::interrupt::tests::sample_texts(300, 200) {
            for n in [1, 2, 3, 5] {
                let chars = shingle_chars(&text, Interrupt::NEVER);
                let expected = (!chars.is_empty()).then(|| {
                    let mut hashes: Vec<u64> = shingle_hashes(&chars, n).collect();
                    hashes.sort_unstable();
                    hashes.dedup();
                    crate::fingerprint::weighted_vote(hashes.into_iter().map(|h| (h, 1)))
                });
                assert_eq!(simhash_ngrams(&text, n), expected, "{text:?}");
            }
        }
    }

    #[test]
    fn overlap_counts_and_limits() {
        assert_eq!(jaccard("PostgreSQL 資料庫", "postgresql，数据库！", 3), Some(1.0));
        assert_eq!(jaccard("abcd", "wxyz", 2), Some(0.0));
        assert_eq!(jaccard("，。！", "abc", 3), None);
        assert_eq!(jaccard("", "", 3), None);
        // Repeated shingles count once: a repeated sentence does not lower the similarity.
        assert_eq!(jaccard("abcabcabc", "abcabc", 3), Some(1.0));
        assert_eq!(jaccard("abcabcabc", "abc", 3), Some(1.0 / 3.0));
        let (a, b) = (ShingleSet::of("abcdefgh", 3), ShingleSet::of("abcdefghijklmnop", 3));
        let overlap = Overlap::of(&a, &b);
        assert_eq!(overlap, Overlap { common: 6, a: 6, b: 14 });
        assert_eq!(overlap.containment(), Some(1.0));
        assert_eq!(overlap.jaccard(), Some(6.0 / 14.0));
        assert_eq!(Overlap::of(&b, &a).jaccard(), overlap.jaccard());
        assert!(a.contains(a.iter().next().unwrap()) && a.iter().zip(a.iter().skip(1)).all(|(x, y)| x < y));
        // The empty set (of a NULL text) answers too.
        let none = ShingleSet::default();
        assert!(!none.contains(1) && !none.contains(0));
        assert_eq!(Overlap::of(&none, &b).jaccard(), None);
    }
}
