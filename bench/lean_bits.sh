#!/usr/bin/env bash
# The near-duplicate constraint on values with lean bits (bits that are nearly the same in every
# row): N values below 2^50 stored in 64 bits (the top 14 bits zero in every row, as when a short
# hash is kept in a bigint or a bit(64)), beside N uniform 64-bit values, as bit(64) codes and as
# simhash64 fingerprints. Each set is loaded by one INSERT ... SELECT into an empty table with a
# simhash index and simhash_add_dedup(..., K, 'skip'): checked at COMMIT (deferred => true), then at
# each row. Prints the times and the rows kept; one run, every load in the same run: read the
# ratio of lean to uniform, not the absolute times.
#   usage: bench/lean_bits.sh [N]     (default 300000 rows; K, the radius, default 3)
# Values: uniform, the first 16 hex digits of md5(g); lean, (g * 2654435761) mod 2^50, every tenth
#   row with two of its low 50 bits flipped (a near-duplicate of the row before).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${1:-300000}
K=${K:-3}
start_cluster
fresh_database simhash_lean_bits
export PGDATABASE=simhash_lean_bits

psql -q -v ON_ERROR_STOP=1 -c "
CREATE TABLE src AS
SELECT g, kind,
       CASE WHEN kind = 'lean' AND g % 10 = 0
            THEN ((g - 1) * 2654435761 % (1::bigint << 50)) # (1::bigint << (g % 50)::int) # (1::bigint << ((g / 50) % 50)::int)
            WHEN kind = 'lean' THEN g * 2654435761 % (1::bigint << 50)
            ELSE ('x' || left(md5(g::text), 16))::bit(64)::bigint END AS v
FROM generate_series(1, $N) g, unnest(ARRAY['uniform', 'lean']) kind;" || die "generating the values failed"

printf '%s\n' "| values | type | check | load s | rows kept |" "|---|---|---|---|---|"
for deferred in true false; do
    check=$([[ $deferred == true ]] && echo "at COMMIT" || echo "at each row")
    for kind in uniform lean; do
        for type in 'bit(64)' simhash64; do
            cast=$([[ $type == simhash64 ]] && echo "v::simhash64" || echo "v::bit(64)")
            psql -q -v ON_ERROR_STOP=1 -c "
SET client_min_messages = warning;
DROP TABLE IF EXISTS t;
CREATE TABLE t (g bigint, code $type);
CREATE INDEX ON t USING simhash (code);
SELECT simhash_add_dedup('t', 'code', $K, 'skip', deferred => $deferred);" >/dev/null || die "set-up failed"
            t0=$(now)
            psql -q -v ON_ERROR_STOP=1 -c "INSERT INTO t SELECT g, $cast FROM src WHERE kind = '$kind' ORDER BY g;" \
                2>&1 | { grep -v NOTICE || true; }
            secs=$(elapsed "$t0")
            echo "| $kind | \`$type\` | $check | $secs | $(psql -At -c 'SELECT count(*) FROM t') |"
        done
    done
done
echo "($N values of each kind, K = $K; $(server_settings))"
