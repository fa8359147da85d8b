#!/usr/bin/env bash
# Codes of any length (bit(n)) through the simhash index, beside the sequential scan and pgvector's
# HNSW index on the same codes, every route in one run.
#   usage: bench/codes.sh planted [N]          N uniform 256-bit codes (default 10000000) with
#                                              planted near-duplicates (PDQ-sized)
#          bench/codes.sh clustered BITS [N]   N codes of BITS bits (default 1000000) from
#                                              simhash_bits() of clustered vectors
#   (PG_MAJOR=18, whose wheel ships pgvector; HNSW=0 leaves pgvector out, as the planted run does
#    by default: its graph of 10M codes takes hours to build on 2 cores)
# Data:
#   planted:   code i = two md5s of i (256 uniform bits); QUERIES rows each get copies at distances
#              1, 2, 4, 8, 16, 24 and 32 (bits (j * 7 + t * 13) mod 256 flipped, t < d).
#              Query points "near": those rows; "fresh": random codes not in the table (their
#              nearest rows are about 87 bits away: every exact method reads every code).
#   clustered: CENTERS (1000) centres with DIM (64) coordinates uniform in [-1, 1]; each row a
#              centre plus uniform noise of width SPREAD (0.2) per coordinate; code =
#              simhash_bits(v, BITS). Query points "fresh": QUERIES new vectors drawn the same way.
# Routes: a primary-key lookup (the yardstick of the issue's targets); radius tests
# `simhash_hamming(code, q) <= k` at each k of RADII through the simhash index and through a
# sequential scan; nearest `ORDER BY simhash_hamming(code, q) LIMIT 1` and `LIMIT 10` through the
# index and through a sequential scan and sort; with HNSW=1, pgvector's `ORDER BY code <~> q LIMIT
# 10` through HNSW (bit_hamming_ops, defaults, ef_search 40) with recall@10 (a returned row counts
# when its distance is at most the true 10th distance). Latency: pgbench, one client, p50 over
# FAST_RUNS (500) lookups per indexed route, SLOW_RUNS (10) per scan, query points at random.
# Build: CREATE INDEX ... USING simhash (code) against the COPY of the same rows into the table
# (with its primary key), each build after a CHECKPOINT (the default index's second build, when
# there is one, timed too); sizes of table and index. MORE_SEGMENTS (clustered codes of more than 320
# bits: "16"; else none): after the default index's routes (every segment indexed), the index is
# built again WITH (segments = s) for each s listed ("all": every segment of the code) and its
# radius and nearest routes timed again, in the same run; then the default index is built again
# for pgvector's routes beside it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
chmod 777 "$work"   # (the server writes the codes' file there)
MODE=${1:-planted}
case $MODE in
    planted) BITS=256; N=${2:-10000000}; HNSW=${HNSW:-0}; RADII=${RADII:-"8 16 32"}; KINDS="near fresh";;
    clustered) BITS=${2:-1024}; N=${3:-1000000}; HNSW=${HNSW:-1}; KINDS="fresh"
        RADII=${RADII:-"$((BITS / 20)) $((BITS / 10))"}
        if (( BITS > 320 )); then MORE_SEGMENTS=${MORE_SEGMENTS-16}; fi;;
    *) die "usage: bench/codes.sh planted [N] | clustered BITS [N]";;
esac
QUERIES=${QUERIES:-100}
FAST_RUNS=${FAST_RUNS:-500}
SLOW_RUNS=${SLOW_RUNS:-10}
CENTERS=${CENTERS:-1000}; DIM=${DIM:-64}; SPREAD=${SPREAD:-0.2}
HNSW_MEMORY=${HNSW_MEMORY:-2GB}; HNSW_WORKERS=${HNSW_WORKERS:-1}

start_cluster
SB_MB=$(( N * (BITS / 8 + 60) * 3 / 1048576 + 512 ))
restart_cluster "-c shared_buffers=${SB_MB}MB -c max_parallel_workers_per_gather=2 -c jit=off -c maintenance_work_mem=1GB ${SERVER_OPTIONS:-}"
fresh_database simhash_bench_codes
export PGDATABASE=simhash_bench_codes
psql -q -c "CREATE EXTENSION pg_prewarm"   # (simhash: fresh_database)
if [[ $HNSW == 1 ]]; then
    [[ -n $(psql -At -c "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'") ]] \
        || die "pgvector is not installed in PostgreSQL $PG_MAJOR; HNSW=0 leaves it out"
    psql -q -c "CREATE EXTENSION vector"
fi

log "generating $N codes of $BITS bits ($MODE) into a file"
t0=$(now)
if [[ $MODE == planted ]]; then
    psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE UNLOGGED TABLE gen AS
