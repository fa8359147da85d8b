#!/usr/bin/env python3
"""Fingerprint quality harness: fingerprints a labelled corpus (see corpus.py) with every mode of
the `fingerprints` example and with three outside implementations, and reports recall, false
positives and speed. Run it through run.sh, which installs what it needs."""

import argparse
import csv
import datetime
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict

import corpus
from corpus import LANGS, NEGATIVE_KINDS, POSITIVE_KINDS, SCRIPT_KINDS, SIZES

try:
    import datasketch
    import jieba
    import jieba.analyse
    import numpy as np
    import opencc
    import simhash as pypi_simhash
except ImportError as e:
    sys.exit(f"quality harness: missing Python package ({e}); run bench/quality/run.sh, which creates the venv")

RADII = (3, 5, 7, 9)
RECOMMEND_RADII = range(0, 12)
MAX_FP_HARD = 0.005
MINHASH_THRESHOLD = 0.8
LABEL_TOLERANCE = 0.02  # the "within 0.02 of MinHash-128" on label precision and recall

# The verified recipe: a pair is a near-duplicate when its fingerprint distance is <= k and the exact
# similarity of its shingle sets (simhash_similarity(a, b, 3) in SQL) is >= t.
SIMILARITY_FIELDS = ("j3", "j4", "j5", "c3")  # the pair_similarity example's columns
SIMILARITY_NAMES = {"j3": "J3", "j4": "J4", "j5": "J5", "c3": "C3"}
CORE_KINDS = ["edit1", "boiler10", "repeat_sentence", "swap_paragraphs", "punct", "width", "case", "s2t", "s2twp",
              "t2s"]
INFO_KINDS = ["edit3", "edit5", "boiler30", "drop_sentence", "st_real"]  # shown, not required
RECIPES = [("minhash64", 9), ("minhash64", 10), ("minhash64", 11), ("minhash64_4x2", 11), ("minhash64_5", 9),
           ("minhash64_5", 11), ("simhash", 3), ("simhash", 7), ("simhash_ngrams3", 9)]
THRESHOLDS = (0.5, 0.6, 0.7, 0.8)
MIN_RECALL = 0.95  # on every core kind in every size class


def die(msg):
    print(f"quality harness: error: {msg}", file=sys.stderr)
    sys.exit(1)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Our modes, through the fingerprints binary


def binary_modes(binary):
    """The binary's modes, from the `modes:` line it prints for an unknown mode."""
    r = subprocess.run([binary, "--help"], capture_output=True, text=True)
    for line in r.stderr.splitlines():
        if line.startswith("modes:"):
            modes = [m.strip() for m in line[len("modes:"):].split(",") if m.strip()]
            if modes:
                return modes
    die(f"{binary} --help printed no 'modes:' line:\n{r.stderr}")


