#!/usr/bin/env bash
# Memory refused to a backend in the middle of a statement over a big table, the near-duplicate
# constraint's check at commit through a simhash index and radius scans: the statement ends with
# ERROR 53200 (out_of_memory) or takes a path that needs less memory, never the abort of a failed
# Rust allocation, which would make the postmaster restart every backend of the cluster.
#
# Two tables of 2,000,000 rows with one value (a bit(64) code; a simhash64 fingerprint), each with
# its simhash index and the deferred constraint (radius 2). Before each statement, the backend's
# address space is limited (prlimit --as, run as the postgres user: lowering one's own limit needs
# no privilege) to its size plus a few megabytes, with work_mem = 1GB (so that work_mem is not what
# bounds them). One more row with that value is committed: its check looks up the 2,000,000 rows
# within 2 through the index (codes: `index::codes::scan::rows_within`, the segments probed, else,
# memory refused, the code store read whole; then the TIDs); and radius scans count them. In each
# case the same backend answers a query afterwards, and the server log written meanwhile shows no
# backend terminated by a signal (no restart of the cluster).
#
# The same for the near-duplicate search in memory (`simhash_pairs` / `simhash_clusters` of a query
# or of a table without a simhash index; of a bit(n) column, the self-join through its index): its
# rows, their groups and its table of fingerprints, and the pairs or groups of codes, ERROR 53200.
# On a third table of 1,000,000 distinct simhash64 fingerprints (radius 0: no pair) and a fourth of
# 400,000 bit(64) codes in 200,000 pairs of copies; pairs through the index of a simhash64 column
# and the verified forms (with texts) on two tables of 200,000 rows. And a build of an index of
# codes whose second thread the system refuses (a limit of processes), and builds of one under
# limits around what it needs. About 90 s.
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
CREATE TABLE s (id bigserial PRIMARY KEY, fp simhash64);
INSERT INTO s (fp) SELECT '00000000000000ff'::simhash64 FROM generate_series(1, 2000000);
CREATE INDEX s_fp ON s USING simhash (fp);
SELECT simhash_add_dedup('s', 'fp', 2, 'error', deferred => true) IS NOT NULL AS attached;
CREATE TABLE u (id bigserial PRIMARY KEY, fp simhash64);
INSERT INTO u (fp) SELECT lpad(to_hex(g * 2654435761), 16, '0')::simhash64 FROM generate_series(1, 1000000) g;
CREATE TABLE c (id bigserial PRIMARY KEY, code bit(64));
INSERT INTO c (code) SELECT ('x' || left(md5((g / 2)::text), 16))::bit(64) FROM generate_series(1, 400000) g;
CREATE INDEX c_code ON c USING simhash (code);
CREATE TABLE w (id bigserial PRIMARY KEY, fp simhash64, body text);
INSERT INTO w (fp, body) SELECT lpad(to_hex((g / 2) * 2654435761), 16, '0')::simhash64, 'text of row ' || (g / 2)
FROM generate_series(1, 200000) g;
CREATE INDEX w_fp ON w USING simhash (fp);
CREATE TABLE v (id bigserial PRIMARY KEY, code bit(64), body text);
INSERT INTO v (code, body) SELECT ('x' || left(md5((g / 2)::text), 16))::bit(64), 'text of row ' || (g / 2)
FROM generate_series(1, 200000) g;
CREATE INDEX v_code ON v USING simhash (code);
CREATE TABLE b (id bigserial PRIMARY KEY, code bit(1024));
INSERT INTO b (code) SELECT ('x' || repeat(md5(g::text), 8))::bit(1024) FROM generate_series(1, 200000) g;
ANALYZE t, s, u, c, w, v, b;
SQL
log_offset=$(stat -c %s "$SIMHASH_PGDATA/server.log")
failures=0
# run EXTRA_MB EXPECTED SQL: SQL run in a backend whose address space is limited to its size plus
# EXTRA_MB megabytes; EXPECTED: a pattern of its output (the errors as "ERROR:  SQLSTATE: ...").
run() {
    local out
    out=$(psql -X -d "$db" -v extra_mb="$1" 2>&1 <<SQL
\\set VERBOSITY verbose
-- (the library loaded before the limit, and the tables' pages read once)
LOAD '\$libdir/simhash';
SELECT count(*) >= 2000000 AS read FROM t;
SELECT count(*) >= 2000000 AS read FROM s;
SELECT count(*) >= 1000000 AS read FROM u;
SELECT count(*) >= 400000 AS read FROM c;
SELECT count(*) >= 200000 AS read FROM w;
SELECT count(*) >= 200000 AS read FROM v;
SET work_mem = '1GB';
SET enable_seqscan = off;
-- (no JIT: PostgreSQL 15 from Debian would load LLVM, which the limit refuses, for these costs)
SET jit = off;
SELECT pg_backend_pid() AS pid \\gset
\\setenv PID :pid
\\setenv EXTRA_MB :extra_mb
\\! v=\$(awk '/VmSize/ {print \$2}' /proc/\$PID/status) && runuser -u postgres -- prlimit --pid "\$PID" --as=\$(( (v + EXTRA_MB * 1024) * 1024 ))
$3
SELECT 'backend ' || 'alive' AS after;
SQL
    ) || true
    if grep -q -- "$2" <<<"$out" && grep -q "backend alive" <<<"$out"; then
        echo "ok: $1 MB more: $2"
    else
        echo "FAILED: $1 MB more: expected $2 and the backend alive, got:" >&2
        echo "$out" >&2
        failures=$((failures + 1))
    fi
}
commit_row() {
    echo "BEGIN; INSERT INTO $1 VALUES (DEFAULT, $2); COMMIT;"
}
index_out_of_memory="ERROR:  53200: out of memory for .* more entries of a simhash index"
# The check at commit, codes: 8 MB: the rows found by the pass over the code store (after the
# probe of the segments was refused) do not fit; 26 MB: they do (16 MB), but not their TIDs beside
# them (12 MB more); 60 MB: everything fits, and the row is a near-duplicate.
run 8 "$index_out_of_memory" "$(commit_row t "X'00000000000000ff'::bit(64)")"
run 26 "$index_out_of_memory" "$(commit_row t "X'00000000000000ff'::bit(64)")"
run 60 "ERROR:  23505: .*is a near-duplicate" "$(commit_row t "X'00000000000000ff'::bit(64)")"
# simhash64 (the matches within work_mem, here 1 GB; all the rows' values looked up at once): 8 MB:
# the matches do not fit; 40 MB: they do (32 MB), but not the TIDs fetched beside them (seen:
# "out of memory for the 2000001 rows of relation "s" that the near-duplicate check at commit
# fetches"); 80 MB: everything fits.
run 8 "$index_out_of_memory" "$(commit_row s "'00000000000000ff'::simhash64")"
run 40 "ERROR:  53200: out of memory for " "$(commit_row s "'00000000000000ff'::simhash64")"
run 80 "ERROR:  23505: .*is a near-duplicate" "$(commit_row s "'00000000000000ff'::simhash64")"
# A radius scan of codes whose matches are refused memory (an index scan: bitmap scans off) reads
# in passes, each keeping what it was granted, and a bitmap scan streams them: every row all the
# same.
run 8 "^ 2000000$" "SET enable_bitmapscan = off; SELECT count(*) FROM t WHERE simhash_hamming(code, X'00000000000000fe'::bit(64)) <= 2;"
run 8 "^ 2000000$" "SET enable_indexscan = off; SELECT count(*) FROM t WHERE simhash_hamming(code, X'00000000000000fe'::bit(64)) <= 2;"
# simhash64: the bitmap scan streams; the index scan's passes find no memory either: 53200.
run 8 "^ 2000000$" "SET enable_indexscan = off; SELECT count(*) FROM s WHERE fp <~> '00000000000000fe' <= 2;"
run 8 "ERROR:  53200: out of memory for the rows of an ordered simhash index scan" "SELECT count(*) FROM s WHERE fp <~> '00000000000000fe' <= 2;"
# The near-duplicate search in memory, 1,000,000 distinct fingerprints (48 MB fit): 8 MB: its rows
# do not fit as they are read; 30 MB: they do (16 MB), but not their groups by fingerprint; 44 MB:
# those too, but not the table of (key, row) pairs (16 MB) it sorts.
pairs_out_of_memory="ERROR:  53200: out of memory for the"
run 8 "$pairs_out_of_memory rows of a near-duplicate search (" "SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM u', 0);"
run 30 "$pairs_out_of_memory 1000000 rows of a near-duplicate search" "SELECT count(*) FROM simhash_clusters('SELECT id, fp FROM u', 0);"
run 44 "$pairs_out_of_memory table of the 1000000 distinct fingerprints" "SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM u', 0);"
# (the forms that name a table without a simhash index search the same way)
run 8 "$pairs_out_of_memory rows of a near-duplicate search (" "SELECT count(*) FROM simhash_clusters('u', 'fp', 0);"
# Codes, the self-join through the index: 16 MB: the groups of the rows in pairs do not fit (seen:
# "out of memory for the groups of the ... rows in near-duplicate pairs"); the 200,000 pairs (4.8
# MB, within maintenance_work_mem) do not either (seen: "out of memory for more than 131072
# near-duplicate pairs"). With a few MB more or less, PostgreSQL's own 53200 may come first as the
# join reads its rows: any 53200 passes; 64 MB: everything fits.
run 16 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_clusters('c', 'code', 0);"
run 16 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_pairs('c', 'code', 0);"
run 64 "^ 199999$" "SELECT count(*) FROM simhash_pairs('c', 'code', 0);"
# Pairs through a simhash index of simhash64 fingerprints (its buckets' entries, then the groups
# and pairs), and the verified forms (the candidate pairs, their ids, the texts), on 200,000 rows
# in 100,000 pairs of copies with equal texts. The message depends on what runs out first (seen
# at 4 MB: "out of memory for 131072 more entries of a simhash index", "out of memory for the
# candidate pairs of a verified near-duplicate search"; at 12 MB: "out of memory for the 57344
# rows in near-duplicate pairs"; PostgreSQL's own as the texts are read): any 53200 passes.
run 4 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_pairs('w', 'fp', 0);"
run 12 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_pairs('w', 'fp', 0);"
run 48 "^ 99999$" "SELECT count(*) FROM simhash_pairs('w', 'fp', 0);"
run 4 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_clusters('v', 'code', 0, 'body', 0.5);"
run 16 "ERROR:  53200: out of memory" "SELECT count(*) FROM simhash_pairs('w', 'fp', 0, 'body', 0.5);"
run 64 "^ 99999$" "SELECT count(*) FROM simhash_pairs('v', 'code', 0, 'body', 0.5);"
# A thread the system refuses (here the limit of the postgres user's processes, below what it
# runs): the build of an index of codes that would make its segments' entries on a second thread
# builds on its own one instead (DEBUG1 says so), and the index is sound.
out=$(psql -X -d "$db" 2>&1 <<'SQL'
\set VERBOSITY terse
LOAD '$libdir/simhash';
SELECT pg_backend_pid() AS pid \gset
\setenv PID :pid
\! runuser -u postgres -- prlimit --pid "$PID" --nproc=1
SET client_min_messages = debug1;
CREATE INDEX v_code_all ON v USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
SELECT simhash_index_check('v_code_all') AS indexed;
SQL
) || true
if grep -q "200000 codes, .* built in memory on one thread (the system refused a second one)" <<<"$out" &&
    grep -q "^ *200000$" <<<"$out"; then
    echo "ok: a thread refused: the build on one thread"
else
    echo "FAILED: a thread refused: expected a build on one thread and a sound index, got:" >&2
    echo "$out" >&2
    failures=$((failures + 1))
fi
# The build of an index of codes (200,000 of 1,024 bits, every segment indexed: about 50 MB in
# memory) under limits around what it needs, a MB apart: each build ends with 53200 or builds
# (on a second thread, or on one when the system refuses the thread's stack). Between the two,
# memory for a segment's directory and counts (256 kB) was refused on the second thread, and the
# backend aborted (seen at 52 MB on PostgreSQL 15).
for mb in $(seq 44 60); do
    out=$(psql -X -d "$db" -v extra_mb="$mb" 2>&1 <<'SQL'
\set VERBOSITY verbose
LOAD '$libdir/simhash';
SELECT count(*) FROM b;
SET maintenance_work_mem = '1GB';
SET client_min_messages = debug1;
SELECT pg_backend_pid() AS pid \gset
\setenv PID :pid
\setenv EXTRA_MB :extra_mb
\! v=$(awk '/VmSize/ {print $2}' /proc/$PID/status) && runuser -u postgres -- prlimit --pid "$PID" --as=$(( (v + EXTRA_MB * 1024) * 1024 ))
CREATE INDEX b_code ON b USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
DROP INDEX IF EXISTS b_code;
SELECT 'backend ' || 'alive' AS after;
SQL
    ) || true
    if grep -q "ERROR:  53200\|simhash index \"b_code\": 200000 codes" <<<"$out" && grep -q "backend alive" <<<"$out"; then
        echo "ok: a build with $mb MB more: $(grep -o "ERROR:  53200: [^(]*\|built [a-z ',]*" <<<"$out" | head -1)"
    else
        echo "FAILED: a build with $mb MB more: expected 53200 or the index, and the backend alive, got:" >&2
        echo "$out" >&2
        failures=$((failures + 1))
    fi
done
if tail -c +"$((log_offset + 1))" "$SIMHASH_PGDATA/server.log" | grep -E "terminated by signal|was terminated|all server processes terminated"; then
    echo "FAILED: a backend was terminated (the cluster restarted)" >&2
    failures=$((failures + 1))
fi
psql -X -q -d postgres -c "DROP DATABASE $db"
[ "$failures" = 0 ] || die "$failures checks failed"
echo "out of memory in a backend: all checks passed"
