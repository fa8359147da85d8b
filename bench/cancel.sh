#!/usr/bin/env bash
# How soon each long call of the extension stops when asked: every call runs with
# statement_timeout = TIMEOUT_MS (default 1000) and the table prints how long it took in all and how
# far past the timeout it stopped (a call that finishes before the timeout says so). One run, one
# machine: the overshoot is what docs/security.md states.
#   bash bench/cancel.sh            (PG_MAJOR=15 by default; ROWS=1000000 BIG_ROWS=10000000 MB=100)
# Calls: the text functions on texts of MB megabytes, pairs and clusters of ROWS rows at k = 11
# through every route (in memory from a query, through the simhash index, verified), building a
# simhash index on BIG_ROWS rows, an ordered scan of all of them, and the commit-time check of a
# transaction that wrote COMMIT_ROWS (default 200000) rows under a deferred constraint (canceled with
# pg_cancel_backend: statement_timeout does not cover a commit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
ROWS=${ROWS:-1000000}
BIG_ROWS=${BIG_ROWS:-10000000}
MB=${MB:-100}
COMMIT_ROWS=${COMMIT_ROWS:-200000}
TIMEOUT_MS=${TIMEOUT_MS:-1000}
DB=simhash_cancel
install_prerequisites
start_cluster
fresh_database "$DB"
psql_q() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

