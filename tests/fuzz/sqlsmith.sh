#!/usr/bin/env bash
# Outside fuzzing with sqlsmith (Debian's package): SQLSMITH_QUERIES (default 5,000) random queries
# from a fixed seed (SQLSMITH_SEED, default 35), built from the catalog's functions, operators and
# types (the extension's among them) over tables that hold every index kind (covering and compact
# segment B-trees, the GIN index, the simhash index) and both near-duplicate triggers (the check at
# each row, with actions skip, error and report with verification, and the deferred check). Each
# query runs as an unprivileged role with a 1 s statement timeout (sqlsmith rolls back what it
# writes). Errors are expected (random queries); a crash is not: the test fails if the server log
# written since the run started reports a server process terminated by a signal or a restart, or if
# the server no longer answers (with the same postmaster) afterwards.
#   usage: tests/fuzz/sqlsmith.sh   (PG_MAJOR=15|18; the scripts/common.sh cluster; about a minute)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
queries=${SQLSMITH_QUERIES:-5000}
seed=${SQLSMITH_SEED:-35}
db=simhash_fuzz
role=simhash_fuzzer
command -v sqlsmith >/dev/null || die "sqlsmith is not installed (apt-get install sqlsmith)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
start_cluster
fresh_database "$db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
q <<SQL >/dev/null
DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE $role LOGIN; END IF;
END \$\$;
ALTER ROLE $role SET statement_timeout = '1s';
ALTER ROLE $role SET lock_timeout = '1s';
GRANT CREATE ON SCHEMA public TO $role;
SET client_min_messages = error;
SET ROLE $role;
-- Fingerprints with near-duplicates (variants of 300 seeds, about 8 bits from each), unrelated ones,
-- and NULLs; bodies with repeated words for the text functions.
CREATE TABLE fuzz_rows AS
SELECT n AS id,
       CASE WHEN n % 40 = 0 THEN NULL
            WHEN n % 3 = 0 THEN ('x' || md5('row' || n))::bit(64)::bigint::simhash64
            ELSE (('x' || md5('seed' || n % 300))::bit(64)::bigint # (hashint8extended(n, 1) & hashint8extended(n, 2) & hashint8extended(n, 3)))::simhash64 END AS fp,
       'document ' || n % 300 || ' about ' || md5((n % 300)::text) || ' and topic ' || n % 7 AS body
FROM generate_series(1, 3000) n;
CREATE TABLE fuzz_btree (id bigint PRIMARY KEY, fp simhash64, body text);
CREATE TABLE fuzz_compact (id bigint PRIMARY KEY, fp simhash64, body text);
CREATE TABLE fuzz_gin (id bigint PRIMARY KEY, fp simhash64, body text);
CREATE TABLE fuzz_simhash (id bigint PRIMARY KEY, fp simhash64, body text);
INSERT INTO fuzz_btree SELECT * FROM fuzz_rows;
INSERT INTO fuzz_compact SELECT * FROM fuzz_rows;
INSERT INTO fuzz_gin SELECT * FROM fuzz_rows;
INSERT INTO fuzz_simhash SELECT * FROM fuzz_rows;
SELECT count(*) FROM simhash_create_indexes('fuzz_btree', 'fp', 'btree');
SELECT count(*) FROM simhash_create_indexes('fuzz_compact', 'fp', 'btree_compact');
SELECT count(*) FROM simhash_create_indexes('fuzz_gin', 'fp', 'gin');
SELECT count(*) FROM simhash_create_indexes('fuzz_simhash', 'fp', 'simhash');
-- The near-duplicate constraint: at each row (skip, error, report with verification) and at commit.
CREATE TABLE fuzz_dedup_skip (id bigint PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
CREATE TABLE fuzz_dedup_error (id bigint PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
CREATE TABLE fuzz_dedup_report (id bigint PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
CREATE TABLE fuzz_dedup_deferred (id bigint PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
SELECT count(*) FROM simhash_create_indexes('fuzz_dedup_skip', 'fp', 'btree');
SELECT count(*) FROM simhash_create_indexes('fuzz_dedup_error', 'fp', 'simhash');
SELECT count(*) FROM simhash_create_indexes('fuzz_dedup_report', 'fp', 'gin');
SELECT count(*) FROM simhash_create_indexes('fuzz_dedup_deferred', 'fp', 'simhash');
SELECT simhash_add_dedup('fuzz_dedup_skip', 'fp', 3, 'skip');
SELECT simhash_add_dedup('fuzz_dedup_error', 'fp', 3, 'error');
SELECT simhash_add_dedup('fuzz_dedup_report', 'fp', 5, 'report', verify => 'body');
SELECT simhash_add_dedup('fuzz_dedup_deferred', 'fp', 3, 'skip', deferred => true);
INSERT INTO fuzz_dedup_skip SELECT * FROM fuzz_rows WHERE fp IS NOT NULL;
INSERT INTO fuzz_dedup_report SELECT * FROM fuzz_rows WHERE fp IS NOT NULL;
INSERT INTO fuzz_dedup_deferred SELECT * FROM fuzz_rows WHERE fp IS NOT NULL;
INSERT INTO fuzz_dedup_error SELECT * FROM fuzz_dedup_skip;
RESET ROLE;
ANALYZE;
SQL
counts=$(q -At -c "SELECT string_agg(c.relname || ' ' || (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid) || ' indexes', ', ' ORDER BY c.relname)
                   FROM pg_class c WHERE c.relname LIKE 'fuzz\_%' AND c.relkind = 'r'")
log "sqlsmith: $queries random queries (seed $seed) against PostgreSQL $PG_MAJOR, as $role ($counts)"
postmaster=$(head -1 "$SIMHASH_PGDATA/postmaster.pid")
log_offset=$(stat -c %s "$SIMHASH_PGDATA/server.log")
started=$SECONDS
status=0
sqlsmith --target="host=$PGHOST port=$PGPORT dbname=$db user=$role application_name=sqlsmith" \
    --seed="$seed" --max-queries="$queries" --exclude-catalog --verbose >"$work/sqlsmith.out" 2>"$work/sqlsmith.err" \
    || status=$?
elapsed=$((SECONDS - started))
tail -c +$((log_offset + 1)) "$SIMHASH_PGDATA/server.log" >"$work/server.log"
# sqlsmith's closing report: queries sent, the share that raised an error, the commonest errors.
report=$(awk '/^queries:/ {n = NR} END {print n + 0}' "$work/sqlsmith.err")
if [ "$report" -gt 0 ]; then
    tail -n +"$report" "$work/sqlsmith.err" | grep -E '^(queries|error rate):' || true
    tail -n +"$report" "$work/sqlsmith.err" | grep -P '^\d+\t' | head -n 8 | cut -c1-160 || true
fi
crashes=$(grep -E "terminated by signal|was terminated by exception|all server processes terminated; reinitializing|database system was interrupted|PANIC:" "$work/server.log" || true)
if [ -n "$crashes" ]; then
    echo "$crashes" >&2
    grep -A2 "terminated by signal" "$work/server.log" | grep "Failed process was running" >&2 || true
    die "sqlsmith crashed PostgreSQL $PG_MAJOR (server.log since the run started, above; seed $seed)"
fi
[ "$(psql -X -At -d "$db" -c "SELECT pg_backend_pid() > 0")" = t ] || die "the server does not answer after sqlsmith"
[ "$(head -1 "$SIMHASH_PGDATA/postmaster.pid")" = "$postmaster" ] || die "the postmaster changed during the sqlsmith run"
# The extension still works in a new session: a lookup through the simhash index and a fingerprint.
psql -X -q -At -d "$db" -c "SET enable_seqscan = off" \
    -c "SELECT count(*) >= 0 FROM fuzz_simhash WHERE fp <~> simhash('document 1') <= 5" >/dev/null \
    || die "the extension fails after the sqlsmith run"
# sqlsmith exits 0 when it reached --max-queries, 1 when it lost its connection or failed to start.
[ "$status" -eq 0 ] || { tail -n 20 "$work/sqlsmith.err" >&2; die "sqlsmith ended with status $status"; }
log "sqlsmith: $queries queries in $elapsed s on PostgreSQL $PG_MAJOR, no crash"
