//! Stopping a long computation on the caller's request: every loop over user data (characters,
//! shingles, words, features) calls an [`Interrupt`] once per [`STEP`] items or so, and the caller
//! decides there whether to go on. In PostgreSQL the check looks for a cancel request or a statement
//! timeout and, if there is one, raises the error, which unwinds out of the computation; the plain
//! functions of this crate pass [`Interrupt::NEVER`], which does nothing. A check must be cheap
//! (PostgreSQL's reads one flag): loops call it between pieces of work, not in their inner loops.
//!
//! Work done in one call of another crate (jieba-rs' segmentation, Unicode normalization) is
//! either fed to it in pieces that provably give the same result, or driven through an iterator
//! that checks as the other crate pulls characters ([`Checked`]).
//!
//! Nothing checks while a lazily built table (`LazyLock`) is being built: an unwinding check there
//! would poison the table for the life of the process.

/// What long loops call every [`STEP`] items or so (see the module documentation).
#[derive(Clone, Copy)]
pub struct Interrupt<'a>(&'a dyn Fn());

impl<'a> Interrupt<'a> {
    /// Never stops anything.
    pub const NEVER: Interrupt<'static> = Interrupt(&|| {});

    /// Calls `check` between pieces of work; `check` stops the computation by unwinding (a panic,
    /// or PostgreSQL's error turned into one) and otherwise returns.
    pub const fn new(check: &'a dyn Fn()) -> Interrupt<'a> {
        Interrupt(check)
    }

    #[inline]
    pub fn check(self) {
        (self.0)()
    }
}

/// Items (characters, bytes, shingles, words) between two checks: a few hundred microseconds of work
/// at most, against a check that costs a few nanoseconds.
pub const STEP: usize = 1 << 14;

/// `text` in consecutive pieces of about [`STEP`] bytes, cut at character boundaries, checking
/// before each piece.
pub(crate) fn pieces<'t, 'i>(text: &'t str, interrupt: Interrupt<'i>) -> impl Iterator<Item = &'t str> + use<'t, 'i> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        interrupt.check();
        let mut end = STEP.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// The ranges `start..end` of `0..len` in steps of [`STEP`], checking before each.
pub(crate) fn ranges(len: usize, interrupt: Interrupt<'_>) -> impl Iterator<Item = std::ops::Range<usize>> + use<'_> {
    (0..len).step_by(STEP).map(move |start| {
        interrupt.check();
        start..(start + STEP).min(len)
    })
}

/// An iterator that checks every [`STEP`] items, for work done inside another crate's function
/// that takes an iterator (Unicode normalization).
pub(crate) struct Checked<'i, I> {
    inner: I,
    left: usize,
    interrupt: Interrupt<'i>,
}

impl<'i, I> Checked<'i, I> {
    pub(crate) fn new(inner: I, interrupt: Interrupt<'i>) -> Self {
        Checked { inner, left: 0, interrupt }
    }
}

impl<I: Iterator> Iterator for Checked<'_, I> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Option<I::Item> {
        if self.left == 0 {
            self.interrupt.check();
            self.left = STEP;
        }
        self.left -= 1;
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// Elements a comparison sort takes in one go between two checks for interrupts (about 30 ms).
const SORTED_AT_ONCE: usize = 1 << 20;

/// `items.sort_unstable_by(compare)`, in pieces of at most [`SORTED_AT_ONCE`] elements with a
/// check for interrupts between them: a longer slice is split around a pivot ([`split_checked`])
/// and its parts sorted alone.
pub(crate) fn sort_checked<T>(items: &mut [T], compare: &impl Fn(&T, &T) -> std::cmp::Ordering, interrupt: Interrupt) {
    sort_in_pieces(items, compare, SORTED_AT_ONCE, interrupt)
}

/// [`sort_checked`] in pieces of at most `at_once` elements (at least one).
pub fn sort_in_pieces<T>(
    items: &mut [T],
    compare: &impl Fn(&T, &T) -> std::cmp::Ordering,
    at_once: usize,
    interrupt: Interrupt,
) {
    if items.len() <= at_once.max(1) {
        items.sort_unstable_by(compare);
    } else {
        let (before, after) = split_checked(items, compare, interrupt);
        let (low, rest) = items.split_at_mut(before);
        sort_in_pieces(low, compare, at_once, interrupt);
        interrupt.check();
        sort_in_pieces(&mut rest[after - before..], compare, at_once, interrupt);
        interrupt.check();
    }
}

/// Reorders `items` (at least two) into the elements that order before a pivot, those equal to it
/// and those after it, and returns where the equal ones start and end, checking for interrupts
/// every [`STEP`] elements. The pivot is the median of a sample of 31 elements, one from each of 31
/// equal stretches of the slice at a place drawn from the slice's length (not at their ends, where
/// sorted runs of input would put it). A first pass moves the elements before it to the front; when
/// that leaves more than seven eighths behind (many equal to the pivot), a second pass over those
/// moves the equal ones to their front. Should one side still hold more than seven eighths, it is
/// split at its median by `select_nth_unstable_by` (linear, but unchecked: only input ordered to
/// defeat the sample gets there), so the parts shrink geometrically whatever the input.
fn split_checked<T>(
    items: &mut [T],
    compare: &impl Fn(&T, &T) -> std::cmp::Ordering,
    interrupt: Interrupt,
) -> (usize, usize) {
    use std::cmp::Ordering::{Greater, Less};
    let n = items.len();
    let mut sample = sample_places(n);
    sample.sort_unstable_by(|&a, &b| compare(&items[a], &items[b]));
    items.swap(0, sample[sample.len() / 2]);
    let (pivot, rest) = items.split_at_mut(1);
    let pivot = &pivot[0];
    let before = partition_checked(rest, &|item| compare(item, pivot) == Less, interrupt);
    let mut after = before;
    if (rest.len() - before) * 8 > n * 7 {
        after += partition_checked(&mut rest[before..], &|item| compare(item, pivot) != Greater, interrupt);
    }
    // rest[..before] < pivot, rest[before..after] == pivot (when the second pass ran), the rest
    // after; the pivot (at 0) joins the equal ones, the last of the smaller ones taking its place.
    items.swap(0, before);
    let after = after + 1;
    if before * 8 > n * 7 {
        items[..before].select_nth_unstable_by(before / 2, compare);
        return (before / 2, before / 2);
    }
    if (n - after) * 8 > n * 7 {
        let middle = after + (n - after) / 2;
        items[after..].select_nth_unstable_by(middle - after, compare);
        return (middle, middle);
    }
    (before, after)
}

/// Where [`split_checked`] samples a slice of `n` elements (at least one): one place in each of 31
/// equal stretches, drawn from `n`, ascending, each once.
fn sample_places(n: usize) -> Vec<usize> {
    let mut state = (n as u64) ^ 0x9e37_79b9_7f4a_7c15;
    let mut places: Vec<usize> = (0..31)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (start, end) = (i * n / 31, (i + 1) * n / 31);
            start + (state % (end - start).max(1) as u64) as usize
        })
        .collect();
    places.dedup();
    places
}