SELECT i AS id, ('x' || md5(i::text) || md5((-i)::text))::bit(256) AS code FROM generate_series(1, $N) i;
-- The mask of t < d bits (j * 7 + t * 13) mod 256, for near query point j.
CREATE FUNCTION pg_temp.mask(j int, d int) RETURNS bit(256) LANGUAGE sql IMMUTABLE AS \$\$
    SELECT string_agg(CASE WHEN p IN (SELECT (j * 7 + t * 13) % 256 FROM generate_series(0, d - 1) t)
                      THEN '1' ELSE '0' END, '' ORDER BY p)::bit(256) FROM generate_series(0, 255) p \$\$;
INSERT INTO gen SELECT $N + j * 7 + n, g.code # pg_temp.mask(j, d)
FROM generate_series(1, $QUERIES) j JOIN gen g ON g.id = j,
     unnest(ARRAY[1, 2, 4, 8, 16, 24, 32]) WITH ORDINALITY AS x(d, n);
CREATE TABLE queries (kind text, j int, code bit(256), PRIMARY KEY (kind, j));
INSERT INTO queries SELECT 'near', id, code FROM gen WHERE id <= $QUERIES;
INSERT INTO queries SELECT 'fresh', j, ('x' || md5('q' || j) || md5('r' || j))::bit(256) FROM generate_series(1, $QUERIES) j;
COPY gen TO '$work/codes.copy';
SQL
else
    psql -q -v ON_ERROR_STOP=1 <<SQL
SELECT setseed(0.37);
CREATE TEMP TABLE centers AS
SELECT c, array_agg((2 * random() - 1)::real ORDER BY d) AS v FROM generate_series(1, $CENTERS) c, generate_series(1, $DIM) d GROUP BY c;
CREATE UNLOGGED TABLE gen AS
SELECT i AS id, simhash_bits(v, $BITS) AS code FROM (
    SELECT i, (SELECT array_agg(x + ($SPREAD * (random() - 0.5))::real) FROM unnest(ce.v) x) AS v
    FROM generate_series(1, $N) i JOIN centers ce ON ce.c = 1 + i % $CENTERS) s;
CREATE TABLE queries (kind text, j int, code bit($BITS), PRIMARY KEY (kind, j));
INSERT INTO queries SELECT 'fresh', j, simhash_bits(v, $BITS) FROM (
    SELECT j, (SELECT array_agg(x + ($SPREAD * (random() - 0.5))::real) FROM unnest(ce.v) x) AS v
    FROM generate_series(1, $QUERIES) j JOIN centers ce ON ce.c = 1 + (j * 7919) % $CENTERS) s;
COPY gen TO '$work/codes.copy';
SQL
fi
log "generated in $(elapsed "$t0") s"
psql -q -c "DROP TABLE gen"

log "COPY into the table (with its primary key)"
psql -q -c "CREATE TABLE codes (id int PRIMARY KEY, code bit($BITS) NOT NULL)"
t0=$(now)
psql -q -c "COPY codes FROM '$work/codes.copy'"
copy_s=$(elapsed "$t0")
rm -f "$work/codes.copy"
psql -q -c "VACUUM ANALYZE codes, queries"
rows=$(psql -At -c "SELECT count(*) FROM codes")

log "simhash index build"
psql -q -c "CHECKPOINT"   # (before each timed build: none pays for the WAL of what came before)
t0=$(now)
psql -q -c "CREATE INDEX codes_simhash ON codes USING simhash (code)"
build_s=$(elapsed "$t0")
table_mb=$(psql -At -c "SELECT round(pg_table_size('codes') / 1048576.0)")
index_mb=$(psql -At -c "SELECT round(pg_relation_size('codes_simhash') / 1048576.0)")
pkey_mb=$(psql -At -c "SELECT round(pg_relation_size('codes_pkey') / 1048576.0)")
psql -q -c "ANALYZE codes"; prewarm codes

