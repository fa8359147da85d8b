#!/usr/bin/env bash
# Lookup benchmark: the same radius query through the four segment B-trees (the planner rewrite)
# and through sequential scans, on N uniform 64-bit fingerprints (md5), in one run on one server.
# Latency is the client round trip of pgbench (planning included), one client.
#   usage: bench/lookup.sh [N]        (default 1000000; needs scripts/setup.sh to have run)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
N=${1:-1000000}
FAST_RUNS=${FAST_RUNS:-2000}
SLOW_RUNS=${SLOW_RUNS:-30}
start_cluster
fresh_database simhash_bench
export PGDATABASE=simhash_bench
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT

ms() { python3 -c "import sys; print(f'{float(sys.argv[1]):.3f}')" "$1"; }
now() { date +%s.%N; }

log "loading $N fingerprints"
psql -q -v ON_ERROR_STOP=1 <<SQL
CREATE TABLE fps (id int PRIMARY KEY, fp simhash64 NOT NULL);
INSERT INTO fps SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, $N) i;
SQL
t0=$(now)
psql -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE INDEX fps_segment_0 ON fps (simhash_segment(fp, 0));
CREATE INDEX fps_segment_1 ON fps (simhash_segment(fp, 1));
CREATE INDEX fps_segment_2 ON fps (simhash_segment(fp, 2));
CREATE INDEX fps_segment_3 ON fps (simhash_segment(fp, 3));
SQL
build_s=$(python3 -c "print(f'{$(now) - $t0:.1f}')")
psql -q -c "VACUUM ANALYZE fps"
read -r table_mb index_mb <<<"$(psql -At -F' ' -c "SELECT round(pg_table_size('fps') / 1048576.0), round(sum(pg_relation_size(indexrelid)) / 1048576.0) FROM pg_index WHERE indrelid = 'fps'::regclass AND indexrelid::regclass::text LIKE 'fps_segment_%'")"

# Each transaction looks up the fingerprint of a random stored row j (a constant once folded),
# so every lookup has at least one match.
q="('x' || substr(md5(:j::text), 1, 16))::bit(64)::bigint::simhash64"
declare -A query=(
  [index]="SELECT count(*) FROM fps WHERE fp <~> $q <= 3;"
  [seq_hamming]="SELECT count(*) FROM fps WHERE hamming(fp, $q)::int <= 3;"
  [seq_bit_count]="SELECT count(*) FROM fps WHERE bit_count((fp::bigint # ($q)::bigint)::bit(64)) <= 3;"
)
declare -A label=(
  [index]='four segment B-trees, `fp <~> q <= 3` (BitmapOr)'
  [seq_hamming]='sequential scan, `hamming(fp, q)::int <= 3`'
  [seq_bit_count]='sequential scan, stock `bit_count((a # b)::bit(64)) <= 3`'
)
declare -A p50 p99 plan
for route in index seq_hamming seq_bit_count; do
  runs=$FAST_RUNS; [ "$route" = index ] || runs=$SLOW_RUNS
  printf '\\set j random(1, %d)\n%s\n' "$N" "${query[$route]}" > "$work/$route.sql"
  plan[$route]=$(psql -At -c "EXPLAIN (COSTS OFF) ${query[$route]//:j/42}" | grep -m1 -o '[A-Za-z ]*Scan' | sed 's/^ *//')
  log "$route: $runs lookups"
  pgbench -n -M simple -c 1 -t "$((runs / 10 + 1))" -f "$work/$route.sql" >/dev/null   # warm-up
  (cd "$work" && rm -f pgbench_log.* && pgbench -n -M simple -c 1 -t "$runs" -f "$route.sql" -l >/dev/null)
  read -r p50[$route] p99[$route] <<<"$(cat "$work"/pgbench_log.* | python3 -c '
import sys
lat = sorted(int(line.split()[2]) for line in sys.stdin)
pick = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(f"{pick(0.50):.3f} {pick(0.99):.3f}")')"
done

# Same answers: total matches for 200 lookups through each route.
same=$(psql -At <<SQL
SELECT CASE WHEN bool_and(a = b AND b = c) THEN 'yes' ELSE 'NO' END FROM (
  SELECT (SELECT count(*) FROM fps WHERE fp <~> q <= 3) a,
         (SELECT count(*) FROM fps WHERE hamming(fp, q)::int <= 3) b,
         (SELECT count(*) FROM fps WHERE bit_count((fp::bigint # q::bigint)::bit(64)) <= 3) c
  FROM (SELECT fp AS q FROM fps WHERE id % ($N / 200) = 0 LIMIT 200) s) x;
SQL
)

settings="$(psql -At -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', shared_buffers=' || current_setting('shared_buffers') || ', max_parallel_workers_per_gather=' || current_setting('max_parallel_workers_per_gather')"), $(nproc) cores"
base=${p50[seq_bit_count]}
echo
echo "Lookup at radius 3 over $N uniform fingerprints ($settings)."
echo
echo "Segment index build: ${build_s} s for four indexes, ${index_mb} MB (table ${table_mb} MB). Same matches on all routes for 200 lookups: $same."
echo
echo "| route | scan | p50 ms | p99 ms | p50 speed-up vs stock seq scan |"
echo "|---|---|---|---|---|"
for route in index seq_hamming seq_bit_count; do
  printf '| %s | %s | %s | %s | %sx |\n' "${label[$route]}" "${plan[$route]}" "${p50[$route]}" "${p99[$route]}" \
    "$(python3 -c "print(f'{$base / ${p50[$route]}:.0f}')")"
done