def run_binary(binary, mode, docs_path, n):
    with open(docs_path, "rb") as f:
        r = subprocess.run([binary, mode], stdin=f, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{binary} {mode} exited {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    lines = r.stdout.decode().split("\n")
    if lines[-1] != "" or len(lines) - 1 != n:
        raise RuntimeError(f"{binary} {mode}: {len(lines) - 1} output lines for {n} documents")
    fps = []
    for line in lines[:-1]:
        if line and not re.fullmatch(r"[0-9a-fA-F]{16}", line):
            raise RuntimeError(f"{binary} {mode}: not a fingerprint: {line!r}")
        fps.append(int(line, 16) if line else None)
    m = re.search(r"([0-9.]+|inf) MB/s", r.stderr.decode())
    if not m:
        raise RuntimeError(f"{binary} {mode}: no MB/s on stderr: {r.stderr.decode()!r}")
    return fps, float(m.group(1))


def run_pair_binary(binary, texts, pairs):
    """The exact similarities of every pair from the pair_similarity example: {field: [value or
    None per pair]} for SIMILARITY_FIELDS, and its MB/s."""
    with tempfile.TemporaryFile(prefix="simhash-quality-", suffix=".pairs") as f:
        for p in pairs:
            f.write(texts[p.a].encode() + b"\0" + texts[p.b].encode() + b"\0")
        f.seek(0)
        r = subprocess.run([binary], stdin=f, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{binary} exited {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    lines = r.stdout.decode().split("\n")
    if lines[-1] != "" or len(lines) - 1 != len(pairs):
        raise RuntimeError(f"{binary}: {len(lines) - 1} output lines for {len(pairs)} pairs")
    out = {f: [] for f in SIMILARITY_FIELDS}
    for line in lines[:-1]:
        fields = line.split(" ")
        if len(fields) != len(SIMILARITY_FIELDS) or not all(re.fullmatch(r"|[01]\.[0-9]+", x) for x in fields):
            raise RuntimeError(f"{binary}: not a line of {len(SIMILARITY_FIELDS)} similarities: {line!r}")
        for f, x in zip(SIMILARITY_FIELDS, fields):
            out[f].append(float(x) if x else None)
    m = re.search(r"([0-9.]+|inf|NaN) MB/s", r.stderr.decode())
    if not m:
        raise RuntimeError(f"{binary}: no MB/s on stderr: {r.stderr.decode()!r}")
    return out, float(m.group(1))


# ---------------------------------------------------------------------------------------------
# Outside implementations

_MASK = (1 << 64) - 1


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h


def jieba_top20_simhash(text):
    """The seeds' reference: jieba TF-IDF top 20 keywords, FNV-1a-64 of each keyword's UTF-8,
    weighted bit vote with float sums in keyword order; bit i is 1 iff its sum is > 0."""
    tags = jieba.analyse.extract_tags(text, topK=20, withWeight=True)
    if not tags:
        return None
    sums = [0.0] * 64
    for word, weight in tags:
        h = fnv1a64(word.encode("utf-8"))
        for i in range(64):
            sums[i] += weight if (h >> i) & 1 else -weight
    return sum(1 << i for i in range(64) if sums[i] > 0)


def pypi_simhash_value(text):
    return pypi_simhash.Simhash(text).value


def minhash128(texts):
    """datasketch MinHash, 128 permutations, over the character 3-grams of the normalised text
    (NFKC, lower case, whitespace collapsed: the label's normalisation). Returns hash value arrays."""
    sets = ([s.encode("utf-8") for s in corpus.shingles(t, 3)] for t in texts)
    return [m.hashvalues for m in datasketch.MinHash.generator(sets, num_perm=128)]


OUTSIDE = [
    ("ext:jieba_top20", "jieba 0.42.1 extract_tags(topK=20, withWeight=True) + FNV-1a-64, float weighted vote "
                        "(the seeds' reference)", lambda ts: [jieba_top20_simhash(t) for t in ts]),
    ("ext:pypi_simhash", "PyPI simhash 2.1.2, Simhash(text).value (defaults: char 4-grams of \\w runs, md5)",
     lambda ts: [pypi_simhash_value(t) for t in ts]),
    ("ext:datasketch_mh128", "datasketch 2.0.0 MinHash num_perm=128 over character 3-grams of the normalised text; "
                             f"match = estimated Jaccard >= {MINHASH_THRESHOLD}", minhash128),
]


def timed(fn, texts):
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    t0 = time.perf_counter()
    out = fn(texts)
    return out, nbytes / 1e6 / (time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# Metrics


class Scores:
    """Per pair a similarity score and how matching works for one mode: Hamming distance (match
    iff <= k; None when a side has no fingerprint: never a match) or, for MinHash-128, the
    estimated Jaccard (match iff >= threshold, whatever k)."""

    def __init__(self, name, pairs, fps=None, minhash=None):
        self.name = name
        self.minhash = minhash is not None
        if self.minhash:
            self.values = [float(np.mean(minhash[p.a] == minhash[p.b])) for p in pairs]
        else:
            self.values = [None if fps[p.a] is None or fps[p.b] is None else (fps[p.a] ^ fps[p.b]).bit_count()
                           for p in pairs]

    def match(self, i, k):
        v = self.values[i]
        if self.minhash:
            return v >= MINHASH_THRESHOLD
        return v is not None and v <= k


def group(pairs, key):
    g = defaultdict(list)
    for i, p in enumerate(pairs):
        g[key(p)].append(i)
    return g


def rate(scores, idx, k):
    return sum(scores.match(i, k) for i in idx) / len(idx) if idx else float("nan")


def mean_value(scores, idx):
    v = [scores.values[i] for i in idx if scores.values[i] is not None]
    return sum(v) / len(v) if v else float("nan")


def recommended_radius(scores, by_kind):
    """Largest k in 0..11 with hard-negative FP <= 0.5 % and no random-negative match (None if even
    k = 0 fails). MinHash-128 has no radius: its threshold is fixed."""
    if scores.minhash:
        return "J"
    best = None
    for k in RECOMMEND_RADII:
        if rate(scores, by_kind["neg_hard"], k) <= MAX_FP_HARD and rate(scores, by_kind["neg_random"], k) == 0:
            best = k
        else:
            break
    return best


def label_pr(scores, pairs, k):
    """Precision and recall of 'match at radius k' against the Jaccard label, over all pairs but the
    script-conversion kinds (the character label cannot see those as duplicates)."""
    tp = fp = fn = 0
    for i, p in enumerate(pairs):
        if p.kind in SCRIPT_KINDS:
            continue
        m, lab = scores.match(i, k), p.jaccard >= corpus.LABEL_THRESHOLD
        tp += m and lab
        fp += m and not lab
        fn += lab and not m
    return (tp / (tp + fp) if tp + fp else float("nan")), (tp / (tp + fn) if tp + fn else float("nan"))


# ---------------------------------------------------------------------------------------------
# Report


def pct(x, neg=False):
    if x != x:
        return "–"
    return f"{100 * x:.1f}" if neg else f"{100 * x:.0f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def kinds_present(pairs):
    present = {p.kind for p in pairs}
    return [k for k in POSITIVE_KINDS + NEGATIVE_KINDS if k in present]


def kind_by_size_rows(pairs, cell):
    """One row per pair kind, one cell per size class: cell(kind, pair indexes), or "" for none."""
    by = group(pairs, lambda p: (p.kind, p.size))
    return [[kind] + [cell(kind, by[(kind, size)]) if by.get((kind, size)) else "" for size, _, _ in SIZES]
            for kind in kinds_present(pairs)]


def mode_table(scores, pairs):
    """Rows: pair kinds; columns: size classes; cell: mean distance (or estimated Jaccard) and the
    match rate at k = 3/5/7/9 (in %; for negatives that is the false-positive rate)."""
    def cell(kind, idx):
        neg = kind in NEGATIVE_KINDS
        mv = mean_value(scores, idx)
        if scores.minhash:
            return f"J {mv:.2f} · {pct(rate(scores, idx, 0), neg)} (n={len(idx)})"
        rates = "/".join(pct(rate(scores, idx, k), neg) for k in RADII)
        return f"d {mv:.1f} · {rates} (n={len(idx)})"
    return table(["kind"] + [s for s, _, _ in SIZES], kind_by_size_rows(pairs, cell))


def size_class_table(all_scores, pairs):
    """Per mode (our modes and the outside SimHash ones) and size class: the recommended radius
    within that class alone, and the match rates at it: duplicates the targets name, hard
    negatives."""
    kinds = ["edit1", "boiler10", "repeat_sentence", "swap_paragraphs", "punct", "s2twp", "st_real"]
    by = group(pairs, lambda p: (p.size, p.kind))
    rows = []
    for s in all_scores:
        if s.minhash:
            continue
        for size, _, _ in SIZES:
            in_size = defaultdict(list, {kind: idx for (sz, kind), idx in by.items() if sz == size})
            k = recommended_radius(s, in_size)
            cells = ["–" if k is None or not in_size[kind] else pct(rate(s, in_size[kind], k)) for kind in kinds]
            hard = "–" if k is None else pct(rate(s, in_size["neg_hard"], k), neg=True)
            rows.append([s.name, size, "none" if k is None else k] + cells + [hard])
    return table(["mode", "size", "recommended k"] + kinds + ["neg_hard FP %"], rows)


def label_radius_tables(all_scores, pairs):
    """The radius at which each mode agrees best with MinHash-128 on the Jaccard label: the k in
    0..11 whose worse shortfall, min(precision - MinHash-128's, recall - MinHash-128's), is least
    negative. Then, for the modes within 0.02 of MinHash-128 on both, the match rates per size
    class at that radius (the duplicate kinds the targets name, and both kinds of negatives)."""
    reference = next((s for s in all_scores if s.minhash), None)
    if reference is None:
        return None
    ref_p, ref_r = label_pr(reference, pairs, 0)
    rows, close = [], []
    for s in all_scores:
        if s.minhash:
            continue
        k, p_, r_ = max(((k, *label_pr(s, pairs, k)) for k in RECOMMEND_RADII),
                        key=lambda t: (min(t[1] - ref_p, t[2] - ref_r), -t[0]))
        within = min(p_ - ref_p, r_ - ref_r) >= -LABEL_TOLERANCE
        rows.append([s.name, k, f"{100 * p_:.1f}", f"{100 * r_:.1f}", f"{100 * (p_ - ref_p):+.1f}",
                     f"{100 * (r_ - ref_r):+.1f}", "yes" if within else "no"])
        if within:
            close.append((s, k))
    agreement = table(["mode", "k", "label precision %", "label recall %", "Δ precision", "Δ recall",
                       f"within {LABEL_TOLERANCE} of MinHash-128"], rows)
    kinds = ["edit1", "boiler10", "repeat_sentence", "swap_paragraphs", "punct", "width", "case", "s2t", "s2twp",
             "t2s", "st_real"]
    by = group(pairs, lambda p: (p.size, p.kind))
    size_rows = []
    for s, k in close:
        for size, _, _ in SIZES:
            size_rows.append([s.name, size, k] + [pct(rate(s, by[(size, kind)], k)) if by.get((size, kind)) else "–"
                                                  for kind in kinds]
                             + [pct(rate(s, by[(size, neg)], k), neg=True) for neg in ("neg_hard", "neg_random")])
    per_size = table(["mode", "size", "k"] + kinds + ["neg_hard FP %", "neg_random FP %"], size_rows) if close else None
    return f"MinHash-128 (estimated J ≥ {MINHASH_THRESHOLD}): precision {100 * ref_p:.1f} %, recall {100 * ref_r:.1f} %.", \
        agreement, per_size


def cross_table(all_scores, pairs, recs, speeds, lang=None):
    """Rows: pair kinds; columns: modes; cells: match rate (%) at each mode's recommended radius."""
    sel = [i for i, p in enumerate(pairs) if lang is None or p.lang == lang]
    by = defaultdict(list)
    for i in sel:
        by[pairs[i].kind].append(i)
    names = [s.name for s in all_scores]
    head = [["recommended k"] + [("J≥0.8" if s.minhash else ("none" if recs[s.name] is None else str(recs[s.name])))
                                 for s in all_scores]]
    if lang is None:
        head.append(["MB/s"] + [f"{speeds[n]:.2f}" for n in names])
        for k_label in ("label precision", "label recall"):
            row = [k_label]
            for s in all_scores:
                r = recs[s.name]
                if r is None:
                    row.append("–")
                    continue
                p_, r_ = label_pr(s, pairs, 0 if s.minhash else r)
                row.append(pct(p_ if k_label == "label precision" else r_))
            head.append(row)
    rows = []
    for kind in kinds_present([pairs[i] for i in sel]):
        neg = kind in NEGATIVE_KINDS
        row = [kind + (" (FP %)" if neg else "")]
        for s in all_scores:
            r = recs[s.name]
            row.append("–" if r is None else pct(rate(s, by[kind], 0 if s.minhash else r), neg))
        rows.append(row)
    return table(["kind"] + names, head + rows)


# ---------------------------------------------------------------------------------------------
# Verified recipe


def nearest_rank(sorted_values, p):
    """The p-th percentile (nearest rank) of an ascending list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def similarity_spread(values, negative):
    """'min / p1 / p5' of a kind's similarities (for negatives the upper tail: 'max / p99 / p95'),
    two decimals; a pair with no similarity (a text without letters or digits) counts as 0."""
    v = sorted(0.0 if x is None else x for x in values)
    if negative:
        return f"{v[-1]:.2f} / {nearest_rank(v, 99):.2f} / {nearest_rank(v, 95):.2f}"
    return f"{v[0]:.2f} / {nearest_rank(v, 1):.2f} / {nearest_rank(v, 5):.2f}"


def verified_rate(scores, sim, idx, k, t):
    """Share of the pairs `idx` with distance <= k (any distance when scores is None) and
    similarity >= t (any when t is None)."""
    if not idx:
        return float("nan")
    hits = 0
    for i in idx:
        if scores is not None and not scores.match(i, k):
            continue
        if t is not None and (sim[i] is None or sim[i] < t):
            continue
        hits += 1
    return hits / len(idx)


def verified_kinds(pairs):
    present = {p.kind for p in pairs}
    return [k for k in CORE_KINDS if k in present], [k for k in INFO_KINDS if k in present]


def similarity_tables(sims, pairs):
    """The spread of the exact similarities per kind and size class: J3 in full, J4/J5/C3 compact."""
    core, info = verified_kinds(pairs)
    by = group(pairs, lambda p: (p.kind, p.size))
    present = {p.kind for p in pairs}
    kinds = [(k, "") for k in core] + [(k, " (info)") for k in info] + [(k, "") for k in NEGATIVE_KINDS
                                                                          if k in present]
    def j3_cell(kind, idx):
        return f"{similarity_spread([sims['j3'][i] for i in idx], kind in NEGATIVE_KINDS)} (n={len(idx)})"
    rows = [[kind + note + (" (max / p99 / p95)" if kind in NEGATIVE_KINDS else "")]
            + [j3_cell(kind, by[(kind, size)]) if by.get((kind, size)) else "–" for size, _, _ in SIZES]
            for kind, note in kinds]
    j3 = table(["kind", *(s for s, _, _ in SIZES)], rows)
    rows = []
    for kind, note in kinds:
        neg = kind in NEGATIVE_KINDS
        row = [kind + note]
        for f in ("j4", "j5", "c3"):
            for size, _, _ in SIZES:
                idx = by.get((kind, size))
                row.append(similarity_spread([sims[f][i] for i in idx], neg).replace(" ", "") if idx else "–")
        rows.append(row)
    compact = table(["kind"] + [f"{SIMILARITY_NAMES[f]} {size}" for f in ("j4", "j5", "c3") for size, _, _ in SIZES],
                    rows)
    return j3, compact


def recipe_summary(recipe_scores, sims, pairs, field, thresholds):
    """Per recipe (fingerprint radius, or None: the similarity alone) and threshold (None: the
    fingerprint alone): the least recall over core kinds x size classes and where, whether every
    one reaches MIN_RECALL, and the false positives on both kinds of negatives (all sizes)."""
    core, info = verified_kinds(pairs)
    by = group(pairs, lambda p: (p.kind, p.size))
    by_kind = group(pairs, lambda p: p.kind)
    rows, results = [], []
    for name, scores, k in recipe_scores:
        for t in thresholds:
            if scores is None and t is None:
                continue
            cells = [(verified_rate(scores, sims[field], by[(kind, size)], k, t), kind, size)
                     for kind in core for size, _, _ in SIZES if by.get((kind, size))]
            least, kind, size = min(cells)
            hard = verified_rate(scores, sims[field], by_kind["neg_hard"], k, t)
            rand = verified_rate(scores, sims[field], by_kind["neg_random"], k, t)
            ok = least >= MIN_RECALL
            info_rates = [verified_rate(scores, sims[field], by_kind[x], k, t) for x in info]
            info_mean = sum(info_rates) / len(info_rates) if info_rates else 0.0
            results.append((name, k, t, least, ok, hard, rand, info_mean))
            rows.append([name, "–" if k is None else k,
                         "none" if t is None else f"{SIMILARITY_NAMES[field]} ≥ {t}", f"{100 * least:.1f}",
                         f"{kind} {size}" if least < 1 else "–", "**yes**" if ok else "no",
                         f"{pct(hard, neg=True)} ({round(hard * len(by_kind['neg_hard']))})",
                         f"{pct(rand, neg=True)} ({round(rand * len(by_kind['neg_random']))})"]
                        + [pct(x) for x in info_rates])
    head = ["mode", "k", "verification", "least recall % (core kinds × sizes)", "where",
            f"all ≥ {100 * MIN_RECALL:.0f} %", f"neg_hard FP % (pairs of {len(by_kind['neg_hard'])})",
            f"neg_random FP % (pairs of {len(by_kind['neg_random'])})"] + [f"{x} (info) %" for x in info]
    return table(head, rows), results


def recipe_detail(recipe_scores, sims, pairs, field, thresholds):
    """Recall per core (and information) kind and size class, and false positives per size class,
    for each recipe and threshold."""
    core, info = verified_kinds(pairs)
    by = group(pairs, lambda p: (p.kind, p.size))
    rows = []
    for name, scores, k in recipe_scores:
        for t in thresholds:
            for size, _, _ in SIZES:
                cells = []
                for kind in core + info:
                    idx = by.get((kind, size))
                    cells.append(pct(verified_rate(scores, sims[field], idx, k, t)) if idx else "–")
                neg = [pct(verified_rate(scores, sims[field], by.get((n, size), []), k, t), neg=True)
                       for n in ("neg_hard", "neg_random")]
                rows.append([name, k, f"{t}", size] + cells + neg)
    return table(["mode", "k", f"{SIMILARITY_NAMES[field]} ≥", "size"] + core + [f"{x} (info)" for x in info]
                 + ["neg_hard FP %", "neg_random FP %"], rows)


def best_recipe(results):
    """The best fingerprint recipe from recipe_summary's results (J3): the one that keeps every core
    kind at MIN_RECALL with the highest threshold (the fewest false positives the corpus can show),
    then the larger least recall there, then the larger mean recall of the information kinds (the
    looser copies it still finds), then fewer hard-negative false positives; None if no recipe
    keeps the recall."""
    passing = [r for r in results if r[1] is not None and r[2] is not None and r[4]]
    if not passing:
        return None
    return max(passing, key=lambda r: (r[2], r[3], r[7], -r[5]))


def verified_section(all_scores, sims, pairs, pair_speed):
    named = {s.name: s for s in all_scores}
    recipes = [(m, named[m], k) for m, k in RECIPES if m in named]
    skipped = sorted({m for m, _ in RECIPES if m not in named})
    j3_table, compact = similarity_tables(sims, pairs)
    summary, results = recipe_summary(recipes + [("(J3 alone)", None, None)], sims, pairs, "j3",
                                      (None,) + THRESHOLDS)
    detail = recipe_detail(recipes, sims, pairs, "j3", THRESHOLDS)
    best = best_recipe(results)
    md = ["## Verified recipe\n",
          "A pair is a near-duplicate when its fingerprint distance is ≤ k **and** the exact similarity of "
          "its texts is ≥ t: J3 = `simhash_similarity(a, b, 3)`, the Jaccard similarity of the sets of "
          "character 3-shingles of the folded texts (the set `minhash64(text, 3)` estimates), J4/J5 the same "
          "for 4 and 5 characters, C3 = `simhash_containment(a, b, 3)`, |A∩B| / min(|A|, |B|). Computed by "
          f"the `pair_similarity` example for every pair ({pair_speed:.2f} MB/s for the four similarities of "
          f"a pair, both texts counted). Core kinds: {', '.join(CORE_KINDS)}; the others are shown for "
          "information. All languages pooled.\n",
          "### Exact similarity per kind and size class\n",
          "J3: min / 1st percentile / 5th percentile (nearest rank) per kind and size class; for negatives "
          "the upper tail, max / 99th / 95th percentile. A threshold below a kind's minimum keeps all of "
          "it; one above the negatives' maximum rejects all of them.\n",
          j3_table, "",
          "J4, J5 and C3, the same min/p1/p5 (negatives max/p99/p95):\n",
          compact, "",
          "### Recall of the candidate recipes\n",
          f"Per recipe (mode at radius k, then J3 ≥ t): the least recall over the core kinds in the three size "
          f"classes (a recipe qualifies when it is ≥ {100 * MIN_RECALL:.0f} % everywhere: the least recall is "
          "its margin), and the false-positive rate over all sizes after verification. `none`: the "
          "fingerprint alone; `(J3 alone)`: every pair compared exactly (no fingerprint filter), the ceiling "
          "of each threshold.\n",
          summary, ""]
    if skipped:
        md += [f"Modes not run (`--modes`), so their recipes are left out: {', '.join(skipped)}.\n"]
    qualified = [r for r in results if r[1] is not None and r[2] is not None and r[4]]
    if qualified:
        md += ["Recipes that keep recall ≥ " f"{100 * MIN_RECALL:.0f} % on every core kind in every size class "
               "(least recall, verified false positives on hard / random negatives): "
               + "; ".join(f"{m} k = {k} J3 ≥ {t} ({100 * least:.1f} %, {pct(h, neg=True)} / {pct(r, neg=True)} %)"
                           for m, k, t, least, _, h, r, _ in qualified) + ".\n"]
    else:
        md += [f"No recipe keeps recall ≥ {100 * MIN_RECALL:.0f} % on every core kind in every size class.\n"]
    md += ["Recall in % per kind and size class (negatives: false positives in %, one decimal):\n", detail, ""]
    # Containment instead of Jaccard, for the best recipe (or the first one when none qualifies).
    if best is not None:
        chosen = next(r for r in recipes if (r[0], r[2]) == (best[0], best[1]))
        why = (f"the recipe that keeps every core kind ≥ {100 * MIN_RECALL:.0f} % at the highest J3 threshold "
               f"(J3 ≥ {best[2]}, least recall {100 * best[3]:.1f} %), with the most information-kind recall "
               "among those")
    elif recipes:
        chosen, why = recipes[0], "no recipe qualifies; the first candidate"
    else:
        chosen = None
    if chosen is not None:
        c_summary, _ = recipe_summary([chosen, ("(C3 alone)", None, None)], sims, pairs, "c3",
                                      (None,) + THRESHOLDS)
        c_detail = recipe_detail([chosen], sims, pairs, "c3", THRESHOLDS)
        md += ["### Containment instead of Jaccard\n",
               f"{chosen[0]} at k = {chosen[2]} ({why}), verified with C3 ≥ t instead of J3 ≥ t:\n",
               c_summary, "", c_detail, ""]
    return md, best


def corpus_tables(docs, available, pairs, st_stats, dropped):
    rows = []
    for lang in LANGS:
        for size, lo, hi in SIZES:
            d = docs[lang][size]
            mean = sum(len(x.text) for x in d) / len(d)
            n = defaultdict(int)
            for p in pairs:
                if p.lang == lang and p.size == size:
                    n["pos" if p.kind in POSITIVE_KINDS else p.kind] += 1
            rows.append([lang, f"{size} ({lo}-{hi})", f"{len(d)} of {available[lang][size]}", f"{mean:.0f}",
                         n["pos"], n["neg_random"], n["neg_hard"]])
    t1 = table(["language", "size (chars)", "base docs (sampled of cut)", "mean chars", "positive pairs",
                "random neg.", "hard neg."], rows)
    def label_cell(_kind, idx):
        js = [pairs[i].jaccard for i in idx]
        return f"{len(idx)} · J {sum(js) / len(js):.2f} · {pct(sum(j >= corpus.LABEL_THRESHOLD for j in js) / len(js))} %"
    rows = [row + [corpus.KIND_NOTES[row[0]]] for row in kind_by_size_rows(pairs, label_cell)]
    t2 = table(["kind"] + [s for s, _, _ in SIZES] + ["what"], rows)
    st = ", ".join(f"{k}: {v}" for k, v in st_stats.items())
    dr = sum(dropped.values())
    return (f"{t1}\n\nPairs per kind and size class (all languages): count · mean 5-shingle Jaccard · share with "
            f"label = near-duplicate (Jaccard ≥ {corpus.LABEL_THRESHOLD}).\n\n{t2}\n\n"
            f"Simplified/Traditional alignment (chapters present in both, sections with the same paragraph count): "
            f"{st}.\n\nNegatives dropped because the two documents are near-identical anyway (Jaccard ≥ 0.8): {dr}"
            + (f" ({', '.join(f'{k[0]} {k[1]} {k[2]}: {v}' for k, v in sorted(dropped.items()))})" if dr else "")
            + ".")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def package_versions(names):
    r = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}${Package} ${Version}\n"] + names,
                       capture_output=True, text=True)
    return ", ".join(line[3:].strip() for line in r.stdout.splitlines() if line.startswith("ii"))


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="the fingerprints example binary")
    ap.add_argument("--pair-bin", help="the pair_similarity example binary (the verified recipe section; "
                                       "left out without it)")
    ap.add_argument("--out", required=True, help="markdown report to write")
    ap.add_argument("--details", help="CSV with every rate per mode, language, size, kind and radius")
    ap.add_argument("--pairs", help="CSV with every pair: kind, label Jaccard, each mode's distance, both texts")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--short", type=int, default=400, help="base documents per language, short class")
    ap.add_argument("--medium", type=int, default=300)
    ap.add_argument("--long", type=int, default=150)
    ap.add_argument("--modes", help="comma-separated subset of the binary's modes (default: all)")
    args = ap.parse_args()
    started = time.time()
    load_before = loadavg()
    if not os.access(args.bin, os.X_OK):
        die(f"{args.bin} is not an executable; build it with cargo build --release -p simhash-core --example fingerprints")
    if args.pair_bin and not os.access(args.pair_bin, os.X_OK):
        die(f"{args.pair_bin} is not an executable; build it with cargo build --release -p simhash-core "
            "--example pair_similarity")
    modes = binary_modes(args.bin)
    if args.modes:
        unknown = set(args.modes.split(",")) - set(modes)
        if unknown:
            die(f"unknown modes {sorted(unknown)}; the binary has {modes}")
        modes = [m for m in modes if m in args.modes.split(",")]
    # Modes named _… are the binary's speed probes (a stage alone): timed, not judged.
    probes = [m for m in modes if m.startswith("_")]
    modes = [m for m in modes if not m.startswith("_")]
    log(f"binary modes: {', '.join(modes)}; speed probes: {', '.join(probes) or 'none'}")

    per_size = {"short": args.short, "medium": args.medium, "long": args.long}
    try:
        chapters = {lang: corpus.load_chapters(lang) for lang in LANGS}
        docs, available = {}, {}
        for lang in LANGS:
            docs[lang], available[lang] = corpus.build_documents(lang, chapters[lang], per_size, args.seed)
            for size, _, _ in SIZES:
                if len(docs[lang][size]) < 20:
                    raise corpus.CorpusError(f"only {len(docs[lang][size])} {lang} {size} documents: the "
                                             "extraction found too little prose (did the packages' HTML change?)")
        st_pairs, st_stats = corpus.aligned_st_documents(chapters["zh-cn"], chapters["zh-tw"], per_size, args.seed)
    except corpus.CorpusError as e:
        die(str(e))
    if not any(st_pairs.values()):
        die("no Simplified/Traditional section pairs could be aligned")
    converters = {c: opencc.OpenCC(c).convert for c in ("s2t", "s2twp", "t2s")}
    texts, pairs, dropped = corpus.build_pairs(docs, st_pairs, args.seed, converters)
    if not pairs or not texts.texts:
        die("no pairs were built")
    nbytes = sum(len(t.encode()) for t in texts.texts)
    log(f"corpus: {len(texts.texts)} distinct texts ({nbytes / 1e6:.1f} MB), {len(pairs)} pairs "
        f"({time.time() - started:.0f} s)")

    # Our modes run in a subprocess while the outside ones run here: two cores, two jobs.
    fps, speeds, errors, sims = {}, {}, [], {}
    with tempfile.NamedTemporaryFile(prefix="simhash-quality-", suffix=".docs") as f:
        f.write(b"\0".join(t.encode() for t in texts.texts))
        f.flush()

        def ours():
            for m in modes + probes:
                try:
                    t0 = time.time()
                    fps[m], speeds[m] = run_binary(args.bin, m, f.name, len(texts.texts))
                    log(f"{m}: {speeds[m]:.2f} MB/s ({time.time() - t0:.0f} s wall)")
                except Exception as e:  # reported after the join, as a failure of the run
                    errors.append(str(e))
            if args.pair_bin:
                try:
                    t0 = time.time()
                    sims["pairs"], speeds["pair_similarity"] = run_pair_binary(args.pair_bin, texts.texts, pairs)
                    log(f"pair_similarity: {speeds['pair_similarity']:.2f} MB/s ({time.time() - t0:.0f} s wall)")
                except Exception as e:
                    errors.append(str(e))
        th = threading.Thread(target=ours)
        th.start()
        jieba.setLogLevel(60)
        jieba.initialize()
        jieba.analyse.extract_tags("预热", topK=1)  # loads the IDF table outside the timing
        for name, _, fn in OUTSIDE:
            fps[name], speeds[name] = timed(fn, texts.texts)
            log(f"{name}: {speeds[name]:.2f} MB/s")
        th.join()
    if errors:
        die("\n".join(errors))
    for m in modes + [n for n, _, _ in OUTSIDE]:
        if all(x is None for x in fps[m]):
            die(f"{m} gave no fingerprint for any of the {len(texts.texts)} texts")

    all_scores = []
    for m in modes + [name for name, _, _ in OUTSIDE]:
        if m == "ext:datasketch_mh128":
            all_scores.append(Scores(m, pairs, minhash=fps[m]))
        else:
            all_scores.append(Scores(m, pairs, fps=fps[m]))
    by_kind = group(pairs, lambda p: p.kind)
    recs = {s.name: recommended_radius(s, by_kind) for s in all_scores}

    # ---- report
    rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "status", "--porcelain",
                            "--untracked-files=no", "--", "../../crates", "../../src"],
                           capture_output=True, text=True).stdout.strip()
    md = ["# Fingerprint quality\n",
          f"Generated by `bench/quality/run.sh` on {datetime.date.today()} at commit {rev}"
          f"{' (with uncommitted changes in crates/ or src/)' if dirty else ''}, seed {args.seed}, "
          f"in {time.time() - started:.0f} s (corpus and fingerprints; build and set-up not counted).\n",
          "A pair matches at radius k iff the Hamming distance of its fingerprints is ≤ k; a document without "
          "a fingerprint matches nothing. Reference label: Jaccard of character 5-shingles of the normalised "
          f"text (NFKC, lower case, whitespace collapsed) ≥ {corpus.LABEL_THRESHOLD}. Recommended radius: the "
          f"largest k in 0..11 with false positives ≤ {100 * MAX_FP_HARD} % on hard negatives and none on "
          "random negatives.\n",
          "## Corpus\n",
          f"Debian packages: {package_versions(sorted({s[0] for l in LANGS for s in corpus.SOURCES[l]}))}. "
          "Prose = the text of `<p>` / `<div class=\"para\">` outside navigation, tables of contents and code; "
          "Chinese paragraphs left in English are dropped; a paragraph is used at most once per language. "
          "Documents are runs of consecutive paragraphs of one chapter, disjoint within a size class.\n",
          corpus_tables(docs, available, pairs, st_stats, dropped), "",
          f"{len(texts.texts)} distinct texts, {nbytes / 1e6:.1f} MB of UTF-8, {len(pairs)} pairs.\n",
          "## Modes\n",
          table(["mode", "what", "MB/s", "texts without fingerprint"],
                [[m, "`fingerprints` example", f"{speeds[m]:.2f}", sum(x is None for x in fps[m])] for m in modes]
                + [[n, d, f"{speeds[n]:.2f}", sum(x is None for x in fps[n]) if n != "ext:datasketch_mh128" else 0]
                   for n, d, _ in OUTSIDE]
                + [[m, "speed probe (not a fingerprint)", f"{speeds[m]:.2f}", ""] for m in probes]), "",
          "MB/s: UTF-8 bytes over fingerprinting time, one core, all texts of the corpus; our modes run while "
          f"the outside ones run on the other core. Load average (1 min) at the start {load_before}, at the end "
          f"{loadavg()}: above 2 on this 2-core machine, something else was running and the MB/s are low.\n",
          "## Summary at each mode's recommended radius\n",
          "Match rate in % per pair kind (recall for positives, false positives for negatives), all languages "
          "and sizes; label precision/recall exclude the script-conversion kinds (s2t, s2twp, t2s, st_real).\n",
          cross_table(all_scores, pairs, recs, speeds), ""]
    for lang in LANGS:
        md += [f"### {lang} only\n", cross_table(all_scores, pairs, recs, speeds, lang=lang), ""]
    md += ["## Recommended radius per size class\n",
           "The same rule (hard-negative false positives ≤ 0.5 %, no random-negative match) within one size "
           "class, all languages; match rate in % at that radius.\n",
           size_class_table(all_scores, pairs), ""]
    label_tables = label_radius_tables(all_scores, pairs)
    if label_tables:
        reference_line, agreement, per_size = label_tables
        md += ["## Radius for the Jaccard label\n",
               "Per mode, the radius that agrees best with MinHash-128 on the label (the k whose worse shortfall "
               f"against MinHash-128's precision and recall is least); script-conversion kinds left out. "
               f"{reference_line}\n", agreement, ""]
        if per_size:
            md += ["Match rate in % per size class at that radius, for the modes within "
                   f"{LABEL_TOLERANCE} of MinHash-128 on both:\n", per_size, ""]
    if args.pair_bin:
        section, _ = verified_section(all_scores, sims["pairs"], pairs, speeds["pair_similarity"])
        md += section
    md.append("## Per mode\n")
    md.append("Cells: d = mean distance over the pairs whose two sides have a fingerprint (MinHash-128: J = mean estimated Jaccard) · match rate in % at k = 3/5/7/9 "
              "(negatives: false-positive rate, one decimal) · number of pairs. All languages pooled.\n")
    for s in all_scores:
        r = recs[s.name]
        md.append(f"### {s.name}\n")
        md.append(f"{speeds[s.name]:.2f} MB/s. Recommended radius: "
                  f"{'fixed threshold' if s.minhash else ('none (fails at k = 0)' if r is None else r)}.\n")
        md.append(mode_table(s, pairs) + "\n")
        ks = [0] if s.minhash else sorted(set(RADII) | ({r} if isinstance(r, int) else set()))
        prs = [(k, *label_pr(s, pairs, k)) for k in ks]
        md.append("Against the label: " + "; ".join(
            (f"J≥{MINHASH_THRESHOLD}" if s.minhash else f"k={k}") + f" P {pct(p_)} % R {pct(r_)} %"
            for k, p_, r_ in prs) + ".\n")
    report = "\n".join(md)
    with open(args.out, "w") as f:
        f.write(report)
    print(report)

    if args.details:
        os.makedirs(os.path.dirname(os.path.abspath(args.details)), exist_ok=True)
        by = group(pairs, lambda p: (p.lang, p.size, p.kind))
        with open(args.details, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["mode", "lang", "size", "kind", "pairs", "mean_value"] + [f"match_k{k}" for k in RECOMMEND_RADII])
            for s in all_scores:
                for (lang, size, kind), idx in sorted(by.items()):
                    w.writerow([s.name, lang, size, kind, len(idx), f"{mean_value(s, idx):.3f}"]
                               + [f"{rate(s, idx, k):.4f}" for k in RECOMMEND_RADII])
    if args.pairs:
        os.makedirs(os.path.dirname(os.path.abspath(args.pairs)), exist_ok=True)
        with open(args.pairs, "w", newline="") as f:
            w = csv.writer(f)
            exact = list(SIMILARITY_FIELDS) if args.pair_bin else []
            w.writerow(["kind", "lang", "size", "jaccard"] + exact + [s.name for s in all_scores] + ["a", "b"])
            for i, p in enumerate(pairs):
                vals = ["" if s.values[i] is None else (f"{s.values[i]:.3f}" if s.minhash else s.values[i])
                        for s in all_scores]
                ex = ["" if sims["pairs"][f][i] is None else f"{sims['pairs'][f][i]:.4f}" for f in exact]
                w.writerow([p.kind, p.lang, p.size, f"{p.jaccard:.3f}"] + ex + vals
                           + [texts.texts[p.a], texts.texts[p.b]])
    log(f"done in {time.time() - started:.0f} s; report in {args.out}")


if __name__ == "__main__":
    main()
