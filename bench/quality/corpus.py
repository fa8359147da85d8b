"""Corpus for the quality harness: real prose from Debian documentation packages, cut into documents
of three size classes, plus labelled pairs (near-duplicate variants, Simplified/Traditional pairs,
random and hard negatives).

Everything is deterministic for a given seed: each random choice draws from a generator seeded with
the seed and the name of what it decides, so adding a pair kind does not reshuffle the others.
"""

import glob
import html.parser
import math
import os
import random
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field


class CorpusError(Exception):
    """The corpus cannot be built (package missing, too little text): the run must stop."""


LANGS = ("en", "zh-cn", "zh-tw")

# (label, lower, upper) in characters of the document text.
SIZES = (("short", 40, 200), ("medium", 300, 1000), ("long", 1000, 8000))

# Per language: (Debian package, book, directory, file glob, language suffix of the file names).
# The book and the file stem (name less language suffix) identify a chapter across languages.
SOURCES = {
    "en": [
        ("debian-reference-en", "debian-reference", "/usr/share/debian-reference", "*.en.html", ".en"),
        ("maint-guide", "maint-guide", "/usr/share/doc/maint-guide/html", "*.en.html", ".en"),
        ("debian-handbook", "debian-handbook", "/usr/share/doc/debian-handbook/html/en-US", "*.html", ""),
        ("installation-guide-*", "installation-guide", "/usr/share/doc/installation-guide-*/en", "*.html", ""),
    ],
    "zh-cn": [
        ("debian-reference-zh-cn", "debian-reference", "/usr/share/debian-reference", "*.zh-cn.html", ".zh-cn"),
        ("maint-guide-zh-cn", "maint-guide", "/usr/share/doc/maint-guide-zh-cn/html", "*.zh-cn.html", ".zh-cn"),
        ("debian-handbook", "debian-handbook", "/usr/share/doc/debian-handbook/html/zh-CN", "*.html", ""),
        ("installation-guide-*", "installation-guide", "/usr/share/doc/installation-guide-*/zh_CN", "*.html", ""),
    ],
    # No Traditional installation guide is packaged.
    "zh-tw": [
        ("debian-reference-zh-tw", "debian-reference", "/usr/share/debian-reference", "*.zh-tw.html", ".zh-tw"),
        ("maint-guide-zh-tw", "maint-guide", "/usr/share/doc/maint-guide-zh-tw/html", "*.zh-tw.html", ".zh-tw"),
        ("debian-handbook", "debian-handbook", "/usr/share/doc/debian-handbook/html/zh-TW", "*.html", ""),
    ],
}

# ---------------------------------------------------------------------------------------------
# HTML -> paragraphs

# Navigation, tables of contents and code are not prose: a paragraph inside them is dropped.
_SKIP_TAGS = {"script", "style", "pre", "head", "title", "textarea"}
_SKIP_CLASSES = {
    "navheader", "navfooter", "toc", "docnav", "list-of-tables", "list-of-figures",
    "list-of-examples", "index", "legalnotice", "revhistory", "title", "screen", "programlisting",
}
_SKIP_IDS = {"banner", "title", "navigation", "footer"}
_VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "param", "source"}
_BLOCK = {
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "thead", "tbody",
    "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "section", "body", "caption",
}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WIDE = r"\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
# Line breaks in the HTML source turn into spaces that Chinese prose does not have.
_SPACE_BETWEEN_WIDE = re.compile(rf"(?<=[{_WIDE}])\s+(?=[{_WIDE}])")