log "setting up: $ROWS rows with fingerprints and texts, $BIG_ROWS rows of fingerprints"
psql_q <<SQL
CREATE TABLE t (id bigint PRIMARY KEY, fp simhash64, body text);
INSERT INTO t SELECT i, (('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint)::simhash64,
                     md5(i::text) || ' ' || md5((i % 1000)::text)
FROM generate_series(1, $ROWS) i;
CREATE INDEX t_fp ON t USING simhash (fp);
CREATE TABLE big (id bigint, fp simhash64);
INSERT INTO big SELECT i, (('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint)::simhash64
FROM generate_series(1, $BIG_ROWS) i;
CREATE TABLE big_indexed AS TABLE big;
CREATE INDEX big_indexed_fp ON big_indexed USING simhash (fp);
CREATE TABLE loaded (id bigint, fp simhash64);
CREATE INDEX loaded_fp ON loaded USING simhash (fp);
SELECT simhash_add_dedup('loaded', 'fp', 11, 'skip', deferred => true);
VACUUM ANALYZE;
SQL

text="repeat('Near-duplicate 文本 detection, 近似重复检测 at scale. ', ($MB * 1048576 / 60))"
half="repeat('Near-duplicate 文本 detection, 近似重复检测 at scale. ', ($MB * 1048576 / 120))"
# (texts this long need more memory than simhash.max_text_memory allows by default)
timeout="SET statement_timeout = $TIMEOUT_MS; SET simhash.max_text_memory = '8GB'"
# name|statements before the clock starts|the timed statement
calls=(
    "simhash() of $MB MB|$timeout|SELECT simhash($text) IS NULL"
    "simhash_ngrams() of $MB MB|$timeout|SELECT simhash_ngrams($text) IS NULL"
    "minhash64() of $MB MB|$timeout|SELECT minhash64($text) IS NULL"
    "simhash_fold() of $MB MB|$timeout|SELECT length(simhash_fold($text))"
    "simhash_similarity() of two $((MB / 2)) MB texts|$timeout|SELECT simhash_similarity($half, $half || 'x')"
    "simhash_features() of $MB MB|$timeout|SELECT count(*) FROM simhash_features($text)"
    "simhash_pairs(query, 11), $ROWS rows|$timeout|SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM t', 11)"
    "simhash_clusters(query, 11), $ROWS rows|$timeout|SELECT count(*) FROM simhash_clusters('SELECT id, fp FROM t', 11)"
    "simhash_pairs(tbl, fp, 11) through the index|$timeout|SELECT count(*) FROM simhash_pairs('t', 'fp', 11)"
    "simhash_clusters(tbl, fp, 11) through the index|$timeout|SELECT count(*) FROM simhash_clusters('t', 'fp', 11)"
    "verified simhash_pairs(query, 11, 0.5)|$timeout|SELECT count(*) FROM simhash_pairs('SELECT id, fp, body FROM t', 11, 0.5)"
    "verified simhash_clusters(tbl, fp, 11, body, 0.5)|$timeout|SELECT count(*) FROM simhash_clusters('t', 'fp', 11, 'body', 0.5)"
    "CREATE INDEX USING simhash, $BIG_ROWS rows|$timeout|CREATE INDEX big_fp ON big USING simhash (fp)"
    "ORDER BY fp <-> q, all $BIG_ROWS rows|SET enable_seqscan = off; $timeout|SELECT count(*) FROM (SELECT id FROM big_indexed ORDER BY fp <-> '0123456789abcdef') s"
    "radius k = 32 through the index, $BIG_ROWS rows|SET enable_seqscan = off; $timeout|SELECT count(*) FROM big_indexed WHERE fp <@ simhash_ball('0123456789abcdef', 32)"
    "simhash_index_check, $BIG_ROWS rows|$timeout|SELECT simhash_index_check('big_indexed_fp')"
)

printf '\n| call | ran (ms) | past the %d ms timeout (ms) | result |\n|---|---|---|---|\n' "$TIMEOUT_MS"
for entry in "${calls[@]}"; do
    IFS='|' read -r name setup sql <<<"$entry"
    # The clock is the server's, read just before and just after the timed statement.
    out=$(psql -X -q -d "$DB" 2>&1 <<SQL || true
\set VERBOSITY sqlstate
$setup;
SELECT pg_catalog.clock_timestamp() AS t0 \gset
$sql;
SELECT 'elapsed', round(extract(epoch FROM pg_catalog.clock_timestamp() - :'t0'::timestamptz) * 1000);
SQL
)
    ms=$(sed -n 's/^ *elapsed *| *\([0-9]*\).*/\1/p' <<<"$out")
    if grep -q '57014' <<<"$out"; then
        printf '| %s | %d | %d | canceled (57014) |\n' "$name" "$ms" "$((ms - TIMEOUT_MS))"
    elif grep -q 'ERROR' <<<"$out"; then
        printf '| %s | %s | - | %s |\n' "$name" "$ms" "$(grep -m1 ERROR <<<"$out")"
    else
        printf '| %s | %d | - | finished before the timeout |\n' "$name" "$ms"
    fi
done

# The commit-time check of the deferred constraint: PostgreSQL disarms statement_timeout before it
# commits (finish_xact_command), so the check is canceled with pg_cancel_backend, TIMEOUT_MS after
# the COMMIT is seen running; the overshoot is from the cancel to the end of the COMMIT.
out_file=$(mktemp)
PGAPPNAME=simhash_cancel_commit psql -X -q -d "$DB" >"$out_file" 2>&1 <<SQL &
\set VERBOSITY sqlstate
BEGIN;
INSERT INTO loaded SELECT id, fp FROM t WHERE id <= $COMMIT_ROWS;
COMMIT;
SELECT 'ended', pg_catalog.clock_timestamp();
SQL
client=$!
pid=
until [ -n "$pid" ]; do
    sleep 0.05
    pid=$(psql -X -At -d "$DB" -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'simhash_cancel_commit'
                                   AND state = 'active' AND query IN ('COMMIT', 'COMMIT;')")
    kill -0 "$client" 2>/dev/null || break
done
if [ -n "$pid" ]; then
    sleep "$(printf '%d.%03d' $((TIMEOUT_MS / 1000)) $((TIMEOUT_MS % 1000)))"
    canceled_at=$(psql -X -At -d "$DB" -c "SELECT pg_catalog.clock_timestamp() FROM pg_catalog.pg_cancel_backend($pid)")
fi
wait "$client" || true
ended=$(sed -n 's/^ *ended *| *\(.*\)$/\1/p' "$out_file")
name="COMMIT of $COMMIT_ROWS rows under the deferred constraint (pg_cancel_backend)"
if [ -n "$pid" ] && grep -q '57014' "$out_file"; then
    past=$(psql -X -At -d "$DB" -c "SELECT round(extract(epoch FROM '$ended'::timestamptz - '$canceled_at'::timestamptz) * 1000)")
    printf '| %s | - | %d (after the cancel) | canceled (57014) |\n' "$name" "$past"
else
    printf '| %s | - | - | %s |\n' "$name" "$(grep -m1 ERROR "$out_file" || echo 'finished before the cancel')"
fi
rm -f "$out_file"
psql -X -q -d postgres -c "DROP DATABASE $DB"
