#!/usr/bin/env bash
# Cost of the near-duplicate constraint per inserted row: INSERTs into a table of BASE fingerprints
# (default 1,000,000) without the trigger and with simhash_add_dedup(..., k, 'skip') for each k of
# RADII (default 3 7 11), checked at each row and (DEFERRED=1, the default) at commit, by 1 loader
# and by 8 loaders, for each index method of METHODS (default "btree simhash": the four covering
# segment B-trees, the simhash index); then a COPY of COPY_ROWS rows (default 1,000,000) in one
# transaction beside 7 loaders, with the trigger at k = 3 (COPY=0 leaves it out; checked at each
# row and, with DEFERRED=1, at commit), for each method. With VERIFY=1 (the default), also verified
# by the rows' texts (simhash_add_dedup(..., verify => 'body')) for each k of VERIFY_RADII (default
# 9, the recommended recipe's radius), at each row and (DEFERRED=1) at commit.
#   usage: bench/dedup.sh            (needs scripts/setup.sh; about 20-30 minutes on 2 cores)
# Rows are uniform random fingerprints (md5) with a text of 70 characters each, so almost none is
# skipped and the verified check compares few texts: this measures the check itself. Loaders retry a batch after a deadlock or serialization failure; retries are counted.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
set -euo pipefail
BASE=${BASE:-1000000}
ROWS=${ROWS:-40000}            # rows per configuration: 40 batches of 1,000 or 8 x 20 batches of 250
COPY_ROWS=${COPY_ROWS:-1000000}
COPY=${COPY:-1}
DEFERRED=${DEFERRED:-1}        # also the deferred check (simhash_add_dedup(..., deferred => true))
METHODS=${METHODS:-btree simhash}
RADII=${RADII:-3 7 11}
VERIFY=${VERIFY:-1}            # also verified (verify => 'body') for each k of VERIFY_RADII
VERIFY_RADII=${VERIFY_RADII:-9}
db=simhash_bench_dedup
restart_cluster ""              # the server's defaults (shared_buffers 128MB, max_locks_per_transaction 64)
fresh_database "$db"
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

