#!/usr/bin/env bash
# The extension on a Citus cluster against one node, on this machine: a coordinator and two
# workers (tests/citus/cluster.sh, on ports CITUS_PORT..+2, default 5700, so that it does not meet
# the test's cluster) and, in the coordinator's database, a plain table with the same rows (one
# node). N uniform fingerprints (default 1,000,000) plus 200 x 11 planted near-duplicates; a
# simhash index on each. Prints one table: lookup p50 (pgbench, one client, client round trip) at
# k = 3, 7, 11 and ORDER BY LIMIT 10; all pairs at k = 3, 7 and 11, end to end (on the cluster found
# by the workers: src/pairs/spread.rs), with what the call
# added to the coordinator backend's peak resident memory (VmHWM after it less VmHWM before it; the
# shared buffers it touched count too).
# The point on a 2-core machine is where the work runs and what the coordinator holds, not speed.
#   usage: bench/citus.sh [N]      (PostgreSQL 15 with Citus installed: ../shared/tools/build-citus)
PG_MAJOR=15
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CITUS_PORT=${CITUS_PORT:-5700}
CITUS_DATA=${CITUS_DATA:-/var/lib/postgresql/simhash-citus-bench}
source "$REPO_ROOT/tests/citus/cluster.sh"
N=${1:-1000000}
RUNS=${RUNS:-500}
citus_installed || die "Citus is not installed in PostgreSQL 15 (../shared/tools/build-citus installs it)"
trap 'citus_stop; rm -rf "$work"' EXIT
CITUS_SERVER_OPTIONS="-c shared_buffers=1GB -c jit=off" citus_cluster simhash_citus_bench
export PGPORT=$CITUS_PORT PGDATABASE=simhash_citus_bench

log "loading $N fingerprints into a plain table (one node) and a distributed one (two workers)"
psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE one (id bigint PRIMARY KEY, fp simhash64 NOT NULL);
INSERT INTO one SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, $N) i;
INSERT INTO one SELECT $N + q.id * 11 + d,
       (q.fp::bigint # (SELECT bit_or(1::bigint << ((q.id * 7 + t * 13) % 64)::int) FROM generate_series(0, d - 1) t))::simhash64
FROM one q, generate_series(1, 11) d WHERE q.id <= 200;
CREATE TABLE docs (id bigint PRIMARY KEY, fp simhash64 NOT NULL);
SELECT create_distributed_table('docs', 'id');
INSERT INTO docs SELECT * FROM one;
CREATE INDEX ON one USING simhash (fp);
CREATE INDEX ON docs USING simhash (fp);
VACUUM ANALYZE one;
VACUUM ANALYZE docs;
SQL
shards=$(psql -At -c "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'docs'::regclass")

declare -A lookup pairs_s pairs_n memory
q="('x' || substr(md5(:j::text), 1, 16))::bit(64)::bigint::simhash64"
for table in one docs; do
    for k in 3 7 11 nearest; do
        if [ "$k" = nearest ]; then sql="SELECT id FROM $table ORDER BY fp <-> $q LIMIT 10;"
        else sql="SELECT count(*) FROM $table WHERE fp <~> $q <= $k;"; fi
        printf '\\set j random(1, %d)\n%s\n' "$N" "$sql" > "$work/q.sql"
        read -r lookup[$table,$k] _ <<<"$(pgbench_latencies q.sql "$RUNS")"
    done
    for k in 3 7 11; do
        t0=$(now)
        out=$(psql -At -v ON_ERROR_STOP=1 <<SQL
SET maintenance_work_mem = '2GB';
SELECT pg_backend_pid() AS pid \gset
\setenv BACKEND_PID :pid
\! grep VmHWM /proc/\$BACKEND_PID/status | awk '{ print \$2 }'
SELECT count(*) FROM simhash_pairs('$table', 'fp', $k);
\! grep VmHWM /proc/\$BACKEND_PID/status | awk '{ print \$2 }'
SQL
)
        pairs_s[$table,$k]=$(elapsed "$t0")
        pairs_n[$table,$k]=$(echo "$out" | sed -n 3p)
        memory[$table,$k]=$(( ($(echo "$out" | sed -n 4p) - $(echo "$out" | sed -n 2p)) / 1024 ))
    done
done

echo
echo "One node against a Citus cluster (a coordinator and two workers, $shards shards), all on this $(nproc)-core machine, PostgreSQL $(psql -At -c "SHOW server_version"), Citus $(psql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"); $N uniform fingerprints + 2,200 planted near-duplicates, a simhash index on each table."
echo
echo "| table | k=3 p50 ms | k=7 p50 ms | k=11 p50 ms | ORDER BY LIMIT 10 p50 ms | pairs k=3: s (pairs), coordinator peak +MB | pairs k=7: s (pairs), coordinator peak +MB | pairs k=11: s (pairs), coordinator peak +MB |"
echo "|---|---|---|---|---|---|---|---|"
for table in one docs; do
    name="one node (plain table)"; [ "$table" = docs ] && name="Citus, 2 workers (distributed table)"
    echo "| $name | ${lookup[$table,3]} | ${lookup[$table,7]} | ${lookup[$table,11]} | ${lookup[$table,nearest]} | ${pairs_s[$table,3]} (${pairs_n[$table,3]}), ${memory[$table,3]} | ${pairs_s[$table,7]} (${pairs_n[$table,7]}), ${memory[$table,7]} | ${pairs_s[$table,11]} (${pairs_n[$table,11]}), ${memory[$table,11]} |"
done
