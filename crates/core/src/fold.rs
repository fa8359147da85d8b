//! Text folding: the normal form that fingerprints compare, so that width, case, whitespace and
//! script differences do not count as edits.
//!
//! `fold(text)`: Unicode NFKC (full-width letters and digits, compatibility ideographs, ligatures),
//! lower case, every run of whitespace as one space (trimmed), then Chinese in one script and one
//! vocabulary: Traditional characters to Simplified, then Taiwan words to mainland words (程式 ->
//! 程序, 檔案 -> 文件), with OpenCC's dictionaries (Apache-2.0, in `data/opencc`). Every text goes
//! through the same conversion, Simplified text too: folding is a normal form, not a translation,
//! so what matters is that both versions of a text end up equal (a mainland word that OpenCC lists
//! as a Taiwan one, such as 资讯, is rewritten too, consistently). The quality harness
//! (`bench/quality`) found many more Simplified/Traditional pairs this way than by converting only
//! text detected as Traditional.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use fnv::FnvHashSet as HashSet;

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

use crate::interrupt::{pieces, Checked, Interrupt, STEP};

/// The hasher of the converters' maps: one multiplication per character (FNV takes four, a byte
/// at a time, and hashing phrases was most of the time spent converting Chinese text).
#[derive(Default)]
struct CharHasher(u64);

impl Hasher for CharHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u32(b.into()));
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u32(x as u32);
    }

    /// The top bits, which a multiplication mixes best, folded onto the low ones (the map takes
    /// its bucket from the low bits).
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ self.0 >> 32
    }
}

type CharMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<CharHasher>>;

/// One OpenCC conversion step: the longest phrase that matches at each position, else the character.
struct Converter {
    phrases: CharMap<Vec<char>, Vec<char>>,
    /// Per character of the Basic Multilingual Plane (the hot path: one array read per character):
    /// bits 0-20 its replacement (0: none), bits 24-31 the length of the longest phrase that starts
    /// with it (0: none).
    bmp: Vec<u32>,
    /// Where this converter may change something (checked for every character).
    gate: Gate,
    /// The same for characters outside the BMP.
    phrase_starts: CharMap<char, usize>,
    characters: CharMap<char, char>,
    /// A bit per [`PhraseHash`] of each whole phrase: of the lengths a phrase starting at a position
    /// could have, those with the bit clear are left out without hashing the slice for `phrases`.
    phrase_hashes: Vec<u64>,
}

/// Where a converter may change something, as three bitmaps of 8 KB (in the L1 cache), so that the
/// characters it leaves alone cost three reads: a bit per BMP character that has a replacement, a
/// bit per BMP character that starts a phrase, and a bit per [`pair_bit`] of the first two
/// characters of each phrase (most positions where a phrase starts with the character start none
/// with the two).
#[derive(Clone)]
struct Gate {
    replaced: Box<Bitmap16>,
    starts: Box<Bitmap16>,
    pairs: Box<Bitmap16>,
}

/// A bit per 16-bit number (fixed size, so that reading it needs no bounds check).
type Bitmap16 = [u64; 0x10000 / 64];

impl Gate {
    fn new() -> Gate {
        Gate { replaced: Box::new([0; 1024]), starts: Box::new([0; 1024]), pairs: Box::new([0; 1024]) }
    }

    /// Whether a converter may change something at a character `c` followed by the character
    /// whose [`pair_bit`] with it is `pair`: it has a replacement, or a phrase may start there.
    /// Without a branch on either answer (characters outside the BMP are always looked up).
    #[inline]
    fn may_change(&self, c: char, pair: usize) -> bool {
        let word = |bits: &Bitmap16, bit: usize| bits[bit / 64 % 1024] >> (bit % 64);
        let code = c as usize & 0xFFFF;
        (c as u32) >= 0x10000
            || (word(&self.replaced, code) | (word(&self.starts, code) & word(&self.pairs, pair))) & 1 != 0
    }

    /// Where either of two converters may change something (a superset, to check first).
    fn union(&self, other: &Gate) -> Gate {
        let or = |a: &Bitmap16, b: &Bitmap16| Box::new(std::array::from_fn(|i| a[i] | b[i]));
        Gate {
            replaced: or(&self.replaced, &other.replaced),
            starts: or(&self.starts, &other.starts),
            pairs: or(&self.pairs, &other.pairs),
        }
    }
}

/// The longest phrase a converter takes, in characters (OpenCC's longest has 13).
const MAX_PHRASE: usize = 63;