log "loading $BASE fingerprints"
q <<SQL
CREATE TABLE docs (id bigint PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
INSERT INTO docs SELECT i, ('x' || md5(i::text))::bit(64)::bigint::simhash64, 'row ' || md5('a' || i) || md5('b' || i)
FROM generate_series(1, $BASE) i;
-- New rows: id above BASE, batch b of 1,000 rows (or 4 x 250 for 8 loaders).
CREATE TABLE incoming AS
    SELECT $BASE + n AS id, (n - 1) / 250 AS batch, ('x' || md5('new' || n))::bit(64)::bigint::simhash64 AS fp,
           'new ' || md5('a' || n) || md5('b' || n) AS body
    FROM generate_series(1, greatest($ROWS, $COPY_ROWS) + 8 * $ROWS) n;
CREATE INDEX ON incoming (batch);
VACUUM ANALYZE docs, incoming;
SQL
server=$(q -At -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', shared_buffers=' || current_setting('shared_buffers') || ', max_locks_per_transaction=' || current_setting('max_locks_per_transaction')")

reset_table() {
    q -c "DELETE FROM docs WHERE id > $BASE" -c "VACUUM docs"
}
now() { date +%s.%N; }
# Seconds since $1 (a value of now), without bc (not on a minimal Debian).
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f\n", b - a }'; }

# use_method METHOD: the table's lookup indexes are those of METHOD.
use_method() {
    q -c "SET client_min_messages = warning" -c "DROP TRIGGER IF EXISTS docs_fp_dedup ON docs" -c "DROP TRIGGER IF EXISTS docs_fp_dedup_notice ON docs"
    q -At -c "SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'docs'::regclass AND NOT indisprimary" |
        while read -r index; do q -c "DROP INDEX $index"; done
    q -c "SELECT simhash_create_indexes('docs', 'fp', '$1')" >/dev/null
}

# run_config METHOD LABEL K LOADERS [DEFERRED [VERIFY]]: inserts ROWS rows, as 1 loader of ROWS/1000
# batches of 1,000 rows or 8 loaders of ROWS/2000 batches of 250 rows each, with the check at each
# row or (DEFERRED=true) at commit, verified by the texts with VERIFY=true; prints a table row.
run_config() {
    local method=$1 label=$2 k=$3 loaders=$4 deferred=${5:-false} verify=${6:-false}
    reset_table
    if [ "$k" = - ]; then
        q -c "SET client_min_messages = warning" -c "DROP TRIGGER IF EXISTS docs_fp_dedup ON docs" -c "DROP TRIGGER IF EXISTS docs_fp_dedup_notice ON docs"
    else
        q -c "SELECT simhash_add_dedup('docs', 'fp', $k, 'skip', deferred => $deferred$($verify && echo ", verify => 'body'"))" >/dev/null
    fi
    rm -f "$work"/*.retries
    local started; started=$(now)
    local pids=()
    if [ "$loaders" = 1 ]; then
        for b in $(seq 0 $((ROWS / 1000 - 1))); do
            load_with_retry "$db" "$work/l1" "INSERT INTO docs SELECT id, fp, body FROM incoming WHERE batch BETWEEN $((b * 4)) AND $((b * 4 + 3))" >/dev/null
        done
    else
        for l in $(seq 0 7); do
            (for b in $(seq 0 $((ROWS / 2000 - 1))); do
                load_with_retry "$db" "$work/l$l" "INSERT INTO docs SELECT id, fp, body FROM incoming WHERE batch = $((l * ROWS / 2000 + b))" >/dev/null
            done) &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid"; done
    fi
    local seconds; seconds=$(since "$started")
    local retries; retries=$( (cat "$work"/*.retries 2>/dev/null || true) | wc -l)
    printf '%s\t%s\t%s\t%s\n' "$label" "$method" "$seconds" "$retries" >>"$work/results"
}

# copy_beside_loaders METHOD [DEFERRED]: a COPY of COPY_ROWS rows in one transaction beside 7
# loaders (k = 3), checked at each row or (DEFERRED=true) at commit.
copy_beside_loaders() {
    local deferred=${2:-false}
    reset_table
    q -c "SELECT simhash_add_dedup('docs', 'fp', 3, 'skip', deferred => $deferred)" >/dev/null
    q -c "\\copy (SELECT id, fp, body FROM incoming ORDER BY id LIMIT $COPY_ROWS) TO '$work/copy.tsv'"
    rm -f "$work"/*.retries
    started=$(now)
    (load_with_retry "$db" "$work/copy" "\\copy docs FROM '$work/copy.tsv'" >/dev/null; since "$started" >"$work/copy.seconds") &
    copy_pid=$!
    pids=()
    first=$((COPY_ROWS / 250 + 1))
    for l in $(seq 0 6); do
        (for b in $(seq 0 19); do
            load_with_retry "$db" "$work/l$l" "INSERT INTO docs SELECT id, fp, body FROM incoming WHERE batch = $((first + l * 20 + b))" >/dev/null
        done; since "$started" >"$work/l$l.seconds") &
        pids+=($!)
    done
    wait "$copy_pid"; for pid in "${pids[@]}"; do wait "$pid"; done
    copy_seconds=$(cat "$work/copy.seconds")
    loaders_seconds=$(cat "$work"/l?.seconds | sort -n | tail -1)
    copy_retries=$( (cat "$work/copy.retries" 2>/dev/null || true) | wc -l)
    loader_retries=$( (cat "$work"/l?.retries 2>/dev/null || true) | wc -l)
    python3 -c "import sys; c, n, l = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]); print(
        f'{sys.argv[6]}: COPY of {n:,} rows in one transaction with the trigger at k=3{sys.argv[7]}: {c:.0f} s ({n/c:,.0f} rows/s, '
        f'{sys.argv[4]} retries); beside it 7 loaders of 20 x 250 rows finished after {l:.0f} s ({sys.argv[5]} batches retried).')" \
        "$copy_seconds" "$COPY_ROWS" "$loaders_seconds" "$copy_retries" "$loader_retries" "$1" \
        "$([ "$deferred" = true ] && echo ', checked at commit (deferred)')" >>"$work/copies"
}

: >"$work/results"
: >"$work/copies"
for method in $METHODS; do
    log "index method $method: single and concurrent loaders"
    use_method "$method"
    run_config "$method" "no trigger, 1 loader" - 1
    run_config "$method" "no trigger, 8 loaders" - 8
    for k in $RADII; do
        run_config "$method" "trigger k=$k, 1 loader" "$k" 1
        run_config "$method" "trigger k=$k, 8 loaders" "$k" 8
        if [ "$DEFERRED" = 1 ]; then
            run_config "$method" "deferred k=$k, 1 loader" "$k" 1 true
            run_config "$method" "deferred k=$k, 8 loaders" "$k" 8 true
        fi
    done
    if [ "$VERIFY" = 1 ]; then
        for k in $VERIFY_RADII; do
            run_config "$method" "verified k=$k, 1 loader" "$k" 1 false true
            run_config "$method" "verified k=$k, 8 loaders" "$k" 8 false true
            if [ "$DEFERRED" = 1 ]; then
                run_config "$method" "verified deferred k=$k, 1 loader" "$k" 1 true true
                run_config "$method" "verified deferred k=$k, 8 loaders" "$k" 8 true true
            fi
        done
    fi
    if [ "$COPY" = 1 ]; then
        log "index method $method: a COPY of $COPY_ROWS rows in one transaction beside 7 loaders (k = 3)"
        copy_beside_loaders "$method"
        if [ "$DEFERRED" = 1 ]; then
            copy_beside_loaders "$method" true
        fi
    fi
done

echo
echo "Near-duplicate constraint, $BASE rows already stored, $ROWS rows inserted per configuration ($server; 2 cores)."
echo "µs per row (batches retried after 40001/40P01), by index method:"
echo
python3 - "$work/results" "$ROWS" $METHODS <<'PY'
import sys
rows, n, methods = {}, int(sys.argv[2]), sys.argv[3:]
for line in open(sys.argv[1]):
    label, method, seconds, retries = line.rstrip("\n").split("\t")
    rows.setdefault(label, {})[method] = (float(seconds), int(retries))
print("| configuration | " + " | ".join(methods) + " |")
print("|---|" + "---|" * len(methods))
for label, by_method in rows.items():
    cells = []
    for m in methods:
        if m in by_method:
            seconds, retries = by_method[m]
            cells.append(f"{seconds * 1e6 / n:,.0f} ({retries})")
        else:
            cells.append("")
    print(f"| {label} | " + " | ".join(cells) + " |")
PY
echo
cat "$work/copies"
