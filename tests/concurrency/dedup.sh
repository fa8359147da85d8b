#!/usr/bin/env bash
# Concurrency test of the near-duplicate constraint (action 'skip'), run by scripts/test.sh.
#
# For each radius k (default 3 and 7): 8 loaders write into one table at the same time. Loader 1 is
# a COPY of 100,000 rows in one transaction; loaders 2-8 insert 20 batches of 250 rows, each batch a
# multi-row INSERT in its own transaction. Near-duplicates of each other's rows are planted across
# all loaders. A batch that fails with a deadlock or serialization error (as with a UNIQUE
# constraint, concurrent writers can deadlock) is retried. Afterwards, each of these invariants
# fails the script with a message naming it:
#   - no near pair stored: no two stored rows are within k;
#   - stored + skipped (from the loaders' NOTICEs) = attempted, every row was stored at most once;
#   - nothing lost: every attempted row that is not stored has a stored row within k;
#   - rows unaltered: every stored row has the fingerprint and text it was written with;
# and the constraint skipped something. The pairs within k are found by brute force, every stored
# row against every other (tests/concurrency/near_pairs.rs, built with rustc), not through the
# index or the lookup under test: an index that misses rows cannot hide a pair it let in.
# A radius written K:verify runs the same with verification (simhash_add_dedup(..., verify => 'body')):
# rows carry texts; planted variants of a seed have similar texts, and a tenth of the planted
# rows are decoys, within k of a seed but with an unrelated text, which must be stored. "Within k"
# above then means within k and simhash_similarity >= 0.7 (the default threshold).
# A radius written K:simhash (or K:verify:simhash) runs the same with a simhash index instead of the
# four segment B-trees (the row trigger's lookup and the commit-time recheck read it). A radius
# written K:deferred (or K:simhash:deferred, K:verify:deferred, K:verify:simhash:deferred) runs the
# same with the deferred check (simhash_add_dedup(..., deferred => true)): every row is checked at
# commit. A radius written K:code (or K:code:deferred, K:verify:code...) stores the fingerprints as codes, a bit(64)
# column with a simhash index of codes (src/dedup/value.rs, Code), and checks them alike.
# Usage: tests/concurrency/dedup.sh [k[:verify][:simhash|:code][:deferred] ...]   (against the cluster of scripts/common.sh)
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
rustc -O -C target-cpu=native --edition 2021 -o "$work/near_pairs" "$REPO_ROOT/tests/concurrency/near_pairs.rs"

