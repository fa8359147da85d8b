#!/usr/bin/env bash
# The near-duplicate constraint on templated texts, with and without verification (issue: "52 unique
# rows were dropped"). A table of N texts 'document number g about <md5> <md5>' fingerprinted with
# MODE, the four segment indexes; then one statement inserts 5,000 new, distinct texts ('new document
# g text <md5>') and 500 copies of stored rows with one character changed (about 1 % of the text),
# under: no trigger; simhash_add_dedup(..., K, 'skip'); the same with verify => 'body'. Each run is
# rolled back, so all start from the same table. Then the verified check at commit (verify =>
# 'body', deferred => true), committed (the check runs at COMMIT, which is timed) and its rows
# deleted after. Prints the rows dropped and the time per row.
#   usage: bench/templated.sh [N] [MODE] [K]    (default 200000 'minhash64(body, 4, 2)' 11; needs
#          scripts/setup.sh; about 5 minutes at the default size)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
N=${1:-200000}
MODE=${2:-minhash64(body, 4, 2)}
K=${3:-11}
db=simhash_bench_templated
start_cluster >/dev/null
fresh_database "$db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
log "loading $N templated texts, fingerprint $MODE"
q <<SQL
CREATE TABLE d2 (id bigserial PRIMARY KEY, body text NOT NULL, fp simhash64 GENERATED ALWAYS AS ($MODE) STORED);
INSERT INTO d2 (body) SELECT 'document number ' || g || ' about ' || md5(g::text) || ' ' || md5((g + 1)::text)
FROM generate_series(1, $N) g;
SELECT count(*) FROM simhash_create_indexes('d2', 'fp') \g /dev/null
VACUUM ANALYZE d2;
-- The rows to insert: 5,000 new texts, and 500 stored texts with one character of the first md5 changed.
CREATE TABLE incoming AS
SELECT 'new' AS kind, 'new document ' || g || ' text ' || md5((-g)::text) AS body FROM generate_series(1, 5000) g
UNION ALL
SELECT 'edited', 'document number ' || g || ' about '
       || overlay(md5(g::text) placing CASE WHEN substr(md5(g::text), 9, 1) = 'z' THEN 'y' ELSE 'z' END from 9 for 1)
       || ' ' || md5((g + 1)::text)
FROM generate_series(1, $N, $N / 500) g;
SQL
echo
echo "Inserting 5,000 new texts and $(q -At -c "SELECT count(*) FROM incoming WHERE kind = 'edited'") one-character edits of stored rows into $N templated texts ($MODE, k = $K; one INSERT ... SELECT, rolled back after each run; PostgreSQL $(q -At -c 'SHOW server_version'), $(nproc) cores)."
echo
echo "| constraint | new rows dropped (of 5,000) | edited copies dropped | ms per inserted row |"
echo "|---|---|---|---|"
for config in none plain verified; do
    case $config in
        none) setup="SELECT 1"; label="no trigger";;
        plain) setup="SELECT simhash_add_dedup('d2', 'fp', $K, 'skip')"; label="\`simhash_add_dedup('d2', 'fp', $K, 'skip')\`";;
        verified) setup="SELECT simhash_add_dedup('d2', 'fp', $K, 'skip', verify => 'body')"; label="\`simhash_add_dedup('d2', 'fp', $K, 'skip', verify => 'body')\` (min_similarity 0.7, the default)";;
    esac
    label=${label//\'/\'\'}
    q -At <<SQL | tail -1
BEGIN;
$setup \g /dev/null
SELECT clock_timestamp() AS t0 \gset
SET client_min_messages = warning;
INSERT INTO d2 (body) SELECT body FROM incoming ORDER BY kind, body;
SELECT clock_timestamp() AS t1 \gset
SELECT '| $label | ' || (SELECT 5000 - count(*) FROM d2 WHERE body LIKE 'new document%') || ' | '
       || (SELECT count(*) FROM incoming i WHERE kind = 'edited' AND NOT EXISTS (SELECT FROM d2 WHERE d2.body = i.body))
       || ' | ' || round((extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz) * 1000 / (SELECT count(*) FROM incoming))::numeric, 3) || ' |';
ROLLBACK;
SQL
done
# The verified deferred check: committed (its check runs at COMMIT), then its rows deleted.
label="\`simhash_add_dedup('d2', 'fp', $K, 'skip', verify => 'body', deferred => true)\` (checked at COMMIT)"
label=${label//\'/\'\'}
q -At <<SQL | tail -1
SET client_min_messages = warning;
BEGIN;
SELECT simhash_add_dedup('d2', 'fp', $K, 'skip', verify => 'body', deferred => true) \g /dev/null
SELECT clock_timestamp() AS t0 \gset
INSERT INTO d2 (body) SELECT body FROM incoming ORDER BY kind, body;
COMMIT;
SELECT clock_timestamp() AS t1 \gset
SELECT '| $label | ' || (SELECT 5000 - count(*) FROM d2 WHERE body LIKE 'new document%') || ' | '
       || (SELECT count(*) FROM incoming i WHERE kind = 'edited' AND NOT EXISTS (SELECT FROM d2 WHERE d2.body = i.body))
       || ' | ' || round((extract(epoch FROM :'t1'::timestamptz - :'t0'::timestamptz) * 1000 / (SELECT count(*) FROM incoming))::numeric, 3) || ' |';
DROP TRIGGER d2_fp_dedup ON d2;
DELETE FROM d2 WHERE id > $N;
SQL