/// A 16-bit hash of a phrase, a character at a time, so that the hashes of all the prefixes at a
/// position cost one multiplication each (the bit of [`Converter::phrase_hashes`]).
#[derive(Clone, Copy)]
struct PhraseHash(u64);

impl PhraseHash {
    const START: PhraseHash = PhraseHash(0);

    #[inline]
    fn add(self, c: char) -> PhraseHash {
        PhraseHash((self.0 ^ c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The top 16 bits (those a multiplication mixes best).
    #[inline]
    fn bit(self) -> usize {
        (self.0 >> 48) as usize
    }
}

#[inline]
fn bit_is_set(bits: &[u64], bit: usize) -> bool {
    bits[bit / 64] & 1 << (bit % 64) != 0
}

#[inline]
fn set_bit(bits: &mut [u64], bit: usize) {
    bits[bit / 64] |= 1 << (bit % 64);
}

/// The bit of `phrase_pairs` for a phrase starting with `first`, `second`: 2^16 bits (8 KB, in the
/// L1 cache; a few thousand phrases set under a tenth of them).
#[inline]
fn pair_bit(first: char, second: char) -> usize {
    ((u64::from(first) << 21 | u64::from(second)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
}

impl Converter {
    /// A converter from explicit phrase and character pairs (the first pair for a key wins).
    fn from_pairs(
        phrases: impl IntoIterator<Item = (String, String)>,
        characters: impl IntoIterator<Item = (char, char)>,
    ) -> Self {
        let mut converter = Converter {
            phrases: CharMap::default(),
            bmp: vec![0; 0x10000],
            gate: Gate::new(),
            phrase_starts: CharMap::default(),
            characters: CharMap::default(),
            phrase_hashes: vec![0; (1 << 16) / 64],
        };
        for (key, value) in phrases {
            let key: Vec<char> = key.chars().collect();
            let chars = key.len();
            if !(2..=MAX_PHRASE).contains(&chars) || converter.phrases.contains_key(&key) {
                continue;
            }
            let (first, second) = (key[0], key[1]);
            set_bit(&mut converter.gate.pairs[..], pair_bit(first, second));
            set_bit(&mut converter.phrase_hashes, key.iter().fold(PhraseHash::START, |h, &c| h.add(c)).bit());
            let longest = converter.phrase_starts.entry(first).or_insert(0);
            *longest = (*longest).max(chars);
            converter.phrases.insert(key, value.chars().collect());
        }
        for (from, to) in characters {
            if from != to {
                converter.characters.entry(from).or_insert(to);
            }
        }
        for (&c, &longest) in &converter.phrase_starts {
            if (c as u32) < 0x10000 {
                converter.bmp[c as usize] |= (longest as u32) << 24;
            }
        }
        for (&from, &to) in &converter.characters {
            if (from as u32) < 0x10000 {
                converter.bmp[from as usize] |= to as u32;
            }
        }
        for (c, &entry) in converter.bmp.iter().enumerate() {
            if entry & 0x1F_FFFF != 0 {
                set_bit(&mut converter.gate.replaced[..], c);
            }
            if entry >> 24 != 0 {
                set_bit(&mut converter.gate.starts[..], c);
            }
        }
        converter
    }

    /// The replacement of `c` (or `c`) and the longest phrase starting with it (0: none).
    #[inline]
    fn lookup(&self, c: char) -> (char, usize) {
        if (c as u32) < 0x10000 {
            let entry = self.bmp[c as usize];
            let replacement = entry & 0x1F_FFFF;
            let to = if replacement == 0 { c } else { char::from_u32(replacement).unwrap_or(c) };
            (to, (entry >> 24) as usize)
        } else {
            (*self.characters.get(&c).unwrap_or(&c), self.phrase_starts.get(&c).copied().unwrap_or(0))
        }
    }

    /// Appends the conversion of `text` to `out`: unchanged stretches are copied as they are.
    fn convert(&self, text: &[char], out: &mut Vec<char>, interrupt: Interrupt<'_>) {
        let converted = self.convert_unless_changed_by(None, &self.gate, text, out, interrupt);
        debug_assert!(converted);
    }

    /// [`Converter::convert`], unless `first` would change `text` somewhere: then `false`, with
    /// `out` partly written. So the second of two conversions runs in the same pass as the check
    /// that the first has nothing to do (Simplified text has no Traditional character or phrase),
    /// where the first's output would be `text` itself. `either` is where either converter may
    /// change something (this one's gate alone without `first`).
    fn convert_unless_changed_by(
        &self,
        first: Option<&Converter>,
        either: &Gate,
        text: &[char],
        out: &mut Vec<char>,
        interrupt: Interrupt<'_>,
    ) -> bool {
        let pair_at = |j: usize| pair_bit(text[j], text.get(j + 1).copied().unwrap_or('\0'));
        let mut copied = 0; // text[..copied] is done
        let mut i = 0;
        while i < text.len() {
            // A check every STEP characters or so (a phrase can take `i` past `stop`).
            interrupt.check();
            let stop = (i + STEP).min(text.len());
            'next: while i < stop {
                let c = text[i];
                let pair = pair_at(i);
                // Most characters neither change nor start a phrase with the next one.
                if !either.may_change(c, pair) {
                    i += 1;
                    continue;
                }
                if first.is_some_and(|f| f.gate.may_change(c, pair)) {
                    return false;
                }
                if !self.gate.may_change(c, pair) {
                    i += 1;
                    continue;
                }
                let (replacement, longest) = self.lookup(c);
                if longest >= 2 && i + 1 < text.len() && bit_is_set(&self.gate.pairs[..], pair) {
                    // The lengths of the prefixes of text[i..] whose hash bit is set (bit `len` of
                    // `lengths`), then the longest of them that is a phrase.
                    let mut lengths = 0u64;
                    let mut h = PhraseHash::START;
                    for (len, &c) in text[i..i + longest.min(text.len() - i)].iter().enumerate() {
                        h = h.add(c);
                        lengths |= u64::from(bit_is_set(&self.phrase_hashes, h.bit())) << (len + 1);
                    }
                    lengths &= !0b11;
                    while lengths != 0 {
                        let len = 63 - lengths.leading_zeros() as usize;
                        lengths &= !(1 << len);
                        if let Some(value) = self.phrases.get(&text[i..i + len]) {
                            // The rest of the phrase must be left alone by `first` too.
                            if first.is_some_and(|f| (i + 1..i + len).any(|j| f.gate.may_change(text[j], pair_at(j)))) {
                                return false;
                            }
                            out.extend_from_slice(&text[copied..i]);
                            out.extend_from_slice(value);
                            i += len;
                            copied = i;
                            continue 'next;
                        }
                    }
                }
                if replacement != c {
                    out.extend_from_slice(&text[copied..i]);
                    out.push(replacement);
                    copied = i + 1;
                }
                i += 1;
            }
        }
        out.extend_from_slice(&text[copied..]);
        true
    }
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

fn opencc_pairs(file: &'static str) -> impl Iterator<Item = (&'static str, &'static str)> {
    file.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(|l| {
        let (key, values) = l.split_once('\t')?;
        Some((key, values.split(' ').next()?))
    })
}

/// Script folding, step 1, for every text: Traditional phrases and characters to Simplified
/// (OpenCC's `TSPhrases`, longest first, then `TSCharacters`). A character that is itself the
/// Simplified form of another (么 for 麼, 著 in 著名) is left alone, so Simplified text keeps its
/// characters. Keys and values are lower-cased like the text.
static CHARACTERS: LazyLock<Converter> = LazyLock::new(|| {
    let ts: Vec<(char, char)> = opencc_pairs(include_str!("../data/opencc/TSCharacters.txt"))
        .filter_map(|(k, v)| Some((single_char(k)?, single_char(v)?)))
        .collect();
    let simplified: HashSet<char> = ts.iter().map(|&(_, v)| v).collect();
    let phrases = opencc_pairs(include_str!("../data/opencc/TSPhrases.txt"))
        .map(|(k, v)| (fold_without_script(k), fold_without_script(v)));
    Converter::from_pairs(phrases, ts.into_iter().filter(|(k, _)| !simplified.contains(k)))
});

/// Script folding, step 2, for every text: Taiwan vocabulary (in Simplified characters) to
/// mainland vocabulary (OpenCC's `TWPhrasesRev`, `TWVariantsRevPhrases`). Every mainland form is
/// also an identity phrase, so that the longest match at a mainland word keeps it whole (without
/// them, the Taiwan word 哈萨克 would turn 哈萨克斯坦 into 哈萨克斯坦斯坦), and a Taiwan form that is
/// another entry's mainland form is left out (程序 is the mainland form of 程式, so 程序 is not
/// turned into 进程): the mapping cannot chain, and folding twice changes nothing.
static VOCABULARY: LazyLock<Converter> = LazyLock::new(|| {
    let simplify = |s: &str| {
        let mut out = Vec::with_capacity(s.len());
        CHARACTERS.convert(&fold_without_script(s).chars().collect::<Vec<char>>(), &mut out, Interrupt::NEVER);
        out.into_iter().collect::<String>()
    };
    let pairs: Vec<(String, String)> =
        [include_str!("../data/opencc/TWPhrasesRev.txt"), include_str!("../data/opencc/TWVariantsRevPhrases.txt")]
            .into_iter()
            .flat_map(opencc_pairs)
            .map(|(k, v)| (simplify(k), simplify(v)))
            .filter(|(k, v)| k != v)
            .collect();
    let mainland: HashSet<String> = pairs.iter().map(|(_, v)| v.clone()).collect();
    let identities: Vec<(String, String)> = mainland.iter().map(|v| (v.clone(), v.clone())).collect();
    Converter::from_pairs(
        pairs.into_iter().filter(|(k, _)| !mainland.contains(k)).chain(identities),
        std::iter::empty(),
    )
});

/// Where either step may change something.
static EITHER: LazyLock<Gate> = LazyLock::new(|| CHARACTERS.gate.union(&VOCABULARY.gate));

/// Loads the conversion tables now rather than on first use.
pub fn preload() {
    LazyLock::force(&CHARACTERS);
    LazyLock::force(&VOCABULARY);
    LazyLock::force(&EITHER);
}

/// The folded form of `text` (see the module documentation).
pub fn fold(text: &str) -> String {
    fold_interruptible(text, Interrupt::NEVER)
}

/// [`fold`], checking `interrupt` as it goes.
pub fn fold_interruptible(text: &str, interrupt: Interrupt<'_>) -> String {
    chars_to_string(&fold_chars(text, interrupt), interrupt)
}

/// `chars` as a string, checking `interrupt` as it goes.
fn chars_to_string(chars: &[char], interrupt: Interrupt<'_>) -> String {
    let mut string = String::with_capacity(chars.len());
    for piece in chars.chunks(STEP) {
        interrupt.check();
        string.extend(piece);
    }
    string
}

/// [`fold`] as characters (what shingles are cut from).
pub(crate) fn fold_chars(text: &str, interrupt: Interrupt<'_>) -> Vec<char> {
    let folded = fold_without_script_chars(text, interrupt);
    if !folded.chunks(STEP).any(|piece| {
        interrupt.check();
        piece.iter().any(|&c| c as u32 >= 0x2E80)
    }) {
        return folded;
    }
    // Text without Traditional characters or phrases (most Chinese text here) in one pass.
    let mut out = Vec::with_capacity(folded.len());
    if VOCABULARY.convert_unless_changed_by(Some(&CHARACTERS), &EITHER, &folded, &mut out, interrupt) {
        return out;
    }
    let mut step = Vec::with_capacity(folded.len());
    CHARACTERS.convert(&folded, &mut step, interrupt);
    out.clear();
    VOCABULARY.convert(&step, &mut out, interrupt);
    out
}

/// NFKC, lower case and whitespace (conversions do not touch whitespace, so it can go first).
fn fold_without_script(text: &str) -> String {
    fold_without_script_chars(text, Interrupt::NEVER).into_iter().collect()
}

/// [`fold_without_script`] as characters: one pass for simple characters, else the general path.
fn fold_without_script_chars(text: &str, interrupt: Interrupt<'_>) -> Vec<char> {
    fold_simple_characters(text, interrupt)
        .unwrap_or_else(|| Checked::new(fold_without_script_general(text, interrupt).chars(), interrupt).collect())
}

/// What [`fold_simple_characters`] does with each character of the Basic Multilingual Plane: the
/// character it folds to, or one of the markers below (all above the last character).
///
/// A simple character is one that is alone a complete NFKC text (quick check Yes, canonical
/// combining class 0, so no neighbour can compose with it or be reordered around it), is not
/// whitespace and lower-cases to one character: it folds to its lower case. Capital sigma is left
/// out (its lower case depends on its position in a word). ASCII, full-width ASCII (narrowed, as
/// [`fold_without_script_general`] does), the ellipsis and the whitespace characters that folding
/// narrows are handled too.
static SIMPLE_CHARACTERS: LazyLock<Vec<u32>> = LazyLock::new(|| {
    (0..0x10000u32)
        .map(|code| match code {
            0x09..=0x0D | 0x20 | 0xA0 | 0x3000 => WHITESPACE,
            0..=0x7F => (code as u8).to_ascii_lowercase().into(),
            0xFF01..=0xFF5E => ((code - 0xFEE0) as u8).to_ascii_lowercase().into(),
            0x2026 => ELLIPSIS,
            _ => {
                let Some(c) = char::from_u32(code) else { return NOT_SIMPLE };
                let mut lower = c.to_lowercase();
                match (lower.next(), lower.next()) {
                    (Some(l), None)
                        if !c.is_whitespace()
                            && c != 'Σ'
                            && unicode_normalization::char::canonical_combining_class(c) == 0
                            && is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes =>
                    {
                        l as u32
                    }
                    _ => NOT_SIMPLE,
                }
            }
        })
        .collect()
});

/// Markers of [`SIMPLE_CHARACTERS`]: a character that takes the general path, whitespace, and the
/// ellipsis (which folds to three characters, "...").
const NOT_SIMPLE: u32 = u32::MAX;
const WHITESPACE: u32 = u32::MAX - 1;
const ELLIPSIS: u32 = u32::MAX - 2;

/// [`fold_without_script_general`] in one pass, for the text made of simple characters (most
/// Chinese and English text): `None` when it meets any other character. A text of characters that
/// are each complete NFKC texts with combining class 0 passes NFKC's quick check, so it is already
/// normalized; lower-casing it character by character is what `str::to_lowercase` does (but for
/// final sigma). The unit tests compare both paths on every character.
fn fold_simple_characters(text: &str, interrupt: Interrupt<'_>) -> Option<Vec<char>> {
    let table = &*SIMPLE_CHARACTERS;
    // A character folds to at most as many characters as it has bytes in UTF-8 ("..." for '…'),
    // and a space is written only for whitespace that wrote nothing: the text's length is room enough.
    let mut folded = vec!['\0'; text.len()];
    let mut len = 0;
    let mut after_whitespace = false;
    // The loop over the characters of a piece of the text.
    macro_rules! fold_piece {
        ($piece:expr) => {
            for c in $piece.chars() {
                let to = table.get(c as usize).copied().unwrap_or(NOT_SIMPLE);
                if to == NOT_SIMPLE {
                    return None;
                }
                if to == ELLIPSIS {
                    if after_whitespace && len > 0 {
                        folded[len] = ' ';
                        len += 1;
                    }
                    folded[len..len + 3].fill('.');
                    len += 3;
                    after_whitespace = false;
                    continue;
                }
                // Without a branch on whitespace (a sixth of English text): one space before a
                // character that follows whitespace (none at the start), then the character
                // unless it is whitespace.
                let whitespace = to == WHITESPACE;
                folded[len] = ' ';
                len += usize::from(after_whitespace & !whitespace & (len > 0));
                folded[len] = char::from_u32(to).unwrap_or(' ');
                len += usize::from(!whitespace);
                after_whitespace = whitespace;
            }
        };
    }
    // A short text (most) in one loop: the loop over pieces costs a few percent of this hot path.
    if text.len() <= STEP {
        interrupt.check();
        fold_piece!(text);
    } else {
        for piece in pieces(text, interrupt) {
            fold_piece!(piece);
        }
    }
    folded.truncate(len);
    Some(folded)
}

/// [`fold_chars`] in one pass, as a stream, for text that script folding leaves alone (most text
/// in spaced scripts): calls `each` with every folded character, and with `None` where folding
/// writes whitespace or an ellipsis. `false` (after calls for a prefix) where the text has a
/// character that is not simple or that folds to U+2E80 or above, which [`fold_chars`] would run
/// through the script conversion: the caller then takes [`fold_chars`].
#[inline]
pub(crate) fn fold_unscripted(text: &str, interrupt: Interrupt<'_>, mut each: impl FnMut(Option<char>)) -> bool {
    let table = &*SIMPLE_CHARACTERS;
    for piece in pieces(text, interrupt) {
        for c in piece.chars() {
            let to = table.get(c as usize).copied().unwrap_or(NOT_SIMPLE);
            if to < 0x2E80 {
                each(Some(char::from_u32(to).unwrap_or(' ')));
            } else if to == WHITESPACE || to == ELLIPSIS {
                each(None);
            } else {
                return false;
            }
        }
    }
    true
}

/// NFKC, lower case and whitespace, for any text (ASCII text always takes the one-pass fold).
fn fold_without_script_general(text: &str, interrupt: Interrupt<'_>) -> String {
    // A short text (most) without the checks inside normalization and lower case, which cost a
    // few percent of this path.
    if text.len() <= STEP {
        interrupt.check();
        fold_general::<false>(text, Interrupt::NEVER)
    } else {
        fold_general::<true>(text, interrupt)
    }
}

/// [`fold_without_script_general`], checking `interrupt` as it goes if `CHECK`.
fn fold_general<const CHECK: bool>(text: &str, interrupt: Interrupt<'_>) -> String {
    // Full-width ASCII (，：（） in Chinese text) is what most often keeps text out of NFKC: map it
    // here, as NFKC would, so that the slow full normalization runs only where something else needs it.
    // The same for no-break spaces (from &nbsp;) and the ellipsis.
    let mut narrowed = String::with_capacity(text.len());
    for piece in pieces(text, interrupt) {
        for c in piece.chars() {
            match c as u32 {
                0xFF01..=0xFF5E => narrowed.push(char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)),
                0x3000 | 0xA0 => narrowed.push(' '),
                0x2026 => narrowed.push_str("..."),
                _ => narrowed.push(c),
            }
        }
    }
    // Normalization is another crate's: with checks, it is fed characters through an iterator
    // that checks.
    let quick =
        if CHECK { is_nfkc_quick(Checked::new(narrowed.chars(), interrupt)) } else { is_nfkc_quick(narrowed.chars()) };
    let lower = |s: &str| if CHECK { to_lowercase(s, STEP, interrupt) } else { s.to_lowercase() };
    let normalized: String = if quick == IsNormalized::Yes {
        lower(&narrowed)
    } else {
        let nfkc: String =
            if CHECK { Checked::new(narrowed.chars(), interrupt).nfkc().collect() } else { narrowed.nfkc().collect() };
        drop(narrowed);
        lower(&nfkc)
    };
    let mut folded = String::with_capacity(normalized.len());
    for (n, word) in normalized.split_whitespace().enumerate() {
        if CHECK && n % STEP == 0 {
            interrupt.check();
        }
        if !folded.is_empty() {
            folded.push(' ');
        }
        folded.push_str(word);
    }
    folded
}

/// `str::to_lowercase`, in pieces of about `piece_bytes`, checking `interrupt` before each.
///
/// Only capital sigma's lower case depends on its neighbours: it is final (ς) where a cased letter
/// comes before it and none after it, both searched for across case-ignorable characters. A piece
/// ends before a character that is neither cased nor case-ignorable ([`ends_lowercase_piece`]),
/// where both searches stop and find no cased letter, as they do at the end or the start of a
/// piece: so the pieces give what the whole text gives. A text with no such character for a long
/// stretch (words of a cased script without spaces) takes that stretch in one piece.
fn to_lowercase(text: &str, piece_bytes: usize, interrupt: Interrupt<'_>) -> String {
    let mut lower = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        interrupt.check();
        let mut from = piece_bytes.clamp(1, rest.len());
        while !rest.is_char_boundary(from) {
            from += 1;
        }
        let end =
            rest[from..].char_indices().find(|&(_, c)| ends_lowercase_piece(c)).map_or(rest.len(), |(i, _)| from + i);
        lower.push_str(&rest[..end].to_lowercase());
        rest = &rest[end..];
    }
    lower
}

/// Characters that are neither cased nor case-ignorable (in Unicode's sense, which `to_lowercase`
/// follows): the space, ASCII digits, the CJK Unified Ideographs (a unit test checks each).
#[inline]
fn ends_lowercase_piece(c: char) -> bool {
    c == ' ' || c.is_ascii_digit() || ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_width_case_and_whitespace() {
        assert_eq!(fold("  ＰｏｓｔｇｒｅＳＱＬ\t１５\n\n is  GREAT "), "postgresql 15 is great");
        assert_eq!(fold(""), "");
        assert_eq!(fold("   "), "");
    }

    #[test]
    fn folds_traditional_and_taiwan_vocabulary_to_simplified() {
        assert_eq!(fold("軟體開發"), "软件开发");
        assert_eq!(fold("這個程式讀取檔案"), "这个程序读取文件");
        assert_eq!(fold("資料庫伺服器"), "数据库服务器");
        assert_eq!(fold("海量网页去重"), "海量网页去重"); // Simplified stays as it is
                                                          // Not the Taiwan sense of 程序 (进程).
        assert_eq!(fold("程序设计"), "程序设计");
        // Taiwan vocabulary written in Simplified characters (OpenCC's plain t2s keeps it) folds too.
        assert_eq!(fold("这个程式读取档案"), "这个程序读取文件");
        // Mainland words stay whole; Simplified characters stay.
        assert_eq!(fold("哈萨克斯坦和尼日利亚"), "哈萨克斯坦和尼日利亚");
        assert_eq!(fold("这是一位著名作家的著作，什么"), "这是一位著名作家的著作,什么");
        assert_eq!(fold("a\u{b}b"), fold("a\u{b}b é").split(' ').take(2).collect::<Vec<_>>().join(" "));
    }

    /// The one-pass fold of simple characters agrees with the general one on every character of the
    /// BMP it accepts, alone and between other characters, and on mixed texts.
    #[test]
    fn simple_characters_fold_like_the_general_path() {
        let mut accepted = 0;
        for code in 0..0x10000u32 {
            let Some(c) = char::from_u32(code) else { continue };
            for text in [c.to_string(), format!("A{c}b"), format!("x {c}\t{c}{c} 中"), format!("{c}\u{3000}Ｚ…")] {
                if let Some(fast) = fold_simple_characters(&text, Interrupt::NEVER) {
                    accepted += 1;
                    let general = fold_without_script_general(&text, Interrupt::NEVER);
                    assert_eq!(String::from_iter(fast), general, "U+{code:04X} in {text:?}");
                }
            }
        }
        assert!(accepted > 4 * 40_000, "only {accepted} texts took the one-pass fold");
        assert!((0x4E00..=0x9FFF).all(|code| SIMPLE_CHARACTERS[code as usize] == code));
        for text in
            ["  ＰｏｓｔｇｒｅＳＱＬ\t１５\n\n is  GREAT ", "資料庫，伺服器。", "ΟΔΟΣ", "e\u{301}", "Ǆ ǅ ǆ", "ﬁ ① ㈱"]
        {
            assert_eq!(fold_without_script(text), fold_without_script_general(text, Interrupt::NEVER), "{text}");
            assert_eq!(fold_general::<true>(text, Interrupt::NEVER), fold_general::<false>(text, Interrupt::NEVER));
        }
        assert!(fold_simple_characters("ΟΔΟΣ", Interrupt::NEVER).is_none());
        assert!(fold_simple_characters("e\u{301}", Interrupt::NEVER).is_none());
    }

    /// Fingerprints depend on Unicode tables: Rust's standard library's (lower case, letters and
    /// digits, whitespace) and unicode-normalization's (NFKC, combining marks), so a toolchain or a
    /// crate version with other tables could change stored fingerprints. This digest of everything
    /// folding and shingling read from them fails first; a new value is a fingerprint format change.
    #[test]
    fn unicode_tables_are_those_the_format_was_defined_with() {
        assert_eq!(char::UNICODE_VERSION, (17, 0, 0));
        assert_eq!(unicode_normalization::UNICODE_VERSION, (18, 0, 0));
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        let mut add = |v: u64| digest = (digest ^ v).wrapping_mul(0x100_0000_01b3);
        for c in (0..=0x10_FFFFu32).filter_map(char::from_u32) {
            c.to_lowercase().for_each(|l| add(l as u64));
            std::iter::once(c).nfkc().for_each(|n| add(n as u64));
            add(u64::from(c.is_alphanumeric())
                | u64::from(c.is_whitespace()) << 1
                | u64::from(unicode_normalization::char::is_combining_mark(c)) << 2
                | u64::from(unicode_normalization::char::canonical_combining_class(c)) << 3
                | u64::from(is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes) << 11);
        }
        assert_eq!(digest, 352_621_001_077_749_215, "Unicode tables changed: fingerprints of some texts may change");
    }

    /// The one-pass conversion of text the Traditional step leaves alone gives what the two steps
    /// give, and it gives up on text that step would change.
    #[test]
    fn one_pass_conversion_equals_two_steps() {
        let two_steps = |text: &[char]| {
            let mut step = Vec::new();
            CHARACTERS.convert(text, &mut step, Interrupt::NEVER);
            let mut out = Vec::new();
            VOCABULARY.convert(&step, &mut out, Interrupt::NEVER);
            (step == text, out)
        };
        let mut texts: Vec<String> = [
            "这个程式读取档案",
            "哈萨克斯坦和尼日利亚",
            "軟體開發",
            "海量网页去重",
            "a型肝炎和b型肝炎",
            "资讯科技",
            "程序设计",
            "𠮷野家的程式",
            "中文 English 混合的資料庫",
            "",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        for (k, v) in [include_str!("../data/opencc/TWPhrasesRev.txt"), include_str!("../data/opencc/TSPhrases.txt")]
            .into_iter()
            .flat_map(opencc_pairs)
            .step_by(7)
        {
            texts.push(format!("前{k}后{v}。{k}{k}"));
            texts.push(fold(&format!("{v}的{k}")));
        }
        let mut one_pass = 0;
        for text in &texts {
            let chars: Vec<char> = fold_without_script(text).chars().collect();
            let (unchanged_by_first, expected) = two_steps(&chars);
            let mut out = Vec::new();
            let done =
                VOCABULARY.convert_unless_changed_by(Some(&CHARACTERS), &EITHER, &chars, &mut out, Interrupt::NEVER);
            if done {
                one_pass += 1;
                assert!(unchanged_by_first, "{text}");
                assert_eq!(out, expected, "{text}");
            }
        }
        assert!(one_pass > texts.len() / 4, "only {one_pass} of {} texts took one pass", texts.len());
    }

    /// The characters a lower-casing piece may end before are neither cased nor case-ignorable:
    /// a capital sigma before one of them, after a cased letter, is final whatever follows.
    #[test]
    fn lowercase_pieces_end_before_uncased_characters() {
        let ends: Vec<char> = (0..=0x10_FFFF).filter_map(char::from_u32).filter(|&c| ends_lowercase_piece(c)).collect();
        assert_eq!(ends.len(), 1 + 10 + (0x9FFF - 0x4E00 + 1));
        for c in ends {
            assert_eq!(format!("aΣ{c}b").to_lowercase(), format!("aς{c}b"), "U+{:04X}", c as u32);
            assert_eq!(format!("{c}Σb").to_lowercase(), format!("{c}σb"), "U+{:04X}", c as u32);
        }
    }

    /// Lower case in pieces is `str::to_lowercase`, for texts full of sigmas, case-ignorable
    /// characters and piece ends, cut in pieces of every small size.
    #[test]
    fn lowercase_in_pieces_equals_to_lowercase() {
        let alphabet: Vec<char> = "ΣΣσςAaİǅ 1中'.:\u{301}\u{2019}-ͅ·".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let len = (state >> 58) as usize;
            let text: String = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    alphabet[(state >> 33) as usize % alphabet.len()]
                })
                .collect();
            for piece_bytes in [0, 1, 2, 3, 5, 8] {
                assert_eq!(to_lowercase(&text, piece_bytes, Interrupt::NEVER), text.to_lowercase(), "{text:?}");
            }
        }
    }

    /// Long texts of each path (one pass, conversion in one pass and in two steps, the general
    /// path) fold as before with checks all along, and stop when a check unwinds.
    #[test]
    fn long_texts_fold_interruptibly() {
        for unit in [
            "PostgreSQL is a database. ",
            "海量网页去重是搜索引擎的基础工作。",
            "軟體開發的資料庫伺服器，",
            "Café ﬁnal ΣΑΣ 資料庫 e\u{301} ",
        ] {
            let text = unit.repeat(20 * STEP / unit.len());
            let expected: String = fold_chars(&text, Interrupt::NEVER).into_iter().collect();
            let (stopped, checks) = crate::interrupt::tests::run_stopping(usize::MAX, |i| {
                assert_eq!(fold_interruptible(&text, i), expected);
            });
            assert!(!stopped && checks >= 20, "{unit}: {checks} checks");
            for stop_at in [1, checks / 2, checks - 1] {
                assert!(crate::interrupt::tests::run_stopping(stop_at, |i| fold_interruptible(&text, i)).0);
            }
        }
    }

    /// Every OpenCC phrase fits the converters' limit (a longer one would be left out).
    #[test]
    fn phrases_fit_the_limit() {
        for file in [
            include_str!("../data/opencc/TSPhrases.txt"),
            include_str!("../data/opencc/TWPhrasesRev.txt"),
            include_str!("../data/opencc/TWVariantsRevPhrases.txt"),
        ] {
            for (k, v) in opencc_pairs(file) {
                for phrase in [k, v] {
                    assert!(fold_without_script(phrase).chars().count() <= MAX_PHRASE, "{phrase}");
                }
            }
        }
    }

    /// Folding is a normal form: folding again changes nothing, and both sides of OpenCC's Taiwan
    /// vocabulary fold to the same text (all but a few entries that overlap other phrases).
    #[test]
    fn folding_is_idempotent_and_joins_taiwan_and_mainland_words() {
        let mut differ = Vec::new();
        for (k, v) in
            [include_str!("../data/opencc/TWPhrasesRev.txt"), include_str!("../data/opencc/TWVariantsRevPhrases.txt")]
                .into_iter()
                .flat_map(opencc_pairs)
        {
            for t in [k, v] {
                assert_eq!(fold(&fold(t)), fold(t), "{t}");
            }
            if fold(k) != fold(v) {
                differ.push(format!("{k}/{v}: {}/{}", fold(k), fold(v)));
            }
        }
        // 12 today: one-character Taiwan words (埠, 矽) and the entries left out against chains (程序, 文件).
        assert!(differ.len() <= 12, "{} pairs fold apart: {:?}", differ.len(), &differ[..differ.len().min(30)]);
    }
}
