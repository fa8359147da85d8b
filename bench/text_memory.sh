#!/usr/bin/env bash
# The peak memory of each text function on a 100 MB text, the worst kind for it (distinct
# words: every shingle new), measured as the backend's peak resident size (VmHWM) in a fresh
# session, less that of the same session reading the text alone. The factors of
# src/fingerprint/memory.rs (what simhash.max_text_memory is checked against) come from here.
#   usage: [PG_MAJOR=15|18] bash bench/text_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
start_cluster
db=simhash_bench_text_memory
fresh_database "$db"
q() { as_postgres "$PG_BIN/psql" -h "$PGHOST" -p "$PGPORT" -U postgres -X -qAt -v ON_ERROR_STOP=1 "$@" "$db"; }
q -c "DROP TABLE IF EXISTS words" -c "CREATE TABLE words AS SELECT string_agg(md5(i::text), ' ') AS t FROM generate_series(1, 3000000) i"
# Peak resident kB of a fresh backend after evaluating $1 over the table.
peak() {
    q <<SQL
SET simhash.max_text_memory = '2000GB';
SELECT pg_backend_pid() AS pid \gset
SELECT $1 IS NOT NULL FROM words \g /dev/null
\setenv PID :pid
\! awk '/VmHWM/ { print \$2 }' /proc/\$PID/status
SQL
}
bytes=$(q -c "SELECT octet_length(t) FROM words")
base=$(peak "length(t)")
printf '| function | MB of text | peak MB beyond reading it | bytes per byte of text |\n|---|---|---|---|\n'
for f in "simhash(t)" "simhash(t, 20)" "minhash64(t)" "simhash_ngrams(t)" "length(simhash_fold(t))" "simhash_similarity(t, t || 'x')"; do
    kb=$(peak "$f")
    n=$bytes; case $f in simhash_similarity*) n=$((2 * bytes));; esac
    awk -v f="$f" -v n="$n" -v kb="$kb" -v base="$base" 'BEGIN {
        printf "| `%s` | %.0f | %.0f | %.1f |\n", f, n / 1048576, (kb - base) / 1024, (kb - base) * 1024 / n }'
done

