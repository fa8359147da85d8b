//! Text folding: the normal form that fingerprints compare, so that width, case, whitespace and
//! script differences do not count as edits.
//!
//! `fold(text)`: Unicode NFKC (full-width letters and digits, compatibility ideographs, ligatures),
//! lower case, Traditional Chinese (text with more Traditional-only than Simplified-only characters)
//! to Simplified Chinese with Taiwan vocabulary (程式 -> 程序,
//! 檔案 -> 文件; OpenCC's dictionaries, Apache-2.0, in `data/opencc`), and every run of whitespace
//! as one space, trimmed.

use std::sync::LazyLock;

// FNV rather than SipHash: the keys are characters and short phrases, looked up per character.
use fnv::{FnvHashMap as HashMap, FnvHashSet as HashSet};

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// One OpenCC conversion step: the longest phrase that matches at each position, else the character.
struct Converter {
    phrases: HashMap<String, String>,
    /// First characters of phrases, with the longest phrase (in characters) that starts with each:
    /// only there is a phrase lookup worth trying, and only up to that length.
    phrase_starts: HashMap<char, usize>,
    characters: HashMap<char, char>,
}

impl Converter {
    /// `phrase_files` and `character_files` in OpenCC's format: `key<TAB>value [value ...]`; the first
    /// value wins. With `reverse`, a character file maps each value back to its key.
    fn new(phrase_files: &[&str], character_files: &[(&str, bool)]) -> Self {
        fn entries(file: &str) -> impl Iterator<Item = (&str, &str)> {
            file.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(|l| {
                let (key, values) = l.split_once('\t')?;
                Some((key, values.split(' ').next()?))
            })
        }
        let mut converter = Converter {
            phrases: HashMap::default(),
            phrase_starts: HashMap::default(),
            characters: HashMap::default(),
        };
        for file in phrase_files {
            for (key, value) in entries(file) {
                let chars = key.chars().count();
                if chars == 1 {
                    converter.characters.entry(key.chars().next().unwrap()).or_insert_with(|| value.chars().next().unwrap_or(' '));
                    continue;
                }
                if converter.phrases.contains_key(key) {
                    continue;
                }
                let longest = converter.phrase_starts.entry(key.chars().next().unwrap()).or_insert(0);
                *longest = (*longest).max(chars);
                converter.phrases.insert(key.to_string(), value.to_string());
            }
        }
        for &(file, reverse) in character_files {
            for (key, value) in entries(file) {
                let (from, to) = if reverse { (value, key) } else { (key, value) };
                let (Some(from), Some(to)) = (single_char(from), single_char(to)) else { continue };
                if from != to {
                    converter.characters.entry(from).or_insert(to);
                }
            }
        }
        converter
    }

    fn convert(&self, text: &str, out: &mut String) {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut i = 0;
        'next: while i < chars.len() {
            let c = chars[i].1;
            if let Some(&longest) = self.phrase_starts.get(&c) {
                let longest = longest.min(chars.len() - i);
                for len in (2..=longest).rev() {
                    let start = chars[i].0;
                    let end = chars.get(i + len).map_or(text.len(), |&(b, _)| b);
                    if let Some(value) = self.phrases.get(&text[start..end]) {
                        out.push_str(value);
                        i += len;
                        continue 'next;
                    }
                }
            }
            out.push(*self.characters.get(&c).unwrap_or(&c));
            i += 1;
        }
    }
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// Taiwan Traditional -> standard Traditional (OpenCC's first `tw2sp` step).
static TAIWAN_TO_TRADITIONAL: LazyLock<Converter> = LazyLock::new(|| {
    Converter::new(
        &[include_str!("../data/opencc/TWPhrasesRev.txt"), include_str!("../data/opencc/TWVariantsRevPhrases.txt")],
        &[(include_str!("../data/opencc/TWVariants.txt"), true)],
    )
});

/// Traditional -> Simplified (OpenCC's second `tw2sp` step).
static TRADITIONAL_TO_SIMPLIFIED: LazyLock<Converter> = LazyLock::new(|| {
    Converter::new(&[include_str!("../data/opencc/TSPhrases.txt")], &[(include_str!("../data/opencc/TSCharacters.txt"), false)])
});