class _ParagraphExtractor(html.parser.HTMLParser):
    """Collects the text of <p> and Publican's <div class="para">, with the id of the section
    (the id of the nearest heading above) each one is in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, skip, para, heading)
        self.skip = self.para = self.heading = 0
        self.section = ""
        self.buf = []
        self.paragraphs = []  # (section id, text)

    def _flush(self):
        text = " ".join("".join(self.buf).replace("\0", " ").split())
        self.buf = []
        if text:
            self.paragraphs.append((self.section, _SPACE_BETWEEN_WIDE.sub("", text)))

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if tag == "br" and self.para:
                self.buf.append(" ")
            return
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        skip = tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES) or a.get("id") in _SKIP_IDS
        para = tag == "p" or (tag == "div" and "para" in classes)
        heading = tag in _HEADINGS
        if tag in _BLOCK:
            self._flush()
        self.stack.append((tag, skip, para, heading))
        self.skip += skip
        self.para += para
        self.heading += heading
        # DocBook puts the section id on an <a> inside the heading (Publican too); other <a id>
        # are index terms.
        if a.get("id") and (heading or (tag == "a" and self.heading)):
            self.section = a["id"]

    def handle_endtag(self, tag):
        if tag in _VOID or all(t != tag for t, *_ in self.stack):
            return
        while self.stack:
            t, skip, para, heading = self.stack.pop()
            self.skip -= skip
            self.para -= para
            self.heading -= heading
            if t == tag:
                break
        if tag in _BLOCK:
            self._flush()

    def handle_data(self, data):
        if self.para and not self.skip:
            self.buf.append(data)


def html_paragraphs(path):
    """[(section id, paragraph text)] of one HTML file, in document order."""
    with open(path, encoding="utf-8", errors="replace") as f:
        p = _ParagraphExtractor()
        p.feed(f.read())
        p.close()
        p._flush()
        return p.paragraphs


def is_prose(lang, text):
    """Whether a paragraph is prose of the language: translations leave some paragraphs in English,
    and short fragments (labels, file names) are not prose."""
    if lang == "en":
        return (len(text) >= 20 and not _CJK.search(text) and text.count(" ") >= 3
                and sum(c.isalpha() for c in text) >= 0.6 * len(text))
    return len(text) >= 10 and len(_CJK.findall(text)) >= 0.3 * len(text.replace(" ", ""))


@dataclass
class Chapter:
    lang: str
    package: str
    book: str
    stem: str
    paragraphs: list  # [(section id, text)], all of them (prose or not), in order


def load_chapters(lang):
    """All chapters (HTML files) of a language's packages. Fails when a package is missing."""
    chapters = []
    for package, book, directory, pattern, suffix in SOURCES[lang]:
        files = sorted(glob.glob(os.path.join(directory, pattern)))
        if not files:
            raise CorpusError(
                f"no {pattern} under {directory}: is the Debian package {package} installed? "
                "(bench/quality/run.sh installs it)")
        for path in files:
            stem = os.path.basename(path)[: -len(".html")]
            if suffix and stem.endswith(suffix):
                stem = stem[: -len(suffix)]
            chapters.append(Chapter(lang, package, book, stem, html_paragraphs(path)))
    return chapters


# ---------------------------------------------------------------------------------------------
# Documents


@dataclass
class Doc:
    id: str
    lang: str
    size: str
    book: str
    stem: str
    section: str
    order: int  # position among the documents cut for the size class, in text order
    paras: list = field(repr=False)
    # Up to two other documents cut from the same chapter next to this one: the hard negatives.
    neighbours: list = field(default_factory=list, repr=False)

    @property
    def text(self):
        return "\n".join(self.paras)


def _target(rng, lo, hi, log):
    if log:
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return rng.uniform(lo, hi)


def chunk(items, length, lo, hi, rng, log=False):
    """Greedy cut of a paragraph sequence into disjoint runs of consecutive items whose joined length
    (items joined by one character) reaches a random target in [lo, hi] without exceeding hi.
    A run that cannot reach lo before overflowing (or meeting an item longer than hi) is dropped.
    Returns lists of items."""
    runs, cur, cur_len = [], [], 0
    target = _target(rng, lo, hi, log)
    for item in items:
        n = length(item)
        if cur and (cur_len + 1 + n > hi or n > hi):
            if cur_len >= lo:
                runs.append(cur)
            cur, cur_len, target = [], 0, _target(rng, lo, hi, log)
        if n > hi:
            continue  # too long for the class; the run breaks so its paragraphs stay consecutive
        cur_len += n + (1 if cur else 0)
        cur.append(item)
        if cur_len >= target:
            runs.append(cur)
            cur, cur_len, target = [], 0, _target(rng, lo, hi, log)
    if cur and cur_len >= lo:
        runs.append(cur)
    return runs


def prose_paragraphs(chapters):
    """Per chapter, its prose paragraphs with duplicates (the same text anywhere earlier in the
    language) removed, so two documents never share a paragraph."""
    seen = set()
    out = []
    for ch in chapters:
        paras = []
        for section, text in ch.paragraphs:
            if is_prose(ch.lang, text) and text not in seen:
                seen.add(text)
                paras.append((section, text))
        out.append((ch, paras))
    return out


