#!/usr/bin/env bash
# Random-hyperplane SimHash of embeddings: the cost per vector and per dimension on the server, and
# the statistical check at scale.
#   1. For d = 384, 768, 1,536: N random real[] vectors (default 20,000) in a table; the best of 3
#      runs of SELECT count(simhash(v)) (64 bits) and count(simhash_bits(v, b)) for b = 256, 1,024,
#      next to SELECT sum(array_length(v, 1)) (reading and detoasting the rows), one backend, no parallel workers; and the
#      matrix's generation (the first call of a backend for a new (seed, d, b)).
#   2. With pgvector in the server: the same through a vector(d) column (pgvector's cast to real[]).
#   3. Mean Hamming / b over 100,000 random pairs against angle / pi for b = 64, 256, 1,024
#      (crates/core/examples/embedding_angles.rs, the same code the server runs).
#   usage: bench/embed.sh [N]     (needs scripts/setup.sh; PG_MAJOR=18 for the pgvector rows; a few minutes)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
set -euo pipefail
cd "$REPO_ROOT"
n=${1:-20000}
db=simhash_bench_embed
install_prerequisites
install_extension
start_cluster
fresh_database "$db"
vector=false
if pgvector_available; then
    psql -q -d "$db" -c "CREATE EXTENSION vector"
    vector=true
fi

# pg_temp.best_ms(query): the best of 3 runs of a query, in ms (for each session below).
best_ms='CREATE FUNCTION pg_temp.best_ms(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; best float8 := '"'"'Infinity'"'"';
BEGIN
    FOR r IN 1..3 LOOP
        t0 := clock_timestamp();
        EXECUTE q;
        best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1000);
    END LOOP;
    RETURN best;
END $$;'

log "PostgreSQL $PG_MAJOR, $n random vectors per dimension; times in ms (best of 3); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| d | reading the rows | simhash(v), 64 bits | simhash_bits(v, 256) | simhash_bits(v, 1024) | µs per vector (64 / 256 / 1,024 bits) | ns per bit x dimension (1,024 bits) |"
echo "|---|---|---|---|---|---|---|"
for d in 384 768 1536; do
    psql -q -d "$db" -v ON_ERROR_STOP=1 -At <<SQL
SET max_parallel_workers_per_gather = 0;
SET client_min_messages = warning;
DROP TABLE IF EXISTS t;
CREATE TABLE t AS
SELECT i, (SELECT array_agg((random() - 0.5)::real) FROM generate_series(1, $d) WHERE i > 0) AS v
FROM generate_series(1, $n) i;
VACUUM ANALYZE t;
$best_ms
SELECT pg_temp.best_ms('SELECT sum(array_length(v, 1)) FROM t') AS base,
       pg_temp.best_ms('SELECT count(simhash(v)) FROM t') AS b64,
       pg_temp.best_ms('SELECT count(simhash_bits(v, 256)) FROM t') AS b256,
       pg_temp.best_ms('SELECT count(simhash_bits(v, 1024)) FROM t') AS b1024 \gset
SELECT format('| %s | %s | %s | %s | %s | %s / %s / %s | %s |', $d, round(:base), round(:b64), round(:b256), round(:b1024),
              round(((:b64 - :base) * 1000 / $n)::numeric, 1), round(((:b256 - :base) * 1000 / $n)::numeric, 1),
              round(((:b1024 - :base) * 1000 / $n)::numeric, 1),
              round(((:b1024 - :base) * 1e6 / $n / 1024 / $d)::numeric, 3));
SQL
    # The matrix's generation: the first call of a new backend, minus a second call.
    gen=$(psql -q -d "$db" -At <<SQL
SELECT v AS v1 FROM t WHERE i = 1 \gset
SELECT clock_timestamp() AS t0 \gset
SELECT simhash_bits(:'v1'::real[], 1024) IS NULL \g /dev/null
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000 AS first \gset
SELECT clock_timestamp() AS t0 \gset
SELECT simhash_bits(:'v1'::real[], 1024) IS NULL \g /dev/null
SELECT round((:first - extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000)::numeric);
SQL
)
    echo "   (d = $d: generating the 1,024 x $d matrix took $gen ms)"
    if $vector; then
        psql -q -d "$db" -v ON_ERROR_STOP=1 -At <<SQL
SET max_parallel_workers_per_gather = 0;
SET client_min_messages = warning;
DROP TABLE IF EXISTS tv;
CREATE TABLE tv AS SELECT i, v::vector($d) AS v FROM t;
VACUUM ANALYZE tv;
$best_ms
SELECT format('   (d = %s, pgvector vector(%s) column: reading the rows %s ms, count(simhash(v)) %s ms)', $d, $d,
              round(pg_temp.best_ms('SELECT sum(vector_dims(v)) FROM tv')), round(pg_temp.best_ms('SELECT count(simhash(v)) FROM tv')));
SQL
    fi
done
psql -q -d postgres -c "DROP DATABASE $db"

echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
log "mean Hamming / b over 100,000 random pairs against angle / pi (crates/core/examples/embedding_angles.rs)"
cargo run -q --release -p simhash-core --example embedding_angles -- 100000
