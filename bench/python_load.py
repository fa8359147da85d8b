#!/usr/bin/env python3
# pgsimhash-load's speed: N real paragraphs (bench/real_texts.py) plus 10 % planted near-duplicates
# (one word of an earlier paragraph replaced) as JSON lines, loaded into a table with the verified
# constraint at k = 9 (minhash64(body), the simhash index, action skip), checked at each row and
# checked at commit (deferred), batches of 1,000 and 5,000 rows; rows/s of the whole load (read,
# send, check, commit) and what it skipped.
#   usage: target/python-venv/bin/python bench/python_load.py [N]   (default 100000; the cluster of
#          scripts/common.sh through libpq's environment: source scripts/common.sh; start_cluster)
import json
import os
import random
import subprocess
import sys
import tempfile

import psycopg

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
here = os.path.dirname(os.path.abspath(__file__))
out = subprocess.run([sys.executable, os.path.join(here, "real_texts.py"), str(n)], capture_output=True, check=True)
texts = [line.replace("\\t", "\t").replace("\\n", "\n").replace("\\\\", "\\") for line in out.stdout.decode().splitlines()]
rng = random.Random(1)
rows = []
for i, body in enumerate(texts):
    rows.append(body)
    if rng.random() < 0.1:
        words = body.split(" ")
        words[rng.randrange(len(words))] = "edited"
        rows.append(" ".join(words))
work = tempfile.mkdtemp()
path = os.path.join(work, "docs.jsonl")
with open(path, "w", encoding="utf-8") as f:
    for i, body in enumerate(rows):
        f.write(json.dumps({"id": i, "body": body}, ensure_ascii=False) + "\n")
print(f"{len(rows):,} rows ({len(rows) - len(texts):,} planted edits), {os.path.getsize(path) / 1e6:.1f} MB of JSON lines")

db = "pgsimhash_bench_load"
with psycopg.connect(dbname="postgres", autocommit=True) as admin:
    admin.execute(f"DROP DATABASE IF EXISTS {db}")
    admin.execute(f"CREATE DATABASE {db}")
try:
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION simhash")
        for deferred in (False, True):
            for batch in (1000, 5000):
                conn.execute("DROP TABLE IF EXISTS docs CASCADE")
                conn.execute(
                    "CREATE TABLE docs (id bigint, body text, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED)"
                )
                conn.execute("CREATE INDEX ON docs USING simhash (fp)")
                conn.execute(
                    f"SELECT simhash_add_dedup('docs', 'fp', k => 9, action => 'skip', verify => 'body', deferred => {deferred})"
                )
                done = subprocess.run(
                    [os.path.join(os.path.dirname(sys.executable), "pgsimhash-load"), "--dsn", f"dbname={db}",
                     "--table", "docs", "--batch-size", str(batch), "--quiet", "--json", path],
                    capture_output=True, text=True, check=True,
                )
                s = json.loads(done.stdout)
                when = "at commit (deferred)" if deferred else "at each row"
                print(
                    f"verified k = 9, checked {when:21} batches of {batch:5}: {s['seconds']:6.1f} s,"
                    f" {s['rows_per_second']:8,.0f} rows/s; inserted {s['inserted']:,}, skipped {s['skipped']:,},"
                    f" retried {s['retries']}"
                )
finally:
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    os.remove(path)
    os.rmdir(work)