def build_documents(lang, chapters, per_size, seed):
    """{size: [Doc]}: per size class, a sample of at most per_size[size] disjoint documents cut
    from consecutive prose paragraphs of one chapter, each with its neighbours. Also returns how
    many could be cut."""
    docs, available = {}, {}
    prose = prose_paragraphs(chapters)
    for size, lo, hi in SIZES:
        rng = random.Random(f"{seed}:cut:{lang}:{size}")
        cut, order = [], 0
        for ch, paras in prose:
            for run in chunk(paras, lambda p: len(p[1]), lo, hi, rng, log=(size == "long")):
                cut.append(Doc(f"{lang}/{size}/{len(cut)}", lang, size, ch.book, ch.stem, run[0][0],
                               order, [t for _, t in run]))
                order += 1
        available[size] = len(cut)
        sample = random.Random(f"{seed}:sample:{lang}:{size}").sample(cut, min(per_size[size], len(cut)))
        for d in sample:
            near = (cut[o] for o in (d.order + 1, d.order - 1, d.order + 2, d.order - 2) if 0 <= o < len(cut))
            d.neighbours = [n for n in near if (n.book, n.stem) == (d.book, d.stem)][:2]
        docs[size] = sorted(sample, key=lambda d: d.order)
    return docs, available


def aligned_st_documents(cn_chapters, tw_chapters, per_size, seed):
    """Real Simplified/Traditional pairs: the same chapter (book + file stem) in zh-cn and zh-tw,
    section by section (section ids are the same in both); a section is used only when it has the
    same number of paragraphs on both sides, and a paragraph only when both sides are Chinese prose.
    Aligned paragraphs are then cut like the documents, by the Simplified length.
    Returns ({size: [(cn Doc, tw Doc)]}, stats)."""
    tw_by_key = {(c.book, c.stem): c for c in tw_chapters}
    stats = defaultdict(int)
    streams = []
    for cn in cn_chapters:
        tw = tw_by_key.get((cn.book, cn.stem))
        if tw is None:
            continue
        stats["chapters"] += 1
        cn_sec, tw_sec = defaultdict(list), defaultdict(list)
        for s, t in cn.paragraphs:
            cn_sec[s].append(t)
        for s, t in tw.paragraphs:
            tw_sec[s].append(t)
        stream = []
        for s in cn_sec:  # dicts keep the document order
            stats["sections"] += 1
            if len(cn_sec[s]) != len(tw_sec.get(s, ())):
                continue
            stats["sections aligned"] += 1
            for a, b in zip(cn_sec[s], tw_sec[s]):
                if is_prose("zh-cn", a) and is_prose("zh-tw", b):
                    stream.append((s, a, b))
        stats["paragraph pairs"] += len(stream)
        stats[f"paragraph pairs in {cn.book}"] += len(stream)
        streams.append((cn, stream))
    pairs = {}
    for size, lo, hi in SIZES:
        rng = random.Random(f"{seed}:cut-st:{size}")
        cut = []
        for cn, stream in streams:
            for run in chunk(stream, lambda p: len(p[1]), lo, hi, rng, log=(size == "long")):
                i = len(cut)
                mk = lambda lang, k: Doc(f"st-{lang}/{size}/{i}", lang, size, cn.book, cn.stem, run[0][0], i,
                                         [p[k] for p in run])
                cut.append((mk("zh-cn", 1), mk("zh-tw", 2)))
        stats[f"{size} pairs cut"] = len(cut)
        pairs[size] = random.Random(f"{seed}:sample-st:{size}").sample(cut, min(per_size[size], len(cut)))
    return pairs, dict(stats)


# ---------------------------------------------------------------------------------------------
# Variants (positives)

