#!/usr/bin/env bash
# Lookup benchmark: one radius query, `fp <~> q <= k`, answered by every route in one run on one
# server, over N fingerprints plus near-duplicates planted at distances 1..11 around 200 of them.
#   usage: bench/lookup.sh [N] [uniform|real]     (needs scripts/setup.sh)
#   uniform: N uniformly random 64-bit fingerprints (md5); default N 1000000, 10000000 works too.
#   real:    simhash(body) of up to N real paragraphs from bench/real_texts.py (Debian documentation,
#            man pages, crate docs: about 930,000 on a build machine), whose segment values are skewed.
#            REAL_MODE picks another fingerprint of body (e.g. REAL_MODE='minhash64(body)'). With real
#            texts a verified route runs too: the radius scan plus simhash_similarity(body, text) >=
#            MIN_SIMILARITY (default 0.7); planted near-duplicates carry their query point's text.
# Latency: pgbench, one client, client round trip with planning, p50/p99; planning alone: the
# median "Planning Time" of EXPLAIN (SUMMARY) over 50 query points. Recall: planted pairs found /
# planted pairs within k. ROUTES picks routes (default all; e.g. ROUTES="radius own" for a quick 10M
# run); PAIRS=0 skips the all-pairs timing. The cluster is restarted with shared_buffers large
# enough for the table and every index, and left running that way; pg_prewarm loads them before
# each route. SERVER_OPTIONS adds server settings (e.g. SERVER_OPTIONS="-c huge_pages=on", which
# needs huge pages reserved: vm.nr_hugepages).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${1:-1000000}
DATA=${2:-uniform}
FAST_RUNS=${FAST_RUNS:-$(( N > 2000000 ? 200 : 1000 ))}   # lookups per indexed route and radius
SLOW_RUNS=${SLOW_RUNS:-20}        # lookups per sequential-scan route and radius
RADII=${RADII:-"3 7 9"}
REAL_MODE=${REAL_MODE:-simhash(body)}
MIN_SIMILARITY=${MIN_SIMILARITY:-0.7}
ROUTES=${ROUTES:-"seq_bit_count seq_hamming btree gin radius own covering"}
PAIRS=${PAIRS:-1}
QUERIES=200                        # planted query points
SB_MB=$(( N / 1000000 * 600 + 512 ))
restart_cluster "-c shared_buffers=${SB_MB}MB -c max_parallel_workers_per_gather=2 -c jit=off ${SERVER_OPTIONS:-}"
fresh_database simhash_bench
export PGDATABASE=simhash_bench

case $DATA in
uniform)
    log "loading $N uniform fingerprints"
    psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE fps (id int PRIMARY KEY, fp simhash64 NOT NULL);
INSERT INTO fps SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, $N) i;
-- Query point j is row j.
CREATE TABLE queries AS SELECT id AS j, fp FROM fps WHERE id <= $QUERIES;
SQL
    ;;
real)
    log "fingerprinting up to $N real paragraphs (bench/real_texts.py)"
    t0=$(now)
    psql -q -v ON_ERROR_STOP=1 -c "CREATE TABLE texts (body text NOT NULL)"
    python3 "$REPO_ROOT/bench/real_texts.py" "$N" | PGCLIENTENCODING=UTF8 psql -q -v ON_ERROR_STOP=1 -c "COPY texts FROM STDIN"
    psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE fps (id int PRIMARY KEY, fp simhash64 NOT NULL, body text NOT NULL);
INSERT INTO fps SELECT row_number() OVER (), fp, body FROM (SELECT $REAL_MODE AS fp, body FROM texts) t WHERE fp IS NOT NULL;
DROP TABLE texts;
-- 200 query points, rows picked at random (repeatably).
CREATE TABLE queries AS SELECT (row_number() OVER (ORDER BY md5(id::text)))::int AS j, fp, body
FROM fps ORDER BY md5(id::text) LIMIT $QUERIES;
SQL
    N=$(psql -At -c "SELECT count(*) FROM fps")
    log "$N fingerprints of real text in $(elapsed "$t0") s"
    ;;
