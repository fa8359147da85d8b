#!/usr/bin/env bash
# Memory refused to the near-duplicate constraint's check at commit through a simhash index of
# codes: the statement ends with ERROR 53200 (out_of_memory), never the abort of a failed Rust
# allocation, which would make the postmaster restart every backend of the cluster.
#
# A table of 2,000,000 rows with one bit(64) code, its simhash index, and the deferred constraint
# (radius 2); one more row with that code is inserted, and its check at commit looks up the
# 2,000,000 rows within 2 through the index (`index::codes::scan::rows_within`: the segments probed,
# else, when memory for that is refused, the code store read whole; then the TIDs). Before the
# COMMIT, the backend's address space is limited (prlimit --as, run as the postgres user: lowering
# one's own limit needs no privilege) to its size plus a few megabytes:
#   8 MB  -> the rows found by the pass over the code store do not fit: 53200;
#   26 MB -> they fit (16 MB), but not their TIDs beside them (12 MB more): 53200;
#   60 MB -> all fits: the row is a near-duplicate, 23505.
# In each case the same backend answers a query after the error, and the server log written
# meanwhile shows no backend terminated by a signal (no restart of the cluster).
#   usage: tests/crash/recheck_out_of_memory.sh     (PG_MAJOR=15|18; the scripts/common.sh cluster)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
db=simhash_oom
command -v prlimit >/dev/null || die "prlimit (util-linux) is needed"
start_cluster
fresh_database "$db"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" <<'SQL'
CREATE TABLE t (id bigserial PRIMARY KEY, code bit(64));
INSERT INTO t (code) SELECT X'00000000000000ff'::bit(64) FROM generate_series(1, 2000000);
CREATE INDEX t_code ON t USING simhash (code);
SELECT simhash_add_dedup('t', 'code', 2, 'error', deferred => true) IS NOT NULL AS attached;
SQL
log_offset=$(stat -c %s "$SIMHASH_PGDATA/server.log")
failures=0
# run EXTRA_MB EXPECTED_SQLSTATE EXPECTED_TEXT
run() {
    local out
    out=$(psql -X -d "$db" -v extra_mb="$1" 2>&1 <<'SQL'
\set VERBOSITY verbose
-- (the library loaded before the limit, and the table's pages read once)
LOAD '$libdir/simhash';
SELECT count(*) >= 2000000 AS read FROM t;
SELECT pg_backend_pid() AS pid \gset
\setenv PID :pid
\setenv EXTRA_MB :extra_mb
\! v=$(awk '/VmSize/ {print $2}' /proc/$PID/status) && runuser -u postgres -- prlimit --pid "$PID" --as=$(( (v + EXTRA_MB * 1024) * 1024 ))
BEGIN;
INSERT INTO t (code) VALUES (X'00000000000000ff'::bit(64));
COMMIT;
SELECT 'backend ' || 'alive' AS after;
SQL
    ) || true
    if grep -q "ERROR:  $2: .*$3" <<<"$out" && grep -q "backend alive" <<<"$out"; then
        echo "ok: $1 MB more: $2"
    else
        echo "FAILED: $1 MB more: expected $2 ($3) and the backend alive, got:" >&2
        echo "$out" >&2
        failures=$((failures + 1))
    fi
}
run 8 53200 "out of memory for .* more entries of a simhash index"
run 26 53200 "out of memory for .* more entries of a simhash index"
run 60 23505 "is a near-duplicate"
if tail -c +"$((log_offset + 1))" "$SIMHASH_PGDATA/server.log" | grep -E "terminated by signal|was terminated|all server processes terminated"; then
    echo "FAILED: a backend was terminated (the cluster restarted)" >&2
    failures=$((failures + 1))
fi
psql -X -q -d postgres -c "DROP DATABASE $db"
[ "$failures" = 0 ] || die "$failures checks failed"
echo "recheck out of memory: all checks passed"