# Realistic page furniture, as scraped pages carry it: header lines (navigation, log-in, ads) and
# footer lines (copyright, licences, sharing, related links).
BOILERPLATE = {
    "en": (
        ["Home > Documentation > System administration > Debian", "Sign in | Register | Help | Search",
         "Skip to main content", "Advertisement: Cloud servers from $5/month - deploy in 60 seconds!",
         "Menu: Products Solutions Pricing Blog Support", "You are here: Home / Guides / Linux",
         "Sponsored: Try our managed database free for 30 days. No credit card required.",
         "Last updated: March 3, 2023 | 7 min read", "Toggle navigation", "Subscribe to our newsletter"],
        ["Copyright © 2023 Example Media Ltd. All rights reserved.", "Privacy Policy | Terms of Use | Cookie Settings",
         "Share this article: Twitter Facebook LinkedIn Reddit Email", "Related posts: How to install Debian 12 | "
         "Top 10 apt tips | Configuring systemd services", "« Previous article | Next article »",
         "This site uses cookies to improve your experience. Accept | Decline",
         "Was this page helpful? Yes No", "Contact us | About | Careers | Advertise with us",
         "Back to top ↑", "Powered by WordPress. Theme by Example Themes."],
    ),
    "zh-cn": (
        ["首页 > 技术文档 > 系统管理 > Debian", "登录 | 注册 | 帮助中心 | 搜索", "广告：云服务器限时特惠，低至 99 元/年，立即抢购！",
         "当前位置：首页 » 运维教程 » Linux", "热门标签：Linux 运维 服务器 开源 Shell", "跳转到主要内容",
         "推广：企业级数据库免费试用 30 天，无需绑定信用卡", "发布时间：2023-03-03 阅读量：12,345", "菜单 导航 产品 解决方案 社区",
         "关注我们的公众号，获取更多技术干货"],
        ["版权所有 © 2023 某某科技有限公司 保留所有权利", "京ICP备12345678号-1 京公网安备 11010802012345号",
         "本文来源于网络，如有侵权请联系删除", "分享到：微信 微博 QQ空间 豆瓣", "上一篇：Debian 12 安装教程 下一篇：apt 常用命令大全",
         "相关文章：systemd 服务配置详解 | Linux 磁盘分区指南 | SSH 安全加固", "联系我们 | 关于我们 | 隐私政策 | 使用条款",
         "扫码下载客户端，随时随地学习", "返回顶部", "本站部分内容来自互联网，仅供学习交流使用"],
    ),
    "zh-tw": (
        ["首頁 > 技術文件 > 系統管理 > Debian", "登入 | 註冊 | 說明中心 | 搜尋", "廣告：雲端主機限時優惠，每月只要 NT$99，立即搶購！",
         "目前位置：首頁 » 維運教學 » Linux", "熱門標籤：Linux 維運 伺服器 開源 Shell", "跳到主要內容",
         "贊助：企業級資料庫免費試用 30 天，免綁信用卡", "發佈時間：2023-03-03 瀏覽次數：12,345", "選單 導覽 產品 解決方案 社群",
         "追蹤我們的粉絲專頁，掌握最新技術資訊"],
        ["版權所有 © 2023 某某科技股份有限公司 保留一切權利", "隱私權政策 | 服務條款 | 聯絡我們 | 關於我們",
         "本文轉載自網路，如有侵權請來信告知", "分享到：Facebook LINE Twitter Plurk", "上一篇：Debian 12 安裝教學 下一篇：apt 常用指令大全",
         "相關文章：systemd 服務設定詳解 | Linux 磁碟分割指南 | SSH 安全強化", "本網站使用 Cookie 以提供更好的瀏覽體驗。接受 | 拒絕",
         "掃描 QR Code 下載 App，隨時隨地學習", "回到頁首", "本站部分內容來自網際網路，僅供學習交流使用"],
    ),
}


def _fill(lines, target, rng):
    """Lines in random order (cycling when the pool is short) until `target` characters; the last
    one is cut so the total is exact."""
    out, total = [], 0
    while total < target:
        for line in rng.sample(lines, len(lines)):
            room = target - total
            if room <= 0:
                break
            line = line[:room]
            out.append(line)
            total += len(line) + 1  # the newline
    return out


