"""Deterministic test texts of every script (the same list at every run, from a fixed seed), and a
generated load with planted near-duplicates. Used by test_fingerprints.py and test_loader.py."""

import random

# Scripts as (first code point, last code point) ranges of letters, plus words to draw from.
RANGES = {
    "latin": [(0x61, 0x7A), (0x41, 0x5A), (0xE0, 0xFF), (0x100, 0x17F)],
    "cjk": [(0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xD7A3)],
    "cyrillic": [(0x430, 0x44F), (0x410, 0x42F), (0x450, 0x45F)],
    "arabic": [(0x621, 0x64A), (0x64B, 0x652), (0x660, 0x669)],
    "greek": [(0x3B1, 0x3C9), (0x391, 0x3A9)],
    "devanagari": [(0x905, 0x939), (0x93E, 0x94D)],
    "thai": [(0xE01, 0xE2E), (0xE30, 0xE39)],
}
# Characters NFKC and case folding change, and what the folding of Chinese maps.
SPECIAL = "ﬁﬂ①②Ⅻ０１２ＡＢｃ㎏™ß İ ǅ ς Σ K Å ｶﾞ 國語學習 體驗 发展 發展 后 後 里 裡 ¼ ½ … — ‘’ “” · ・"
PUNCT = " ,.;:!?-()[]\"'/\t\n  。，、！？「」《》"
EMOJI = [
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️", "🧑🏿‍💻", "✈︎", "🀄", "🂡", "👩‍🔬", "☕", "🦀", "🐘",
]
CHINESE = (
    "海量网页去重是搜索引擎的基础工作相似的文章应该只保留一份以节省存储和带宽博物馆推出夜间开放活动观众可以参观青铜器特展"
    "今天天气很好我们去公园散步吧北京上海广州深圳的房价又涨了人工智能正在改变世界的许多行业"
)


def _word(rng, script):
    lo, hi = rng.choice(RANGES[script])
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 9)))


def _sentence(rng, script, words):
    if script == "cjk" and rng.random() < 0.5:
        start = rng.randrange(len(CHINESE) - 10)
        return CHINESE[start : start + rng.randint(4, 40)]
    return " ".join(_word(rng, script) for _ in range(words))


def texts(count=100_000, seed=38):
    """`count` texts: every script alone and mixed, emoji, special characters, the empty and the
    blank text, punctuation only, a few long texts (over the module's GIL threshold)."""
    rng = random.Random(seed)
    fixed = ["", " ", "\t\n  \n", "...", "!!!???", "a", "ab", "的", "😀", "👨‍👩‍👧‍👦 🇫🇷", "0", "12", SPECIAL, "A" * 5]
    out = list(fixed)
    scripts = list(RANGES)
    while len(out) < count:
        kind = rng.random()
        if len(out) % 5000 == 17:
            # a long text (about 20-60 KB)
            parts = [_sentence(rng, rng.choice(scripts), 20) for _ in range(rng.randint(100, 300))]
            out.append(" ".join(parts))
        elif kind < 0.55:
            out.append(_sentence(rng, rng.choice(scripts), rng.randint(1, 30)))
        elif kind < 0.8:
            parts = [_sentence(rng, rng.choice(scripts), rng.randint(1, 8)) for _ in range(rng.randint(2, 5))]
            out.append(rng.choice(PUNCT).join(parts))
        elif kind < 0.88:
            out.append("".join(rng.choice(EMOJI + [" ", "!", "a", "的"]) for _ in range(rng.randint(1, 20))))
        elif kind < 0.95:
            chars = SPECIAL + PUNCT + CHINESE[:20]
            out.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 60))))
        else:
            out.append("".join(rng.choice(PUNCT) for _ in range(rng.randint(0, 10))))
    return out


def variant(rng, text):
    """An edited copy: a character dropped, changed or added, a word repeated, case changed."""
    if not text:
        return "x"
    i = rng.randrange(len(text))
    op = rng.randrange(4)
    if op == 0:
        return text[:i] + text[i + 1 :]
    if op == 1:
        return text[:i] + rng.choice("xyz的Жب") + text[i + 1 :]
    if op == 2:
        return text[:i] + text[i:].upper()
    return text + " " + text[: rng.randint(1, 20)]


# -- the loader's file ---------------------------------------------------------------------------

SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["sh", "th", "qu", "ng", "ck"]


def _vocabulary(rng, size=30_000):
    return ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(size)]


def _paragraph(rng, vocabulary, words=40):
    return " ".join(rng.choices(vocabulary, k=words))


def _edit(rng, text):
    """A near-duplicate: one word replaced, one dropped, or the case and punctuation changed."""
    words = text.split(" ")
    op = rng.randrange(3)
    i = rng.randrange(len(words))
    if op == 0:
        words[i] = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
    elif op == 1:
        del words[i]
    else:
        words[i] = words[i].upper() + ","
    return " ".join(words)


def load_rows(count=100_000, planted_share=0.1, seed=380, k=9, min_similarity=0.7):
    """Rows (id, url, body) of a file to load, and the ids of the planted near-duplicates: each
    planted row is an edit of an earlier unique row, within k bits of it (minhash64) and at least
    min_similarity similar (checked here with the client functions, so that the constraint must
    skip every one); unique rows are random paragraphs (similarity about 0.1 to each other)."""
    import pgsimhash

    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    rows = []
    planted = set()
    unique_bodies = []
    for i in range(1, count + 1):
        if unique_bodies and rng.random() < planted_share:
            while True:
                original = rng.choice(unique_bodies)
                body = _edit(rng, original)
                if (
                    pgsimhash.hamming(pgsimhash.minhash64(body), pgsimhash.minhash64(original)) <= k
                    and pgsimhash.simhash_similarity(body, original) >= min_similarity
                ):
                    break
            planted.add(i)
        else:
            body = _paragraph(rng, vocabulary)
            unique_bodies.append(body)
        rows.append({"id": i, "url": f"https://example.com/{i}", "body": body})
    return rows, planted
