# Shared steps of the bench/*.sh scripts, on top of scripts/common.sh. Source it; do not run it.
# Sets $work, a scratch directory the postgres user can read (removed on exit; a script that sets
# its own EXIT trap removes it there too).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
# Seconds since $1 (a value of now), one decimal.
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# p50 and p99 in ms of the pgbench per-transaction log(s) in $work.
latencies() {
    cat "$work"/pgbench_log.* | python3 -c '
import sys
lat = sorted(int(line.split()[2]) for line in sys.stdin)
pick = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
print(f"{pick(0.50):.2f} {pick(0.99):.2f}")'
}

# Runs the pgbench script $work/$1 with one client, RUNS ($2) times after RUNS / 10 + 1 unlogged
# warm-up runs, and prints "p50 p99" in ms (client round trip with planning). PGOPTIONS passes on.
pgbench_latencies() {
    (cd "$work" && pgbench -n -M simple -t "$(($2 / 10 + 1))" -f "$1" >/dev/null \
        && rm -f pgbench_log.* && pgbench -n -M simple -t "$2" -f "$1" -l >/dev/null)
    latencies
}

# The first scan node of the EXPLAIN read on stdin ("Index Scan", "Parallel Seq Scan", ...), scans
# of a table named queries left out. (awk, not grep -m1 or head: an early exit would fail the
# pipeline under pipefail.)
first_scan() {
    awk '!/ on queries/ && match($0, /(Parallel Seq|Parallel Index Only|Parallel Bitmap Heap|Bitmap Heap|Index Only|Seq|Index|SimHash Radius) Scan/) && !found { print substr($0, RSTART, RLENGTH); found = 1 }'
}

# Reads table $1 and its indexes into shared_buffers (needs CREATE EXTENSION pg_prewarm).
prewarm() {
    psql -q -At -c "SELECT sum(pg_prewarm(c.oid)) FROM pg_class c WHERE c.oid = '$1'::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = '$1'::regclass)" >/dev/null
}

# The server's version and the settings a benchmark's numbers depend on, for the report.
server_settings() {
    psql -At -c "SELECT 'PostgreSQL ' || split_part(version(), ' ', 2) || ', shared_buffers=' || current_setting('shared_buffers') || ', max_parallel_workers_per_gather=' || current_setting('max_parallel_workers_per_gather') || ', jit=' || current_setting('jit') || ', huge_pages=' || current_setting('huge_pages')"
}