log "the exact answers: the 10 nearest distances of every query point (sequential scans)"
t0=$(now)
PGOPTIONS="-c enable_indexscan=off -c enable_bitmapscan=off" psql -q -v ON_ERROR_STOP=1 -c "CREATE TABLE truth AS SELECT q.kind, q.j,
    ARRAY(SELECT simhash_hamming(c.code, q.code)::int FROM codes c ORDER BY 1 LIMIT 10) AS d,
    (SELECT array_agg(n ORDER BY k) FROM (SELECT k, (SELECT count(*) FROM codes c WHERE bit_count(c.code # q.code) <= k) AS n
                                          FROM unnest('{${RADII// /,}}'::int[]) k) r) AS within
    FROM queries q"
log "exact answers in $(elapsed "$t0") s"

declare -A p50 plan recall
pick="(SELECT code FROM queries WHERE kind = 'KIND' AND j = :j)"
# time_route ROUTE KIND SQL [PGOPTIONS]: p50 of SQL (Q: the query point's code) and its first scan.
time_route() {
    local route=$1 kind=$2 runs=$FAST_RUNS q=${pick//KIND/$2}
    local sql=${3//Q/$q}
    case $route in seq*) runs=$SLOW_RUNS;; esac
    printf '\\set j random(1, %d)\n%s;\n' "$QUERIES" "$sql" > "$work/q.sql"
    read -r p50[$route,$kind] _ <<<"$(PGOPTIONS="${4:-}" pgbench_latencies q.sql "$runs")"
    plan[$route]=$(PGOPTIONS="${4:-}" psql -At -c "EXPLAIN (COSTS OFF) ${sql//:j/1}" | first_scan)
}
# check_recall ROUTE KIND SQL [PGOPTIONS]: SQL (qq.code: the point's code) gives the distances the
# route found; recall@10 against the truth.
check_recall() {
    recall[$1,$2]=$(PGOPTIONS="${4:-}" psql -At -c "
        SELECT round(sum((SELECT count(*) FROM unnest(f.found) x WHERE x <= t.d[10]))::numeric / (10 * count(*)), 3)
        FROM (SELECT qq.j, ($3) AS found FROM queries qq WHERE qq.kind = '$2') f JOIN truth t ON t.kind = '$2' AND t.j = f.j")
}
SEQ="-c enable_indexscan=off -c enable_bitmapscan=off"
# index_routes KIND [SUFFIX]: the simhash index's radius and nearest routes (named ..SUFFIX), their
# recall, and its radius answers checked against the truth.
index_routes() {
    local kind=$1 suffix=${2:-} k n
    for k in $RADII; do
        time_route "index_radius_$k$suffix" "$kind" "SELECT count(*) FROM codes WHERE simhash_hamming(code, Q) <= $k"
    done
    for n in 1 10; do
        time_route "index_nearest_$n$suffix" "$kind" "SELECT id FROM codes ORDER BY simhash_hamming(code, Q) LIMIT $n"
    done
    check_recall "index_nearest_10$suffix" "$kind" "ARRAY(SELECT simhash_hamming(c.code, qq.code)::int FROM codes c ORDER BY simhash_hamming(c.code, qq.code) LIMIT 10)"
    # Radius results through the index equal the truth's counts, for every point and k.
    n=0
    for k in $RADII; do
        n=$((n + 1))
        wrong=$(psql -At -c "SELECT count(*) FROM truth t JOIN queries qq USING (kind, j) WHERE t.kind = '$kind'
                             AND t.within[$n] <> (SELECT count(*) FROM codes c WHERE simhash_hamming(c.code, qq.code) <= $k)")
        [[ $wrong == 0 ]] || die "$wrong radius answers (k = $k) through the index differ from the sequential scan ($kind)"
    done
}
for kind in $KINDS; do
    time_route pkey "$kind" "SELECT code FROM codes WHERE id = :j"
    index_routes "$kind"
    for k in $RADII; do
        time_route "seq_radius_$k" "$kind" "SELECT count(*) FROM codes WHERE simhash_hamming(code, Q) <= $k" "$SEQ"
    done
    for n in 1 10; do
        time_route "seq_nearest_$n" "$kind" "SELECT id FROM codes ORDER BY simhash_hamming(code, Q) LIMIT $n" "$SEQ"
    done
done
declare -A more_build more_mb
for s in ${MORE_SEGMENTS:-}; do
    log "simhash index build WITH (segments = $s)"
    psql -q -c "DROP INDEX codes_simhash"
    psql -q -c "CHECKPOINT"
    t0=$(now)
    psql -q -v ON_ERROR_STOP=1 -c "CREATE INDEX codes_simhash ON codes USING simhash (code) WITH (segments = ${s/all/256})"
    more_build[$s]=$(elapsed "$t0")
    more_mb[$s]=$(psql -At -c "SELECT round(pg_relation_size('codes_simhash') / 1048576.0)")
    psql -q -c "ANALYZE codes"; prewarm codes
    for kind in $KINDS; do index_routes "$kind" "_s$s"; done
done
if [[ -n ${MORE_SEGMENTS:-} ]]; then
    log "simhash index build (the default, again)"
    psql -q -c "DROP INDEX codes_simhash"
    psql -q -c "CHECKPOINT"
    t0=$(now)
    psql -q -v ON_ERROR_STOP=1 -c "CREATE INDEX codes_simhash ON codes USING simhash (code)"
    again_s=$(elapsed "$t0")
    psql -q -c "ANALYZE codes"
fi

if [[ $HNSW == 1 ]]; then
    log "pgvector HNSW (bit_hamming_ops, m = 16, ef_construction = 64), maintenance_work_mem=$HNSW_MEMORY, $HNSW_WORKERS parallel worker(s)"
    psql -q -c "CHECKPOINT"
    t0=$(now)
    PGOPTIONS="-c maintenance_work_mem=$HNSW_MEMORY -c max_parallel_maintenance_workers=$HNSW_WORKERS" \
        psql -q -v ON_ERROR_STOP=1 -c "CREATE INDEX codes_hnsw ON codes USING hnsw (code bit_hamming_ops)"
    hnsw_build_s=$(elapsed "$t0")
    hnsw_mb=$(psql -At -c "SELECT round(pg_relation_size('codes_hnsw') / 1048576.0)")
    psql -q -c "ANALYZE codes"; prewarm codes
    # (simhash.enable_rewrite off: else the planner may serve <~> through the simhash index)
    HNSW_OPTS="-c hnsw.ef_search=40 -c simhash.enable_rewrite=off"
    for kind in $KINDS; do
        time_route hnsw_nearest_10 "$kind" "SELECT id FROM codes ORDER BY code <~> Q LIMIT 10" "$HNSW_OPTS"
        check_recall hnsw_nearest_10 "$kind" "ARRAY(SELECT simhash_hamming(c.code, qq.code)::int FROM codes c ORDER BY c.code <~> qq.code LIMIT 10)" "$HNSW_OPTS"
        time_route pgv_simhash_nearest_10 "$kind" "SELECT id FROM codes ORDER BY code <~> Q LIMIT 10"
        check_recall pgv_simhash_nearest_10 "$kind" "ARRAY(SELECT simhash_hamming(c.code, qq.code)::int FROM codes c ORDER BY c.code <~> qq.code LIMIT 10)"
    done
fi

tenth=$(psql -At -c "SELECT string_agg(kind || ' ' || m, ', ') FROM (SELECT kind, percentile_disc(0.5) WITHIN GROUP (ORDER BY d[10]) AS m FROM truth GROUP BY kind) s")
echo
echo "Codes of $BITS bits ($MODE): $rows rows; $(server_settings), $(nproc) cores; table and indexes prewarmed. Median distance of the 10th nearest row: $tenth."
echo "COPY into the table (primary key included): $copy_s s; simhash index build: $build_s s${again_s:+ (again, after the other builds: $again_s s)}. Table $table_mb MB, primary key $pkey_mb MB, simhash index $index_mb MB ($(python3 -c "print(f'{$index_mb / max($table_mb, 1):.2f}')")x the table)${hnsw_build_s:+; pgvector HNSW build: $hnsw_build_s s, $hnsw_mb MB}."
for s in ${MORE_SEGMENTS:-}; do
    echo "simhash index WITH (segments = ${s/all/256}): built in ${more_build[$s]} s, ${more_mb[$s]} MB."
done
echo "Latency: pgbench, one client, p50 in ms over $FAST_RUNS lookups per indexed route and $SLOW_RUNS per scan, query points at random among $QUERIES."
echo
header="| route | plan |"; rule="|---|---|"
for kind in $KINDS; do header+=" $kind p50 ms |"; rule+="---|"; done
echo "$header recall@10 ($KINDS) |"; echo "$rule---|"
row() {   # route label
    local r="| $2 | ${plan[$1]:--} |"
    for kind in $KINDS; do r+=" ${p50[$1,$kind]:--} |"; done
    local rc=""; for kind in $KINDS; do rc+="${recall[$1,$kind]:-} "; done
    echo "$r ${rc% } |"
}
row pkey 'primary-key lookup `WHERE id = j`'
for k in $RADII; do
    row "index_radius_$k" "simhash index: \`simhash_hamming(code, q) <= $k\`"
    row "seq_radius_$k" "sequential scan: \`simhash_hamming(code, q) <= $k\`"
done
for n in 1 10; do
    row "index_nearest_$n" "simhash index: \`ORDER BY simhash_hamming(code, q) LIMIT $n\`"
    row "seq_nearest_$n" "sequential scan and sort: \`LIMIT $n\`"
done
for s in ${MORE_SEGMENTS:-}; do
    for k in $RADII; do
        row "index_radius_${k}_s$s" "simhash index WITH (segments = ${s/all/256}): \`simhash_hamming(code, q) <= $k\`"
    done
    for n in 1 10; do
        row "index_nearest_${n}_s$s" "simhash index WITH (segments = ${s/all/256}): \`ORDER BY simhash_hamming(code, q) LIMIT $n\`"
    done
done
if [[ $HNSW == 1 ]]; then
    row hnsw_nearest_10 'pgvector HNSW: `ORDER BY code <~> q LIMIT 10`, ef_search 40'
    row pgv_simhash_nearest_10 "the same query \`ORDER BY code <~> q LIMIT 10\` as the planner serves it with both indexes"
fi