/// Characters only Traditional text uses, and characters only Simplified text uses.
struct ScriptMarkers {
    /// Bit c of the Basic Multilingual Plane: 1 = Traditional-only, per map.
    traditional: Vec<u64>,
    simplified: Vec<u64>,
}

impl ScriptMarkers {
    fn marks(bits: &[u64], c: char) -> bool {
        let c = c as usize;
        c < 0x10000 && bits[c / 64] >> (c % 64) & 1 == 1
    }
}

static SCRIPT_MARKERS: LazyLock<ScriptMarkers> = LazyLock::new(|| {
    let mut traditional = HashSet::default();
    let mut simplified = HashSet::default();
    for line in include_str!("../data/opencc/TSCharacters.txt").lines().filter(|l| !l.starts_with('#')) {
        let Some((key, values)) = line.split_once('\t') else { continue };
        let (Some(t), Some(s)) = (single_char(key), values.split(' ').next().and_then(single_char)) else { continue };
        if t != s {
            traditional.insert(t);
            simplified.insert(s);
        }
    }
    // A bitmap per script (characters outside the BMP are rare enough to leave out).
    let bitmap = |only: &HashSet<char>, other: &HashSet<char>| {
        let mut bits = vec![0u64; 1024];
        for &c in only.iter().filter(|c| !other.contains(c) && (**c as usize) < 0x10000) {
            bits[c as usize / 64] |= 1 << (c as usize % 64);
        }
        bits
    };
    ScriptMarkers { traditional: bitmap(&traditional, &simplified), simplified: bitmap(&simplified, &traditional) }
});

/// Whether `text` is Traditional Chinese: it has more Traditional-only than Simplified-only
/// characters. Simplified text is left alone: the Taiwan vocabulary step would rewrite mainland
/// words that mean something else in Taiwan (程序, a program there, is a process in Taiwan).
fn is_traditional(text: &str) -> bool {
    let markers = &*SCRIPT_MARKERS;
    let mut balance = 0i64;
    for c in text.chars().filter(|&c| c as u32 >= 0x2E80) {
        if ScriptMarkers::marks(&markers.traditional, c) {
            balance += 1;
        } else if ScriptMarkers::marks(&markers.simplified, c) {
            balance -= 1;
        }
    }
    balance > 0
}

/// Loads the conversion tables now rather than on first use.
pub fn preload() {
    LazyLock::force(&TAIWAN_TO_TRADITIONAL);
    LazyLock::force(&TRADITIONAL_TO_SIMPLIFIED);
    LazyLock::force(&SCRIPT_MARKERS);
}

/// The folded form of `text` (see the module documentation).
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        // ASCII is already in NFKC and has no Chinese: only case and whitespace.
        let mut folded = String::with_capacity(text.len());
        for word in text.split_ascii_whitespace() {
            if !folded.is_empty() {
                folded.push(' ');
            }
            folded.extend(word.bytes().map(|b| b.to_ascii_lowercase() as char));
        }
        return folded;
    }
    // Full-width ASCII (，：（） in Chinese text) is what most often keeps text out of NFKC: map it
    // here, as NFKC would, so that the slow full normalization runs only where something else needs it.
    // The same for no-break spaces (from &nbsp;) and the ellipsis.
    let mut narrowed = String::with_capacity(text.len());
    for c in text.chars() {
        match c as u32 {
            0xFF01..=0xFF5E => narrowed.push(char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)),
            0x3000 | 0xA0 => narrowed.push(' '),
            0x2026 => narrowed.push_str("..."),
            _ => narrowed.push(c),
        }
    }
    let normalized: String = if is_nfkc_quick(narrowed.chars()) == IsNormalized::Yes {
        narrowed.to_lowercase()
    } else {
        narrowed.nfkc().collect::<String>().to_lowercase()
    };
    let mut converted = normalized;
    if is_traditional(&converted) {
        let mut step = String::with_capacity(converted.len());
        TAIWAN_TO_TRADITIONAL.convert(&converted, &mut step);
        converted.clear();
        TRADITIONAL_TO_SIMPLIFIED.convert(&step, &mut converted);
    }
    let mut folded = String::with_capacity(converted.len());
    for word in converted.split_whitespace() {
        if !folded.is_empty() {
            folded.push(' ');
        }
        folded.push_str(word);
    }
    folded
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
        assert_eq!(fold("程序设计"), "程序设计"); // not the Taiwan sense of 程序 (进程)
    }
}
