#!/usr/bin/env bash
# Memory and time of the near-duplicate constraint for one big transaction: a table with a
# `simhash` index (made empty) and simhash_add_dedup(tbl, col, K, 'skip'[, deferred => true]),
# loaded by one INSERT ... SELECT of ROWS uniform random values in one transaction, then COMMIT.
# Prints, per configuration, the backend's peak resident memory (VmHWM of /proc/<pid>/status, the
# backend of pg_backend_pid(), read by psql's \! on this machine) before the load, at the end of
# the load and after COMMIT, and the times of the load and of the COMMIT.
#   usage: bench/dedup_memory.sh [ROWS]    (default 1000000; CONFIGS, default
#          "simhash64:deferred bit256:deferred simhash64:immediate bit256:immediate")
# Values: simhash64 from md5 (k = 3), bit(256) from two md5s (k = 16): uniform, so no row is a
# near-duplicate and every row is remembered. The check at each row of bit(256) codes reads the
# rows loaded since the index's build from the backend's copy of the index's tail: that session
# raises simhash.index_tail_memory to 512MB (else each lookup reads the tail whole), and the copy
# counts in its peak (about 140 bytes a row).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ROWS=${1:-1000000}
CONFIGS=${CONFIGS:-simhash64:deferred bit256:deferred simhash64:immediate bit256:immediate}
start_cluster
db=simhash_bench_dedup_memory
fresh_database "$db"
echo "$(server_settings); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for config in $CONFIGS; do
    kind=${config%%:*} mode=${config##*:}
    case $kind in
        simhash64) type=simhash64 k=3 value="('x' || md5(i::text))::bit(64)::bigint::simhash64" ;;
        bit256) type='bit(256)' k=16 value="('x' || md5(i::text) || md5((-i)::text))::bit(256)" ;;
        *) die "unknown kind $kind" ;;
    esac
    deferred=false tail=""
    [ "$mode" = deferred ] && deferred=true
    [ "$mode:$kind" = immediate:bit256 ] && tail="SET simhash.index_tail_memory = '512MB';"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS t;
CREATE TABLE t (id int, code $type);
CREATE INDEX ON t USING simhash (code);
SELECT simhash_add_dedup('t', 'code', $k, 'skip', deferred => $deferred) \\g /dev/null
SQL
    psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" <<SQL
$tail
SELECT pg_backend_pid() AS pid \\gset
\\set start \`grep VmHWM /proc/:pid/status | awk '{print \$2}'\`
BEGIN;
SELECT extract(epoch FROM clock_timestamp()) AS t0 \\gset
INSERT INTO t SELECT i, $value FROM generate_series(1, $ROWS) i;
SELECT extract(epoch FROM clock_timestamp()) AS t1 \\gset
\\set loaded \`grep VmHWM /proc/:pid/status | awk '{print \$2}'\`
COMMIT;
SELECT extract(epoch FROM clock_timestamp()) AS t2 \\gset
\\set committed \`grep VmHWM /proc/:pid/status | awk '{print \$2}'\`
SELECT format('%s %s, %s rows: VmHWM %s MB before, %s MB after the load, %s MB after COMMIT; load %s s, COMMIT %s s; %s rows kept',
              '$kind', '$mode', $ROWS, round(:start / 1024.0), round(:loaded / 1024.0), round(:committed / 1024.0),
              round((:t1 - :t0)::numeric, 1), round((:t2 - :t1)::numeric, 1), (SELECT count(*) FROM t));
SQL
done
