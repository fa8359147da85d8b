#!/usr/bin/env bash
# Concurrency test of the near-duplicate constraint (action 'skip'), run by scripts/test.sh.
#
# For each radius k (default 3 and 7): 8 loaders write into one table at the same time. Loader 1 is
# a COPY of 100,000 rows in one transaction; loaders 2-8 insert 20 batches of 250 rows, each batch a
# multi-row INSERT in its own transaction. Near-duplicates of each other's rows are planted across
# all loaders. A batch that fails with a deadlock or serialization error (as with a UNIQUE
# constraint, concurrent writers can deadlock) is retried. Afterwards:
#   - a self-join finds no pair within k among the stored rows;
#   - stored + skipped (from the loaders' NOTICEs) = attempted, every row was stored at most once;
#   - every attempted row that is not stored has a stored row within k (nothing lost).
# Usage: tests/concurrency/dedup.sh [k ...]   (against the cluster of scripts/common.sh)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail

COPY_ROWS=${COPY_ROWS:-100000}
BATCHES=${BATCHES:-20}
BATCH_ROWS=${BATCH_ROWS:-250}
radii=("$@")
[ ${#radii[@]} -gt 0 ] || radii=(3 7)
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
db=simhash_concurrency
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

for k in "${radii[@]}"; do
    log "concurrency: 8 loaders, k = $k (a COPY of $COPY_ROWS rows beside 7 loaders of $BATCHES x $BATCH_ROWS rows)"
    fresh_database "$db"
    q <<SQL
CREATE TABLE attempts (id bigint PRIMARY KEY, loader int, batch int, fp simhash64);
SELECT setseed(0.5) \g /dev/null
-- 4,000 seed fingerprints; every loader writes variants of some of them, within k/2 bits (so any
-- two variants of one seed conflict) or within k bits (so some do, some do not).
CREATE TEMP TABLE seeds AS
    SELECT s, ('x' || md5('seed' || s))::bit(64)::bigint AS fp FROM generate_series(1, 4000) s;
CREATE TEMP TABLE plan AS
    SELECT 1 AS loader, (n - 1) / $BATCH_ROWS AS batch, n FROM generate_series(1, $COPY_ROWS) n
    UNION ALL
    SELECT l, b, $COPY_ROWS + ((l - 2) * $BATCHES + b) * $BATCH_ROWS + r
    FROM generate_series(2, 8) l, generate_series(0, $BATCHES - 1) b, generate_series(1, $BATCH_ROWS) r;
INSERT INTO attempts
SELECT n, loader, batch,
       CASE WHEN random() < 0.2 THEN
           (SELECT (s.fp # coalesce(bit_or(1::bigint << (random() * 63)::int), 0))::simhash64
            FROM generate_series(1, (random() * CASE WHEN random() < 0.7 THEN $k / 2 ELSE $k END)::int)
            WHERE n > 0)
       ELSE ('x' || md5('row' || n))::bit(64)::bigint::simhash64 END
FROM plan JOIN seeds s ON s.s = 1 + (hashint8(n) & 2147483647) % 4000;
CREATE TABLE docs (id bigint PRIMARY KEY, fp simhash64 NOT NULL);
SELECT simhash_create_indexes('docs', 'fp') \g /dev/null
SELECT simhash_add_dedup('docs', 'fp', $k, 'skip') \g /dev/null
\copy (SELECT id, fp FROM attempts WHERE loader = 1 ORDER BY id) TO '$work/copy.tsv'
SQL
    started=$(date +%s.%N)
    (load_with_retry "$db" "$work/copy" "\\copy docs (id, fp) FROM '$work/copy.tsv'" >"$work/skipped.1") &
    pids=($!)
    for l in 2 3 4 5 6 7 8; do
        (
            total=0
            for b in $(seq 0 $((BATCHES - 1))); do
                n=$(load_with_retry "$db" "$work/l$l" "INSERT INTO docs (id, fp) SELECT id, fp FROM attempts WHERE loader = $l AND batch = $b ORDER BY id")
                total=$((total + n))
            done
            echo "$total" >"$work/skipped.$l"
        ) &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    elapsed=$(echo "$(date +%s.%N) - $started" | bc)
    skipped=$(cat "$work"/skipped.* | awk '{s += $1} END {print s}')
    retries=$( (cat "$work"/*.retries 2>/dev/null || true) | wc -l)
    q -v k="$k" -v skipped="$skipped" <<'SQL'
\pset footer off
ANALYZE docs;
SET enable_seqscan = off;
SET jit = off;
SELECT (SELECT count(*) FROM attempts) AS attempted, (SELECT count(*) FROM docs) AS stored, :skipped AS skipped \gset
SELECT count(*) AS pairs_within_k FROM docs a JOIN docs b ON a.id < b.id AND a.fp <~> b.fp <= :k \gset
SELECT count(*) AS lost FROM attempts a
WHERE NOT EXISTS (SELECT FROM docs d WHERE d.id = a.id)
  AND NOT EXISTS (SELECT FROM docs d WHERE d.fp <~> a.fp <= :k) \gset
SELECT count(*) AS altered FROM docs d JOIN attempts a USING (id) WHERE a.fp <> d.fp \gset
SELECT :attempted AS attempted, :stored AS stored, :skipped AS skipped, :pairs_within_k AS pairs_within_k,
       :lost AS lost, :altered AS altered;
SELECT CASE WHEN :stored + :skipped = :attempted AND :pairs_within_k = 0 AND :lost = 0 AND :altered = 0
            AND :stored < :attempted
       THEN 'ok' ELSE 'FAILED' END AS result \gset
\echo result: :result
\if :{?result}
\endif
SELECT :'result' = 'ok' AS passed \gset
\if :passed
\else
\echo 'concurrency test FAILED'
\quit 3
\endif
SQL
    echo "k = $k: passed in ${elapsed} s ($retries batches retried after a deadlock or serialization failure)"
done