/// Moves the elements of `items` for which `first` holds to its front (in no particular order)
/// and returns how many there are, checking for interrupts every [`STEP`] elements (a Lomuto
/// partition without branches on `first`: the element is swapped either way).
fn partition_checked<T>(items: &mut [T], first: &impl Fn(&T) -> bool, interrupt: Interrupt) -> usize {
    let mut front = 0;
    for range in ranges(items.len(), interrupt) {
        for at in range {
            let is_first = first(&items[at]);
            items.swap(front, at);
            front += usize::from(is_first);
        }
    }
    front
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;

    /// A check that counts its calls and stops (panics) at call `stop_at`.
    pub(crate) struct Counter {
        pub calls: Cell<usize>,
        pub stop_at: usize,
    }

    impl Counter {
        pub fn new(stop_at: usize) -> Counter {
            Counter { calls: Cell::new(0), stop_at }
        }

        pub fn check(&self) {
            self.calls.set(self.calls.get() + 1);
            if self.calls.get() >= self.stop_at {
                std::panic::panic_any(Stopped);
            }
        }
    }

    /// The payload of a stop.
    pub(crate) struct Stopped;

    /// Runs `f` with a check that stops it at its `stop_at`th call: whether it stopped, and how many
    /// checks it made.
    pub(crate) fn run_stopping<R>(stop_at: usize, f: impl FnOnce(Interrupt<'_>) -> R) -> (bool, usize) {
        let counter = Counter::new(stop_at);
        let check = || counter.check();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(Interrupt::new(&check))));
        let stopped = match result {
            Ok(_) => false,
            Err(payload) => {
                assert!(payload.is::<Stopped>(), "a panic other than the stop");
                true
            }
        };
        (stopped, counter.calls.get())
    }

    /// Varied texts for comparing a computation in pieces with the one in one go: Chinese phrases
    /// (Traditional and Simplified, from OpenCC's tables), English, numbers, stop words in upper
    /// and lower case, other scripts, whitespace and punctuation of every kind, "\r\n".
    pub(crate) fn sample_texts(count: usize, max_tokens: usize) -> Vec<String> {
        let mut tokens: Vec<&str> = include_str!("../data/opencc/TSPhrases.txt")
            .lines()
            .step_by(97)
            .flat_map(|line| line.split(['\t', ' ']))
            .filter(|t| !t.is_empty())
            .collect();
        tokens.extend([
            "今天",
            "纽约",
            "的",
            "天气",
            "真好",
            "啊",
            "京华",
            "大酒店",
            "张尧",
            "经理",
            "吃了",
            "一只",
            "北京烤鸭",
            "海量",
            "网页",
            "去重",
            "是",
            "搜索引擎",
            "的基础",
            "工作",
            "數據庫",
            "資料庫",
            "伺服器",
            "程式",
            "檔案",
            "4.3亿元",
            "-139.13万元",
            "2013年",
            "C++",
            "c#",
            "PostgreSQL",
            "postgresql",
            "THE",
            "The",
            "the",
            "is",
            "IS",
            "and",
            "quick",
            "brown",
            "fox",
            "jumps",
            "over",
            "lazy",
            "dog",
            "Ünïcödé",
            "ΣΑΣ",
            "σας",
            "カタカナ",
            "ひらがな",
            "한국어",
            "😀",
            "e\u{301}",
            "ﬁnal",
            "Ｆｕｌｌ",
            "a.b.c",
            "x_y",
            "50%",
            "R&D",
            "日本語の文章",
            "𠮷野家",
            "abc123def",
            "123",
            "x",
        ]);
        let separators = [
            "", "", "", " ", " ", "，", "。", ",", ".", "! ", "？", "\r\n", "\n", "\r", "、", "；", "…", "——", "(",
            ")", "\t", "\u{3000}", "'", "\"", "/", "=",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % m
        };
        (0..count)
            .map(|_| {
                let n = next(max_tokens + 1);
                let mut text = String::new();
                for _ in 0..n {
                    text.push_str(tokens[next(tokens.len())]);
                    text.push_str(separators[next(separators.len())]);
                }
                text
            })
            .collect()
    }

    /// A text of about `bytes` bytes of Chinese, English or both (repeated, shuffled sample texts).
    pub(crate) fn long_text(bytes: usize, seed: usize) -> String {
        let texts = sample_texts(64, 300);
        let mut text = String::with_capacity(bytes + 4096);
        let mut i = seed;
        while text.len() < bytes {
            text.push_str(&texts[i % texts.len()]);
            text.push_str("。 ");
            i = i.wrapping_mul(7).wrapping_add(3);
        }
        text
    }

    /// Sorted in pieces as in one go, whatever the order of the input: sorted, reversed, all
    /// equal, few values, organ pipe, random, and a sample of the pivot's that holds the least
    /// values (the split then falls back to the median).
    #[test]
    fn sorts_in_pieces_whatever_the_order() {
        let n = 5_000u64;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut misleading: Vec<u64> = (0..n).map(|_| 1000 + random() % 100_000).collect();
        for (i, place) in sample_places(n as usize).into_iter().enumerate() {
            misleading[place] = i as u64;
        }
        // 30 sorted runs of one value each (the ends of even stretches would sample their largest).
        let runs: Vec<u64> = (0..n).map(|i| i * 30 / n).collect();
        let inputs: Vec<Vec<u64>> = vec![
            runs,
            (0..n).collect(),
            (0..n).rev().collect(),
            vec![7; n as usize],
            (0..n).map(|i| i % 3).collect(),
            (0..n).map(|i| i.min(n - i)).collect(),
            (0..n).map(|_| random() % 1000).collect(),
            misleading,
        ];
        for input in inputs {
            let mut expected = input.clone();
            expected.sort_unstable();
            for at_once in [0, 1, 7, 100, 4_999] {
                let mut sorted = input.clone();
                sort_in_pieces(&mut sorted, &u64::cmp, at_once, Interrupt::NEVER);
                assert_eq!(sorted, expected, "pieces of {at_once}");
            }
        }
    }

    /// A split checks for interrupts as it goes: 16 STEP elements sorted in pieces of 8 STEP are
    /// split once, with a check every STEP elements (and one after each piece).
    #[test]
    fn a_split_checks_for_interrupts() {
        let mut items: Vec<u64> = (0..16 * STEP as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let (stopped, calls) = run_stopping(usize::MAX, |i| sort_in_pieces(&mut items, &u64::cmp, 8 * STEP, i));
        assert!(!stopped && calls >= 16, "{calls} checks");
        assert!(items.is_sorted());
    }

    #[test]
    fn pieces_cover_the_text_at_character_boundaries() {
        let text = "中文 abc ".repeat(STEP);
        let cut: Vec<&str> = pieces(&text, Interrupt::NEVER).collect();
        assert!(cut.len() > 3);
        assert_eq!(cut.concat(), text);
        assert!(cut.iter().all(|p| p.len() < STEP + 4));
        assert_eq!(pieces("", Interrupt::NEVER).count(), 0);
        let ranges: Vec<_> = ranges(2 * STEP + 1, Interrupt::NEVER).collect();
        assert_eq!(ranges, vec![0..STEP, STEP..2 * STEP, 2 * STEP..2 * STEP + 1]);
        let (stopped, calls) = run_stopping(3, |i| Checked::new(0..10 * STEP, i).count());
        assert!(stopped && calls == 3);
        let (stopped, calls) = run_stopping(usize::MAX, |i| Checked::new(0..10 * STEP, i).count());
        assert!(!stopped && calls == 11);
    }
}