*) die "unknown data set '$DATA' (uniform or real)";;
esac
log "planting ${QUERIES} x 11 near-duplicates"
psql -q -v ON_ERROR_STOP=1 <<SQL
-- The copy of query point j at distance d (1..11) flips bits j*7 + t*13 (mod 64), t < d.
CREATE TABLE planted AS
SELECT q.j, d, $N + q.j * 11 + d AS id,
       (q.fp::bigint # (SELECT bit_or(1::bigint << ((q.j * 7 + t * 13) % 64)) FROM generate_series(0, d - 1) t))::simhash64 AS fp
       $( [[ $DATA == real ]] && echo ", q.body" )
FROM queries q, generate_series(1, 11) d;
INSERT INTO fps SELECT id, fp$( [[ $DATA == real ]] && echo ", body" ) FROM planted;
VACUUM ANALYZE fps;
SQL
table_mb=$(psql -At -c "SELECT round(pg_table_size('fps') / 1048576.0)")

# The query fingerprint of a lookup, as a constant expression the planner folds: uniform, row j's
# (any row); real, query point j's (pgbench integers are 64-bit: a CASE picks it). Templates say
# QFP; pgbench gets that expression, the recall check gets the query point's column.
if [[ $DATA == uniform ]]; then
    pick_query="\\set j random(1, $N)"
    q="('x' || substr(md5(:j::text), 1, 16))::bit(64)::bigint::simhash64"
else
    pick_query="\\set j random(1, $QUERIES)"$'\n'"\\set q $(psql -At -c "SELECT 'case ' || string_agg(format('when :j = %s then %s', j, fp::bigint), ' ') || ' else 0 end' FROM queries")"
    q="(:q)::bigint::simhash64"
fi
declare -A query label build size
query[seq_bit_count]="SELECT count(*) FROM fps WHERE bit_count((fp::bigint # (QFP)::bigint)::bit(64)) <= :k"
label[seq_bit_count]='parallel seq scan, stock `bit_count((a # b)::bit(64))`'
query[seq_hamming]="SELECT count(*) FROM fps WHERE hamming(fp, QFP)::int <= :k"
label[seq_hamming]='parallel seq scan, `hamming(fp, q)::int`'
query[btree]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[btree]='four compact segment B-trees, `fp <~> q <= k` (BitmapOr)'
query[radius]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[radius]='four covering segment B-trees `INCLUDE (fp)`, `fp <~> q <= k` (SimHash Radius Scan)'
query[gin]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[gin]='one GIN on `simhash_bands(fp)`, `fp <~> q <= k`'
covering_arm() { echo "SELECT id FROM fps WHERE simhash_segment(fp, $1) = ANY(simhash_segment_probes(QFP, $1, :r)) AND hamming(fp, QFP)::int <= :k"; }
query[covering]="SELECT count(DISTINCT id) FROM ($(covering_arm 0) UNION ALL $(covering_arm 1) UNION ALL $(covering_arm 2) UNION ALL $(covering_arm 3)) s"
label[covering]='stock: four covering B-trees `(segment) INCLUDE (fp, id)`, UNION ALL of index-only scans'
query[own]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[own]='one `simhash` index (the extension'"'"'s own access method), `fp <~> q <= k`'
routes="seq_bit_count seq_hamming btree gin covering radius own"
# The verified lookup (real texts): the query point's text, looked up once per lookup.
QTEXT="(SELECT qt.body FROM queries qt WHERE qt.j = :j)"
query[verified]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k AND simhash_similarity(body, QTEXT) >= $MIN_SIMILARITY"
label[verified]='four covering segment B-trees, `fp <~> q <= k AND simhash_similarity(body, text) >= '"$MIN_SIMILARITY"'` (SimHash Radius Scan, verified)'
[[ $DATA == real ]] && routes+=" verified"

declare -A p50 p99 recall plan planning pairs_s pairs_n index_pairs_s index_pairs_n
wanted() { [[ " $ROUTES " == *" $1 "* ]]; }
measure() {   # route
    local route=$1 runs=$FAST_RUNS
    case $route in seq_*) runs=$SLOW_RUNS;; esac
    for k in $RADII; do
        local r=$((k / 4)) sql=${query[$route]//QFP/$q}
        sql=${sql//QTEXT/$QTEXT}
        printf '%s\n\\set k %d\n\\set r %d\n%s;\n' "$pick_query" "$k" "$r" "$sql" > "$work/q.sql"
        local example=${sql//:j/42}; example=${example//:q/$(psql -At -c "SELECT fp::bigint FROM queries WHERE j = 42")}
        example=${example//:k/$k}; example=${example//:r/$r}
        plan[$route,$k]=$(psql -At -c "EXPLAIN (COSTS OFF) $example" | first_scan)
        # Planning alone, for the first 50 query points: the median of EXPLAIN's Planning Time.
        local planned=${query[$route]//QFP/'%1$L::simhash64'}; planned=${planned//QTEXT/'%2$L'}
        planned=${planned//:k/$k}; planned=${planned//:r/$r}
        planning[$route,$k]=$(psql -At -c "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY t)::numeric, 3) FROM (
            SELECT simhash_bench_planning(format(\$q\$$planned\$q\$, fp, $( [[ $DATA == real ]] && echo body || echo NULL::text ))) AS t FROM queries WHERE j <= 50) s")
        read -r p50[$route,$k] p99[$route,$k] <<<"$(pgbench_latencies q.sql "$runs")"
        # Recall over the planted pairs: run the route once per query point (a subquery with the
        # point's fingerprint as a parameter), count the planted near-duplicates within k it found.
        local recall_sql=${query[$route]//QFP/qf.fp}
        recall_sql=${recall_sql//QTEXT/qf.body}
        recall_sql=${recall_sql//count(DISTINCT id)/array_agg(DISTINCT id)}
        recall_sql=${recall_sql//count(\*)/array_agg(id)}
        recall_sql=${recall_sql//:k/$k}; recall_sql=${recall_sql//:r/$r}
        local points=$QUERIES; case $route in seq_*) points=10;; esac
        recall[$route,$k]=$(psql -At -c "
            WITH found AS (SELECT qf.j, ($recall_sql) AS ids FROM queries qf WHERE qf.j <= $points)
            SELECT round(count(*) FILTER (WHERE p.id = ANY(found.ids))::numeric / count(*), 3)
            FROM planted p JOIN found ON found.j = p.j WHERE p.d <= $k")
    done
}
index_size() { psql -At -c "SELECT round(sum(pg_relation_size(indexrelid)) / 1048576.0) FROM pg_index WHERE indrelid = 'fps'::regclass AND indexrelid::regclass::text LIKE '$1%'"; }

psql -q -c "CREATE EXTENSION pg_prewarm"; prewarm fps
# The lines of EXPLAIN ANALYZE of a statement, to read the radius scan's counters.
psql -q -c "CREATE FUNCTION simhash_bench_explain(q text) RETURNS SETOF text LANGUAGE plpgsql AS \$\$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP RETURN NEXT line; END LOOP;
END \$\$"
# Planning Time of a statement in ms (EXPLAIN without ANALYZE does not run it).
psql -q -c "CREATE FUNCTION simhash_bench_planning(q text) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF, SUMMARY ON) ' || q LOOP
        IF line LIKE 'Planning Time:%' THEN RETURN substring(line from '([0-9.]+) ms')::float8; END IF;
    END LOOP;
    RETURN NULL;
END \$\$"
log "no segment index: the rewrite must cost nothing (simhash.enable_rewrite on vs off)"
printf '%s\nSELECT count(*) FROM fps WHERE fp <~> %s <= 3;\n' "$pick_query" "$q" > "$work/noindex.sql"
declare -A noindex
for setting in on off; do
    (cd "$work" && rm -f pgbench_log.* && PGOPTIONS="-c simhash.enable_rewrite=$setting" pgbench -n -M simple -t "$SLOW_RUNS" -f noindex.sql -l >/dev/null)
    read -r noindex[$setting] _ <<<"$(latencies)"
done

for route in seq_bit_count seq_hamming; do wanted $route || continue; log "$route"; measure $route; done

if wanted btree; then
log "btree: four compact segment indexes"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp', 'btree_compact')" >/dev/null; build[btree]=$(elapsed "$t0")
psql -q -c "ANALYZE fps"; size[btree]=$(index_size fps_fp_segment_); prewarm fps; measure btree
psql -q -c "DROP INDEX fps_fp_segment_0, fps_fp_segment_1, fps_fp_segment_2, fps_fp_segment_3"
fi

if wanted gin; then
log "gin: one bands index"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp', 'gin')" >/dev/null; build[gin]=$(elapsed "$t0")
psql -q -c "ANALYZE fps"; size[gin]=$(index_size fps_fp_bands); prewarm fps; measure gin
psql -q -c "DROP INDEX fps_fp_bands"
fi

if wanted radius; then
log "radius: four covering segment indexes, SimHash Radius Scan"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp')" >/dev/null; build[radius]=$(elapsed "$t0")
psql -q -c "VACUUM ANALYZE fps"; size[radius]=$(index_size fps_fp_segment_); prewarm fps; measure radius
if [[ $DATA == real ]]; then
    log "verified: the same, and simhash_similarity(body, text) >= $MIN_SIMILARITY"
    measure verified
    # Candidates per lookup (rows within k) and verified rows, from EXPLAIN ANALYZE of every query point.
    declare -A candidates verified_rows
    for k in $RADII; do
        read -r candidates[$k] verified_rows[$k] <<<"$(psql -At -c "
            CREATE TEMP TABLE plans AS SELECT j, (SELECT string_agg(line, E'\n') FROM (SELECT * FROM simhash_bench_explain(
                format('SELECT count(*) FROM fps WHERE fp <~> %L::simhash64 <= $k AND simhash_similarity(body, %L) >= $MIN_SIMILARITY', fp, body))) e(line)) AS plan
            FROM queries;
            SELECT round(avg(substring(plan from 'Rows Within Radius: ([0-9]+)')::int), 1),
                   round(avg(substring(plan from 'Radius Scan\) on fps \(actual rows=([0-9]+)')::int), 1) FROM plans;" | tail -1 | tr '|' ' ')"
    done
fi
psql -q -c "DROP INDEX fps_fp_segment_0, fps_fp_segment_1, fps_fp_segment_2, fps_fp_segment_3"
fi

if wanted own; then
log "own: the simhash index access method"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp', 'simhash')" >/dev/null; build[own]=$(elapsed "$t0")
psql -q -c "VACUUM ANALYZE fps"; size[own]=$(index_size fps_fp_simhash); prewarm fps; measure own
log "nearest: ORDER BY fp <-> q LIMIT 10, through the simhash index and through a sort"
printf '%s\nSELECT id FROM fps ORDER BY fp <-> %s LIMIT 10;\n' "$pick_query" "$q" > "$work/nearest.sql"
declare -A nearest_p50 nearest_p99 nearest_plan nearest_answers
for how in index sort; do
    options=""; [[ $how == sort ]] && options="-c enable_indexscan=off"
    runs=$FAST_RUNS; [[ $how == sort ]] && runs=$SLOW_RUNS
    example=${q//:j/42}; example=${example//:q/$(psql -At -c "SELECT fp::bigint FROM queries WHERE j = 42")}
    nearest_plan[$how]=$(PGOPTIONS="$options" psql -At -c "EXPLAIN (COSTS OFF) SELECT id FROM fps ORDER BY fp <-> $example LIMIT 10" | first_scan)
    read -r nearest_p50[$how] nearest_p99[$how] <<<"$(PGOPTIONS="$options" pgbench_latencies nearest.sql "$runs")"
    # The distances of the 10 nearest rows of 20 query points (ties aside, the same either way).
    nearest_answers[$how]=$(PGOPTIONS="$options" psql -At -c "SELECT j, (SELECT array_agg(d) FROM (SELECT fp <-> qf.fp AS d FROM fps ORDER BY fp <-> qf.fp LIMIT 10) o) FROM queries qf WHERE j <= 20 ORDER BY j")
done
nearest_same=no; [[ ${nearest_answers[index]} == "${nearest_answers[sort]}" ]] && nearest_same=yes
# All pairs through the index (the table form reads it), later in memory (the query form).
[[ $PAIRS == 1 ]] && for k in 3 7; do
    t0=$(now)
    index_pairs_n[$k]=$(PGOPTIONS='-c maintenance_work_mem=2GB' psql -At -c "SELECT count(*) FROM simhash_pairs('fps', 'fp', $k)")
    index_pairs_s[$k]=$(elapsed "$t0")
done
psql -q -c "DROP INDEX fps_fp_simhash"
fi

if wanted covering; then
log "covering: four B-trees (segment) INCLUDE (fp, id)"
t0=$(now)
for n in 0 1 2 3; do psql -q -c "CREATE INDEX fps_covering_$n ON fps (simhash_segment(fp, $n)) INCLUDE (fp, id)"; done
build[covering]=$(elapsed "$t0")
psql -q -c "VACUUM ANALYZE fps"; size[covering]=$(index_size fps_covering_); prewarm fps; measure covering
fi

[[ $PAIRS == 1 ]] && log "batch pairs in memory: simhash_pairs('SELECT id, fp FROM fps', k)"
[[ $PAIRS == 1 ]] && for k in 3 7; do
    t0=$(now)
    pairs_n[$k]=$(PGOPTIONS='-c maintenance_work_mem=2GB' psql -At -c "SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM fps', $k)")
    pairs_s[$k]=$(elapsed "$t0")
done

settings=$(server_settings)
echo
echo "Radius lookups over $N $( [[ $DATA == uniform ]] && echo "uniform fingerprints" || echo "fingerprints of real text, $REAL_MODE," ) + $((QUERIES * 11)) planted near-duplicates ($settings, $(nproc) cores; table ${table_mb} MB; table and indexes prewarmed with pg_prewarm)."
echo
header="| route | index build s / MB |"; rule="|---|---|"
for k in $RADII; do header+=" k=$k p50 ms | k=$k p99 ms | k=$k planning ms | k=$k recall |"; rule+="---|---|---|---|"; done
echo "$header"; echo "$rule"
for route in $routes; do
    wanted "$route" || { [[ $route == verified ]] && wanted radius; } || continue
    row="| ${label[$route]} | ${build[$route]:--} / ${size[$route]:--} |"
    for k in $RADII; do row+=" ${p50[$route,$k]} (${plan[$route,$k]}) | ${p99[$route,$k]} | ${planning[$route,$k]} | ${recall[$route,$k]} |"; done
    echo "$row"
done
if [[ $DATA == real ]]; then
    echo
    for k in $RADII; do
        echo "k=$k: ${candidates[$k]} candidate rows within the radius per lookup, ${verified_rows[$k]} of them verified (similarity >= $MIN_SIMILARITY), averaged over the $QUERIES query points."
    done
fi
wanted own && echo && echo "Nearest rows, \`ORDER BY fp <-> q LIMIT 10\` (q a row's fingerprint): simhash index p50 ${nearest_p50[index]} ms, p99 ${nearest_p99[index]} ms (${nearest_plan[index]}); sort p50 ${nearest_p50[sort]} ms, p99 ${nearest_p99[sort]} ms (${nearest_plan[sort]}); the same distances for 20 query points: ${nearest_same}."
[[ $PAIRS == 1 ]] && echo && echo "All pairs over the $((N + QUERIES * 11)) rows, end to end: in memory (\`simhash_pairs('SELECT id, fp FROM fps', k)\`) k=3 ${pairs_s[3]} s (${pairs_n[3]} pairs), k=7 ${pairs_s[7]} s (${pairs_n[7]} pairs)$(wanted own && echo "; through the simhash index (\`simhash_pairs('fps', 'fp', k)\`) k=3 ${index_pairs_s[3]} s (${index_pairs_n[3]} pairs), k=7 ${index_pairs_s[7]} s (${index_pairs_n[7]} pairs)")."
echo
echo "Without any segment index, \`fp <~> q <= 3\` p50: ${noindex[on]} ms with simhash.enable_rewrite on, ${noindex[off]} ms off (same plan: the rewrite does not apply)."