def with_boilerplate(doc, fraction, rng):
    header, footer = BOILERPLATE[doc.lang]
    text = doc.text
    target = max(1, round(fraction * len(text)))
    top = _fill(header, target // 2, rng)
    bottom = _fill(footer, target - target // 2, rng)
    return "\n".join(top + [text] + bottom)


def edited(text, rate, rng):
    """`rate` * length random character edits (insert, delete or substitute, equally likely); new
    characters are drawn from the document's own, so Chinese gets Chinese and English letters."""
    chars = list(text)
    alphabet = [c for c in chars if not c.isspace()] or ["x"]
    for _ in range(max(1, round(rate * len(text)))):
        op = rng.randrange(3)
        if op == 0 or len(chars) < 2:
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
        elif op == 1:
            del chars[rng.randrange(len(chars))]
        else:
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
    return "".join(chars)


# A sentence ends with Chinese end punctuation, or with ASCII end punctuation before a space.
_SENTENCE = re.compile(r".+?(?:[。！？；]+[」』”）]*|[.!?;]+(?=\s|$)|$)\s*", re.S)


def sentences(para):
    return [s for s in _SENTENCE.findall(para) if s]


def _sentence_edit(doc, rng, repeat):
    paras = [sentences(p) for p in doc.paras]
    where = [(i, j) for i, ss in enumerate(paras) for j in range(len(ss))]
    if len(where) < 2 and not repeat:
        return None
    i, j = rng.choice(where)
    if repeat:
        copy = paras[i][j]
        if doc.lang == "en" and not copy[-1:].isspace():
            paras[i][j] += " "  # the repeated sentence was the paragraph's last
        paras[i].insert(j + 1, copy)
    else:
        del paras[i][j]
    return "\n".join("".join(ss).strip() for ss in paras if "".join(ss).strip())


def swapped_paragraphs(doc, rng):
    if len(doc.paras) < 2:
        return None
    paras = list(doc.paras)
    i, j = rng.sample(range(len(paras)), 2)
    paras[i], paras[j] = paras[j], paras[i]
    return "\n".join(paras)


_ZH_PUNCT = {"，": ",", "。": ".", "：": ":", "；": ";", "！": "!", "？": "?", "（": "(", "）": ")",
             "“": '"', "”": '"', "‘": "'", "’": "'", "、": ",", "「": '"', "」": '"', "『": "'", "』": "'",
             "《": "<", "》": ">", "【": "[", "】": "]", "—": "-", "…": "..."}
# English typed with a Chinese input method: ASCII punctuation before a space becomes full-width.
_EN_PUNCT = re.compile(r"[,.:;!?](?=\s|$)")
_EN_FULL = {",": "，", ".": "。", ":": "：", ";": "；", "!": "！", "?": "？"}


def punctuation_changed(doc):
    if doc.lang == "en":
        return _EN_PUNCT.sub(lambda m: _EN_FULL[m.group()], doc.text)
    return "".join(_ZH_PUNCT.get(c, c) for c in doc.text)


def full_width(text):
    """ASCII letters and digits as their full-width forms (what NFKC folds back)."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


# Pair kinds in report order. Positives first; the last two are negatives.
POSITIVE_KINDS = ["edit1", "edit3", "edit5", "boiler10", "boiler30", "drop_sentence", "repeat_sentence",
                  "swap_paragraphs", "punct", "width", "case", "s2t", "s2twp", "t2s", "st_real"]
NEGATIVE_KINDS = ["neg_random", "neg_hard"]
# Kinds whose two sides differ by script: the character-shingle label cannot see them as duplicates.
SCRIPT_KINDS = {"s2t", "s2twp", "t2s", "st_real"}

KIND_NOTES = {
    "edit1": "1 % random character edits (insert/delete/substitute)",
    "edit3": "3 % random character edits",
    "edit5": "5 % random character edits",
    "boiler10": "boilerplate (navigation, ads, copyright lines) added, +10 % of the length",
    "boiler30": "boilerplate added, +30 % of the length",
    "drop_sentence": "one sentence dropped",
    "repeat_sentence": "one sentence repeated",
    "swap_paragraphs": "two paragraphs swapped (medium and long only)",
    "punct": "punctuation changed: zh full-width to ASCII, en ASCII to full-width",
    "width": "ASCII letters and digits as full-width forms",
    "case": "Latin letters upper-cased",
    "s2t": "zh-cn document vs OpenCC s2t (characters only)",
    "s2twp": "zh-cn document vs OpenCC s2twp (characters and Taiwan phrases)",
    "t2s": "zh-tw document vs OpenCC t2s",
    "st_real": "the same section in debian-reference/handbook/maint-guide zh-cn vs zh-tw",
    "neg_random": "two random documents of the same language and size class",
    "neg_hard": "neighbouring documents of the same chapter (similar topic)",
}


def variants(doc, seed, converters):
    """{kind: variant text} for one base document; a kind that does not apply is left out."""
    def rng(kind):
        return random.Random(f"{seed}:{kind}:{doc.id}")
    text = doc.text
    out = {
        "edit1": edited(text, 0.01, rng("edit1")),
        "edit3": edited(text, 0.03, rng("edit3")),
        "edit5": edited(text, 0.05, rng("edit5")),
        "boiler10": with_boilerplate(doc, 0.10, rng("boiler10")),
        "boiler30": with_boilerplate(doc, 0.30, rng("boiler30")),
        "drop_sentence": _sentence_edit(doc, rng("drop"), repeat=False),
        "repeat_sentence": _sentence_edit(doc, rng("repeat"), repeat=True),
        "swap_paragraphs": swapped_paragraphs(doc, rng("swap")) if doc.size != "short" else None,
        "punct": punctuation_changed(doc),
        "width": full_width(text),
        "case": text.upper(),
    }
    if doc.lang == "zh-cn":
        out["s2t"] = converters["s2t"](text)
        out["s2twp"] = converters["s2twp"](text)
    if doc.lang == "zh-tw":
        out["t2s"] = converters["t2s"](text)
    return {k: v for k, v in out.items() if v is not None}


# ---------------------------------------------------------------------------------------------
# Reference label

_WS = re.compile(r"\s+")


def normalise(text):
    """NFKC, lower case, whitespace collapsed: the text the reference label compares."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def shingles(text, n):
    t = normalise(text)
    return {t[i:i + n] for i in range(max(1, len(t) - n + 1))}


def jaccard(a, b):
    return len(a & b) / len(a | b) if a or b else 1.0


# ---------------------------------------------------------------------------------------------
# Pairs


@dataclass
class Pair:
    kind: str
    lang: str
    size: str
    a: int  # index into the text list
    b: int
    jaccard: float = 0.0


class TextTable:
    """Distinct texts, each fingerprinted once."""

    def __init__(self):
        self.texts, self.index = [], {}

    def add(self, text):
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.texts)
            self.texts.append(text)
        return i


LABEL_THRESHOLD = 0.8


def build_pairs(docs, st_pairs, seed, converters, random_negatives_per_doc=5):
    """Labelled pairs over all languages and sizes. Returns (TextTable, [Pair], stats) where stats
    counts the negatives dropped because their texts are near-identical anyway."""
    table, pairs = TextTable(), []
    dropped = defaultdict(int)
    for lang in LANGS:
        for size, _, _ in SIZES:
            base = docs[lang][size]
            ids = [table.add(d.text) for d in base]
            sh = {}

            def label(i, j):
                for k in (i, j):
                    if k not in sh:
                        sh[k] = shingles(table.texts[k], 5)
                return jaccard(sh[i], sh[j])

            for d, i in zip(base, ids):
                for kind, v in variants(d, seed, converters).items():
                    j = table.add(v)
                    pairs.append(Pair(kind, lang, size, i, j, label(i, j)))
            # Hard negatives: each document with its neighbours in the same chapter.
            negs, seen = [], set()
            for d, i in zip(base, ids):
                for n in d.neighbours:
                    j = table.add(n.text)
                    if frozenset((i, j)) not in seen:
                        seen.add(frozenset((i, j)))
                        negs.append(("neg_hard", i, j))
            rng = random.Random(f"{seed}:random-negatives:{lang}:{size}")
            for _ in range(random_negatives_per_doc * len(base)):
                x, y = rng.sample(range(len(base)), 2)
                negs.append(("neg_random", ids[x], ids[y]))
            for kind, i, j in negs:
                jac = label(i, j)
                if jac >= LABEL_THRESHOLD:
                    dropped[(kind, lang, size)] += 1  # the source repeats itself: not a negative
                    continue
                pairs.append(Pair(kind, lang, size, i, j, jac))
            sh.clear()
        if lang == "zh-cn":
            for size, _, _ in SIZES:
                for cn, tw in st_pairs[size]:
                    i, j = table.add(cn.text), table.add(tw.text)
                    pairs.append(Pair("st_real", "zh-cn", size, i, j,
                                      jaccard(shingles(cn.text, 5), shingles(tw.text, 5))))
    return table, pairs, dict(dropped)
