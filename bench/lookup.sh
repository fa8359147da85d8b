#!/usr/bin/env bash
# Lookup benchmark: one radius query, `fp <~> q <= k`, answered by every route in one run on one
# server, over N uniform 64-bit fingerprints (md5) plus near-duplicates planted at distances 1..11.
#   usage: bench/lookup.sh [N]      (default 1000000; 10000000 works too; needs scripts/setup.sh)
# Latency: pgbench, one client, client round trip with planning, p50/p99. Recall: planted pairs
# found / planted pairs within k. The cluster is restarted with shared_buffers large enough for the
# table and every index, and left running that way.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
N=${1:-1000000}
FAST_RUNS=${FAST_RUNS:-1000}      # lookups per indexed route and radius
SLOW_RUNS=${SLOW_RUNS:-20}        # lookups per sequential-scan route and radius
RADII=${RADII:-"3 7 9"}
QUERIES=200                        # planted query points
SB_MB=$(( N / 1000000 * 600 + 512 ))
restart_cluster "-c shared_buffers=${SB_MB}MB -c max_parallel_workers_per_gather=2 -c jit=off"
fresh_database simhash_bench
export PGDATABASE=simhash_bench
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
# p50 and p99 in ms of the pgbench per-transaction log(s) in $work.
latencies() {
    cat "$work"/pgbench_log.* | python3 -c '
import sys
lat = sorted(int(line.split()[2]) for line in sys.stdin)
pick = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(f"{pick(0.50):.2f} {pick(0.99):.2f}")'
}