for radius in "${radii[@]}"; do
    k=${radius%%:*}
    verify=false; case "$radius" in *:verify*) verify=true ;; esac
    method=btree; case "$radius" in *:simhash*) method=simhash ;; esac
    deferred=false; case "$radius" in *:deferred) deferred=true ;; esac
    # The column's type, and the fingerprint of attempts as written into it.
    column=simhash64 written=fp
    case "$radius" in *:code*) method=code column='bit(64)' written='fp::bit(64)' ;; esac
    log "concurrency: 8 loaders, k = $k$($verify && echo ', verified by text similarity')$($deferred && echo ', checked at commit'), $method index (a COPY of $COPY_ROWS rows beside 7 loaders of $BATCHES x $BATCH_ROWS rows)"
    fresh_database "$db"
    rm -f "$work"/*.retries   # (counted per configuration)
    q -v verify="$verify" <<SQL
CREATE TABLE attempts (id bigint PRIMARY KEY, loader int, batch int, fp simhash64, body text);
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
SELECT n, loader, batch, fp,
       CASE WHEN NOT planted THEN 'row ' || n || ' ' || md5('row' || n) || md5('text' || n)
            WHEN decoy THEN 'decoy ' || n || ' ' || md5('decoy' || n) || md5('other' || n)
            -- one character of the seed's text replaced: similarity about 0.9 to the seed, 0.85 to
            -- other variants
            ELSE overlay('seed ' || s || ' ' || md5('t' || s) || md5('u' || s) placing 'Z' from 1 + n % 70 for 1) END
FROM (SELECT n, loader, batch, s, planted, random() < 0.1 AS decoy,
             CASE WHEN planted THEN
                 (SELECT (s.fp # coalesce(bit_or(1::bigint << (random() * 63)::int), 0))::simhash64
                  FROM generate_series(1, (random() * CASE WHEN random() < 0.7 THEN $k / 2 ELSE $k END)::int)
                  WHERE n > 0)
             ELSE ('x' || md5('row' || n))::bit(64)::bigint::simhash64 END AS fp
      FROM (SELECT *, random() < 0.2 AS planted FROM plan) p
      JOIN seeds s ON s.s = 1 + (hashint8(n) & 2147483647) % 4000) a;
CREATE TABLE docs (id bigint PRIMARY KEY, fp $column NOT NULL, body text NOT NULL);
SELECT '$method' = 'code' AS code_index \gset
\if :code_index
CREATE INDEX docs_fp ON docs USING simhash (fp);
\else
SELECT simhash_create_indexes('docs', 'fp', '$method') \g /dev/null
\endif
\if :verify
SELECT simhash_add_dedup('docs', 'fp', $k, 'skip', verify => 'body', deferred => $deferred) \g /dev/null
\else
SELECT simhash_add_dedup('docs', 'fp', $k, 'skip', deferred => $deferred) \g /dev/null
\endif
\copy (SELECT id, $written, body FROM attempts WHERE loader = 1 ORDER BY id) TO '$work/copy.tsv'
SQL
    started=$(date +%s.%N)
    (load_with_retry "$db" "$work/copy" "\\copy docs (id, fp, body) FROM '$work/copy.tsv'" >"$work/skipped.1") &
    pids=($!)
    for l in 2 3 4 5 6 7 8; do
        (
            total=0
            for b in $(seq 0 $((BATCHES - 1))); do
                n=$(load_with_retry "$db" "$work/l$l" "INSERT INTO docs (id, fp, body) SELECT id, $written, body FROM attempts WHERE loader = $l AND batch = $b ORDER BY id")
                total=$((total + n))
            done
            echo "$total" >"$work/skipped.$l"
        ) &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    skipped=$(cat "$work"/skipped.* | awk '{s += $1} END {print s}')
    retries=$( (cat "$work"/*.retries 2>/dev/null || true) | wc -l)
    # Every pair within k among the stored rows, and every (unstored attempt, stored row) pair
    # within k, by brute force outside PostgreSQL.
    q -c "\copy (SELECT id, fp::bigint FROM docs) TO '$work/stored.tsv'" \
      -c "\copy (SELECT id, fp::bigint FROM attempts a WHERE NOT EXISTS (SELECT FROM docs d WHERE d.id = a.id)) TO '$work/unstored.tsv'"
    "$work/near_pairs" "$k" "$work/stored.tsv" >"$work/near.tsv"
    "$work/near_pairs" "$k" "$work/stored.tsv" "$work/unstored.tsv" >"$work/cover.tsv"
    counts=$(q -At -F ' ' -v k="$k" -v verify="$verify" <<SQL
SET jit = off;
CREATE TEMP TABLE near (a bigint, b bigint);
CREATE TEMP TABLE cover (attempt bigint, stored bigint);
\copy near FROM '$work/near.tsv'
\copy cover FROM '$work/cover.tsv'
-- (statistics of every table joined below: without them, a plan of nested loops over the
-- unstored attempts and the cover ran for more than five minutes once)
ANALYZE near, cover, docs, attempts;
-- "Near": within k, and with verification also at least 0.7 similar (the default threshold).
SELECT CASE WHEN :verify THEN 0.7 ELSE 0 END AS t \gset
SELECT (SELECT count(*) FROM attempts) AS attempted,
       (SELECT count(*) FROM docs) AS stored,
       (SELECT count(*) FROM near n JOIN docs a ON a.id = n.a JOIN docs b ON b.id = n.b
        WHERE NOT :verify OR simhash_similarity(a.body, b.body) >= :t) AS near_pairs,
       (SELECT count(*) FROM attempts a
        WHERE NOT EXISTS (SELECT FROM docs d WHERE d.id = a.id)
          AND NOT EXISTS (SELECT FROM cover c JOIN docs d ON d.id = c.stored
                          WHERE c.attempt = a.id AND (NOT :verify OR simhash_similarity(d.body, a.body) >= :t))) AS lost,
       (SELECT count(*) FROM docs d JOIN attempts a USING (id) WHERE a.$written <> d.fp OR a.body <> d.body) AS altered,
       -- With verification, decoys (within k of a seed's variants, unrelated text) are stored.
       (SELECT count(*) FROM docs WHERE body LIKE 'decoy%') AS decoys_stored,
       (SELECT count(*) FROM docs d WHERE body LIKE 'decoy%'
          AND EXISTS (SELECT FROM near n WHERE d.id IN (n.a, n.b))) AS decoys_within_k;
SQL
    )
    read -r attempted stored near_pairs lost altered decoys_stored decoys_within_k <<<"$counts"
    echo "attempted $attempted, stored $stored, skipped $skipped, near pairs stored $near_pairs, lost $lost, altered $altered$($verify && echo ", decoys stored $decoys_stored ($decoys_within_k within k of another row)")"
    failures=()
    ((near_pairs == 0)) || failures+=("no near pair stored: $near_pairs pairs of stored rows are within k = $k (brute force over all $stored stored rows), e.g. $(head -3 "$work/near.tsv" | tr '\t\n' '~ ')")
    ((stored + skipped == attempted)) || failures+=("stored + skipped = attempted: $stored stored + $skipped skipped = $((stored + skipped)), but $attempted were attempted")
    ((lost == 0)) || failures+=("nothing lost: $lost attempted rows are neither stored nor within k of a stored row")
    ((altered == 0)) || failures+=("rows unaltered: $altered stored rows differ from the rows written")
    ((stored < attempted)) || failures+=("the constraint skipped nothing: all $attempted attempted rows were stored")
    if $verify && ((decoys_within_k == 0)); then
        failures+=("verification: no stored decoy is within k of another stored row (the decoys test nothing)")
    fi
    if ((${#failures[@]} > 0)); then
        echo "concurrency test FAILED (k = $k$($deferred && echo ', deferred')$($verify && echo ', verified'), $method index):" >&2
        printf '  invariant broken: %s\n' "${failures[@]}" >&2
        exit 1
    fi
    echo "k = $k$($deferred && echo ' (deferred)')$($verify && echo ' (verified)'), $method index: passed in ${elapsed} s ($retries batches retried after a deadlock or serialization failure)"
done
