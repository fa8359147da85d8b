#!/usr/bin/env bash
# Building a simhash index in memory and on disk: N uniform fingerprints (md5, as bench/lookup.sh),
# the table's COPY (from a file on the server) for scale, then CREATE INDEX ... USING simhash under
# each maintenance_work_mem of MWM (default "1GB 256MB 64MB"): the build holds 32 bytes a row in
# memory while they fit and sorts on disk beyond (a NOTICE says so). Each build is timed on the
# server (clock_timestamp around the statement), the index dropped after; one run each.
#   usage: bench/build.sh [N]     (default 10000000; needs scripts/setup.sh; about 2 minutes at 10M)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
set -euo pipefail
N=${1:-10000000}
MWM=${MWM:-1GB 256MB 64MB}
restart_cluster "-c shared_buffers=$(( N / 1000000 * 60 + 256 ))MB -c max_parallel_maintenance_workers=0 -c jit=off"
fresh_database simhash_bench_build
export PGDATABASE=simhash_bench_build
chmod 777 "$work"   # (the server writes the rows' file there)
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

log "writing $N uniform fingerprints to a file"
q <<SQL
COPY (SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
      FROM generate_series(1, $N) i) TO '$work/fps.tsv';
CREATE TABLE fps (id int NOT NULL, fp simhash64 NOT NULL);
SQL
# Seconds a statement takes on the server; its notices go to $work/notices.
timed() {
    q 2>"$work/notices" <<SQL | tail -1
$1
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS t;
$2;
SELECT round(extract(epoch FROM clock_timestamp() - t)::numeric, 1) FROM t0;
SQL
}
copy_s=$(timed "" "COPY fps FROM '$work/fps.tsv'")
q -c "VACUUM ANALYZE fps"
table_mb=$(q -c "SELECT round(pg_table_size('fps') / 1048576.0)")

printf '\nBuilding a simhash index over %s uniform fingerprints (PostgreSQL %s, one run each; table %s MB, its COPY from a server file %s s).\n' \
    "$N" "$(q -c 'SHOW server_version')" "$table_mb" "$copy_s"
echo '| maintenance_work_mem | where the rows are sorted | build s | index MB |'
echo '|---|---|---|---|'
for m in $MWM; do
    s=$(timed "SET maintenance_work_mem = '$m';" "CREATE INDEX fps_fp ON fps USING simhash (fp)")
    where=memory; grep -q "NOTICE" "$work/notices" && where="on disk (temporary files)"
    mb=$(q -c "SELECT round(pg_relation_size('fps_fp') / 1048576.0)")
    q -c "DROP INDEX fps_fp"
    echo "| $m | $where | $s | $mb |"
done