log "loading $N fingerprints and ${QUERIES} x 11 planted near-duplicates"
psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE fps (id int PRIMARY KEY, fp simhash64 NOT NULL);
INSERT INTO fps SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, $N) i;
-- Query point j is row j; its copy at distance d (1..11) flips bits j*7 + t*13 (mod 64), t < d.
CREATE TABLE planted AS
SELECT q.id AS j, d, $N + q.id * 11 + d AS id,
       (q.fp::bigint # (SELECT bit_or(1::bigint << ((q.id * 7 + t * 13) % 64)) FROM generate_series(0, d - 1) t))::simhash64 AS fp
FROM fps q, generate_series(1, 11) d WHERE q.id <= $QUERIES;
INSERT INTO fps SELECT id, fp FROM planted;
VACUUM ANALYZE fps;
SQL
table_mb=$(psql -At -c "SELECT round(pg_table_size('fps') / 1048576.0)")

# The query fingerprint of lookup j: row j's, written as a constant expression the planner folds.
# Templates say QFP; pgbench gets that expression, the recall check gets the query row's column.
q="('x' || substr(md5(:j::text), 1, 16))::bit(64)::bigint::simhash64"
declare -A query label build size
query[seq_bit_count]="SELECT count(*) FROM fps WHERE bit_count((fp::bigint # (QFP)::bigint)::bit(64)) <= :k"
label[seq_bit_count]='parallel seq scan, stock `bit_count((a # b)::bit(64))`'
query[seq_hamming]="SELECT count(*) FROM fps WHERE hamming(fp, QFP)::int <= :k"
label[seq_hamming]='parallel seq scan, `hamming(fp, q)::int`'
query[btree]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[btree]='four segment B-trees, `fp <~> q <= k` (BitmapOr)'
query[gin]="SELECT count(*) FROM fps WHERE fp <~> QFP <= :k"
label[gin]='one GIN on `simhash_bands(fp)`, `fp <~> q <= k`'
covering_arm() { echo "SELECT id FROM fps WHERE simhash_segment(fp, $1) = ANY(simhash_segment_probes(QFP, $1, :r)) AND hamming(fp, QFP)::int <= :k"; }
query[covering]="SELECT count(DISTINCT id) FROM ($(covering_arm 0) UNION ALL $(covering_arm 1) UNION ALL $(covering_arm 2) UNION ALL $(covering_arm 3)) s"
label[covering]='stock: four covering B-trees `(segment) INCLUDE (fp, id)`, UNION ALL of index-only scans'
routes="seq_bit_count seq_hamming btree gin covering"

declare -A p50 p99 recall plan
measure() {   # route
    local route=$1 runs=$FAST_RUNS
    case $route in seq_*) runs=$SLOW_RUNS;; esac
    for k in $RADII; do
        local r=$((k / 4)) sql=${query[$route]//QFP/$q}
        printf '\\set j random(1, %d)\n\\set k %d\n\\set r %d\n%s;\n' "$N" "$k" "$r" "$sql" > "$work/q.sql"
        local example=${sql//:j/42}; example=${example//:k/$k}; example=${example//:r/$r}
        # (awk, not grep -m1 or head: an early exit would fail the pipeline under pipefail)
        plan[$route,$k]=$(psql -At -c "EXPLAIN (COSTS OFF) $example" | awk 'match($0, /(Parallel Seq|Bitmap Heap|Index Only|Seq|Index) Scan/) && !found { print substr($0, RSTART, RLENGTH); found = 1 }')
        pgbench -n -M simple -t "$((runs / 10 + 1))" -f "$work/q.sql" >/dev/null
        (cd "$work" && rm -f pgbench_log.* && pgbench -n -M simple -t "$runs" -f q.sql -l >/dev/null)
        read -r p50[$route,$k] p99[$route,$k] <<<"$(latencies)"
        # Recall over the planted pairs: run the route once per query point (its fingerprint a column
        # of the outer row, as in a join), count the planted near-duplicates within k it found.
        local recall_sql=${query[$route]//QFP/qf.fp}
        recall_sql=${recall_sql//count(DISTINCT id)/array_agg(DISTINCT id)}
        recall_sql=${recall_sql//count(\*)/array_agg(id)}
        recall_sql=${recall_sql//:k/$k}; recall_sql=${recall_sql//:r/$r}
        local points=$QUERIES; case $route in seq_*) points=10;; esac
        recall[$route,$k]=$(psql -At -c "
            WITH found AS (SELECT qf.id AS j, f.ids FROM fps qf, LATERAL ($recall_sql) f(ids) WHERE qf.id <= $points)
            SELECT round(count(*) FILTER (WHERE p.id = ANY(found.ids))::numeric / count(*), 3)
            FROM planted p JOIN found ON found.j = p.j WHERE p.d <= $k")
    done
}
index_size() { psql -At -c "SELECT round(sum(pg_relation_size(indexrelid)) / 1048576.0) FROM pg_index WHERE indrelid = 'fps'::regclass AND indexrelid::regclass::text LIKE '$1%'"; }

log "no segment index: the rewrite must cost nothing (simhash.enable_rewrite on vs off)"
printf '\\set j random(1, %d)\nSELECT count(*) FROM fps WHERE fp <~> %s <= 3;\n' "$N" "$q" > "$work/noindex.sql"
declare -A noindex
for setting in on off; do
    (cd "$work" && rm -f pgbench_log.* && PGOPTIONS="-c simhash.enable_rewrite=$setting" pgbench -n -M simple -t "$SLOW_RUNS" -f noindex.sql -l >/dev/null)
    read -r noindex[$setting] _ <<<"$(latencies)"
done

for route in seq_bit_count seq_hamming; do log "$route"; measure $route; done

log "btree: four segment indexes"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp')" >/dev/null; build[btree]=$(elapsed "$t0")
psql -q -c "ANALYZE fps"; size[btree]=$(index_size fps_fp_segment_); measure btree
psql -q -c "DROP INDEX fps_fp_segment_0, fps_fp_segment_1, fps_fp_segment_2, fps_fp_segment_3"

log "gin: one bands index"
t0=$(now); psql -q -c "SELECT simhash_create_indexes('fps', 'fp', 'gin')" >/dev/null; build[gin]=$(elapsed "$t0")
psql -q -c "ANALYZE fps"; size[gin]=$(index_size fps_fp_bands); measure gin
psql -q -c "DROP INDEX fps_fp_bands"

log "covering: four B-trees (segment) INCLUDE (fp, id)"
t0=$(now)
for n in 0 1 2 3; do psql -q -c "CREATE INDEX fps_covering_$n ON fps (simhash_segment(fp, $n)) INCLUDE (fp, id)"; done
build[covering]=$(elapsed "$t0")
psql -q -c "VACUUM ANALYZE fps"; size[covering]=$(index_size fps_covering_); measure covering

log "batch pairs: simhash_pairs('fps', 'fp', k)"
declare -A pairs_s pairs_n
for k in 3 7; do
    t0=$(now)
    pairs_n[$k]=$(psql -At -c "SELECT count(*) FROM simhash_pairs('fps', 'fp', $k)")
    pairs_s[$k]=$(elapsed "$t0")
done

settings=$(psql -At -c "SELECT 'PostgreSQL ' || split_part(version(), ' ', 2) || ', shared_buffers=' || current_setting('shared_buffers') || ', max_parallel_workers_per_gather=' || current_setting('max_parallel_workers_per_gather') || ', jit=' || current_setting('jit')")
echo
echo "Radius lookups over $N uniform fingerprints + $((QUERIES * 11)) planted near-duplicates ($settings, $(nproc) cores; table ${table_mb} MB)."
echo
header="| route | index build s / MB |"; rule="|---|---|"
for k in $RADII; do header+=" k=$k p50 ms | k=$k p99 ms | k=$k recall |"; rule+="---|---|---|"; done
echo "$header"; echo "$rule"
for route in $routes; do
    row="| ${label[$route]} | ${build[$route]:--} / ${size[$route]:--} |"
    for k in $RADII; do row+=" ${p50[$route,$k]} (${plan[$route,$k]}) | ${p99[$route,$k]} | ${recall[$route,$k]} |"; done
    echo "$row"
done
echo
echo "All pairs, \`simhash_pairs('fps', 'fp', k)\` over the $((N + QUERIES * 11)) rows, end to end: k=3 ${pairs_s[3]} s (${pairs_n[3]} pairs), k=7 ${pairs_s[7]} s (${pairs_n[7]} pairs)."
echo
echo "Without any segment index, \`fp <~> q <= 3\` p50: ${noindex[on]} ms with simhash.enable_rewrite on, ${noindex[off]} ms off (same plan: the rewrite does not apply)."
