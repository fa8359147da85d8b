#!/usr/bin/env python3
# The client-side fingerprints of the Python package (pgsimhash) on real paragraphs: MB/s of
# minhash64, simhash_ngrams, simhash and simhash_similarity from Python, one call per text and a
# list at once (the *_many functions, GIL released once), and of minhash64 on 2 threads.
#   usage: target/python-venv/bin/python bench/python_client.py [N]   (default 100000 paragraphs of
#          bench/real_texts.py; the venv of tests/python/run.sh has pgsimhash installed)
#          JOIN=12 ... joins every 12 paragraphs into one text (longer texts: about 2 KB)
# Best of 3 runs of each; prints one line per function.
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pgsimhash

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
here = os.path.dirname(os.path.abspath(__file__))
out = subprocess.run([sys.executable, os.path.join(here, "real_texts.py"), str(n)], capture_output=True, check=True)
# COPY text format: one paragraph a line, backslash escapes
texts = [line.replace("\\t", "\t").replace("\\n", "\n").replace("\\\\", "\\") for line in out.stdout.decode().splitlines()]
join = int(os.environ.get("JOIN", "1"))
texts = ["\n".join(texts[i : i + join]) for i in range(0, len(texts), join)]
mb = sum(len(t.encode()) for t in texts) / 1e6
print(f"{len(texts):,} texts, {mb:.1f} MB (average {mb * 1e6 / len(texts):,.0f} bytes)")
pgsimhash.preload()


def best(f, runs=3):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def threads(f, k=2):
    chunks = [texts[i::k] for i in range(k)]
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(f, chunks))


pairs = list(zip(texts, texts[1:] + texts[:1]))
cases = [
    ("minhash64, one call per text", lambda: [pgsimhash.minhash64(t) for t in texts], mb),
    ("minhash64_many (a list)", lambda: pgsimhash.minhash64_many(texts), mb),
    ("minhash64_many, 2 threads", lambda: threads(pgsimhash.minhash64_many), mb),
    ("simhash_ngrams_many", lambda: pgsimhash.simhash_ngrams_many(texts), mb),
    ("simhash_many (words, jieba-rs)", lambda: pgsimhash.simhash_many(texts), mb),
    ("simhash_similarity of neighbours", lambda: [pgsimhash.simhash_similarity(a, b) for a, b in pairs], 2 * mb),
]
for name, f, size in cases:
    seconds = best(f)
    print(f"{name:36} {seconds:7.2f} s  {size / seconds:7.1f} MB/s")
