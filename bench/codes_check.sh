#!/usr/bin/env bash
# Correctness at scale on bit(256) codes: the near-duplicate constraint (action 'skip', loaded by
# one INSERT ... SELECT and by a COPY), simhash_pairs and simhash_clusters against a brute-force
# reference. Prints PASS/FAIL lines and the times; exits non-zero on a mismatch. A bench, not a
# test (minutes on 2 cores).
#   usage: bench/codes_check.sh [N]     (default 100000 rows; K, the radius, default 16)
# Data: row id's code is two md5s of id (256 uniform bits) for id % 10 < 7; rows with id % 10 of 7,
#   8 and 9 are planted near-duplicates: the code of row id - id % 10 XOR a sparse mask, the AND of
#   3, 4 or 5 codes of md5s (each bit set with probability 1/8, 1/16, 1/32: about 32, 16 and 8
#   bits), so that about half the planted rows fall on each side of K = 16.
# Reference (independent of the extension): every pair of rows within K by the self-join
#   `a.id < b.id AND bit_count(a.code # b.code) <= K` (a nested loop over N^2 / 2 pairs, parallel);
#   the clusters as the connected components of those pairs (label propagation to the smallest id);
#   the rows 'skip' keeps by the first-come rule in id order over those pairs (a row is dropped when
#   an earlier kept row is within K).
# Checked: simhash_pairs('src', 'code', K) and simhash_clusters('src', 'code', K) (through the
#   column's simhash index) equal the reference; tables loaded through simhash_add_dedup(..., K,
#   'skip') with a simhash index, by INSERT ... SELECT ... ORDER BY id and by COPY in id order, keep
#   exactly the first-come rows. The index is made on the empty tables: every row loaded goes to
#   its tail, which the loading backend keeps a copy of (simhash.index_tail_memory); a third load by
#   INSERT ... SELECT with that setting 0 reads the tail whole at each lookup (time in proportion
#   to N^2), for the ratio; a fourth, by INSERT ... SELECT under the deferred check
#   (simhash_add_dedup(..., deferred => true)), judges every row at COMMIT.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${1:-100000}
K=${K:-16}
start_cluster
fresh_database simhash_codes_check
export PGDATABASE=simhash_codes_check
status=0
check() {   # check NAME SQL-returning-a-count-of-differences
    local diff; diff=$(psql -At -v ON_ERROR_STOP=1 -c "$2") || { echo "FAIL $1 (error)"; status=1; return; }
    if [[ $diff == 0 ]]; then echo "PASS $1"; else echo "FAIL $1 ($diff rows differ)"; status=1; fi
}
timed() {   # timed LABEL SQL
    local t0; t0=$(now)
    psql -q -v ON_ERROR_STOP=1 -c "$2" || die "$1 failed"
    echo "  $1: $(elapsed "$t0") s"
}
all0=$(now)
log "generating $N codes of 256 bits (K = $K)"
timed "generate" "
CREATE FUNCTION code256(i int) RETURNS bit(256) LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS \$\$ SELECT ('x' || md5(i::text) || md5((-i)::text))::bit(256) \$\$;
CREATE FUNCTION mask256(i int, n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS \$\$ SELECT bit_and(code256(i * 8 + j + 1000000000)) FROM generate_series(1, n) j \$\$;
CREATE TABLE src AS SELECT id, CASE WHEN id % 10 < 7 THEN code256(id)
                                    ELSE code256(id - id % 10) # mask256(id, id % 10 - 4) END AS code
FROM generate_series(1, $N) id;
ALTER TABLE src ADD PRIMARY KEY (id);
ANALYZE src;"

log "reference: the self-join over all pairs (bit_count(a.code # b.code) <= $K)"
timed "reference pairs" "
SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0; SET jit = off;  -- (the table is under the default 8MB)
CREATE TABLE ref_pairs AS SELECT a.id AS id_a, b.id AS id_b, bit_count(a.code # b.code)::int AS distance
FROM src a JOIN src b ON a.id < b.id AND bit_count(a.code # b.code) <= $K;"
timed "reference clusters" "
CREATE TABLE edges AS SELECT id_a AS x, id_b AS y FROM ref_pairs UNION ALL SELECT id_b, id_a FROM ref_pairs;
CREATE INDEX ON edges (x);
CREATE TABLE ref_clusters AS SELECT DISTINCT x AS id, x AS representative FROM edges;
ALTER TABLE ref_clusters ADD PRIMARY KEY (id);
ANALYZE edges, ref_clusters;
DO \$\$ BEGIN LOOP
    UPDATE ref_clusters c SET representative = m.rep
    FROM (SELECT e.x AS id, min(c2.representative) AS rep FROM edges e JOIN ref_clusters c2 ON c2.id = e.y
          GROUP BY e.x) m
    WHERE c.id = m.id AND m.rep < c.representative;
    EXIT WHEN NOT FOUND;
END LOOP; END \$\$;"
timed "reference first-come" "
CREATE TABLE ref_kept AS SELECT id FROM src;
ALTER TABLE ref_kept ADD PRIMARY KEY (id);
CREATE INDEX ON ref_pairs (id_b);
ANALYZE ref_pairs, ref_kept;
DO \$\$ DECLARE r record; BEGIN
    -- Rows with a near-duplicate, in id order: dropped when an earlier kept row is within K.
    FOR r IN SELECT id FROM (SELECT id_a AS id FROM ref_pairs UNION SELECT id_b FROM ref_pairs) x ORDER BY id LOOP
        IF EXISTS (SELECT FROM ref_pairs p JOIN ref_kept k ON k.id = p.id_a WHERE p.id_b = r.id) THEN
            DELETE FROM ref_kept WHERE id = r.id;
        END IF;
    END LOOP;
END \$\$;"
psql -At -c "SELECT format('  reference: %s pairs, %s rows in %s clusters, %s rows kept of %s',
    (SELECT count(*) FROM ref_pairs), (SELECT count(*) FROM ref_clusters),
    (SELECT count(DISTINCT representative) FROM ref_clusters), (SELECT count(*) FROM ref_kept), $N)"

log "simhash_pairs and simhash_clusters through the simhash index"
timed "index on src" "CREATE INDEX src_code ON src USING simhash (code); ANALYZE src;"
timed "simhash_pairs" "CREATE TABLE got_pairs AS SELECT * FROM simhash_pairs('src', 'code', $K);"
timed "simhash_clusters" "CREATE TABLE got_clusters AS SELECT * FROM simhash_clusters('src', 'code', $K);"
check "simhash_pairs = self-join ($(psql -At -c 'SELECT count(*) FROM got_pairs') pairs)" "
SELECT count(*) FROM ((SELECT * FROM got_pairs EXCEPT SELECT * FROM ref_pairs)
                      UNION ALL (SELECT * FROM ref_pairs EXCEPT SELECT * FROM got_pairs)) d"
check "simhash_clusters = connected components of the pairs" "
SELECT count(*) FROM ((SELECT id, representative FROM got_clusters EXCEPT SELECT * FROM ref_clusters)
                      UNION ALL (SELECT * FROM ref_clusters EXCEPT SELECT id, representative FROM got_clusters)) d"

log "the constraint, action 'skip', with a simhash index"
psql -q -v ON_ERROR_STOP=1 -c "
CREATE TABLE by_insert (id integer PRIMARY KEY, code bit(256));
CREATE INDEX by_insert_code ON by_insert USING simhash (code);
CREATE TABLE by_copy (id integer PRIMARY KEY, code bit(256));
CREATE INDEX by_copy_code ON by_copy USING simhash (code);
CREATE TABLE by_whole (id integer PRIMARY KEY, code bit(256));
CREATE INDEX by_whole_code ON by_whole USING simhash (code);
CREATE TABLE by_deferred (id integer PRIMARY KEY, code bit(256));
CREATE INDEX by_deferred_code ON by_deferred USING simhash (code);
SELECT simhash_add_dedup('by_insert', 'code', $K, 'skip'), simhash_add_dedup('by_copy', 'code', $K, 'skip'),
       simhash_add_dedup('by_whole', 'code', $K, 'skip'),
       simhash_add_dedup('by_deferred', 'code', $K, 'skip', deferred => true);" >/dev/null
# (the NOTICE of the rows skipped left out; grep finds nothing else after the COPY)
timed "INSERT ... SELECT" "INSERT INTO by_insert SELECT id, code FROM src ORDER BY id;" 2>&1 | { grep -v NOTICE || true; }
t0=$(now)
psql -At -v ON_ERROR_STOP=1 -c "COPY (SELECT id, code FROM src ORDER BY id) TO STDOUT" \
    | psql -q -v ON_ERROR_STOP=1 -c "COPY by_copy FROM STDIN" 2>&1 | { grep -v NOTICE || true; }
echo "  COPY: $(elapsed "$t0") s"
timed "INSERT ... SELECT, tail read whole" "SET simhash.index_tail_memory = 0;
INSERT INTO by_whole SELECT id, code FROM src ORDER BY id;" 2>&1 | { grep -v NOTICE || true; }
timed "INSERT ... SELECT, deferred check" "INSERT INTO by_deferred SELECT id, code FROM src ORDER BY id;" 2>&1 | { grep -v NOTICE || true; }
for t in by_insert by_copy by_whole by_deferred; do
    check "$t keeps the first-come rows ($(psql -At -c "SELECT count(*) FROM $t") kept)" "
SELECT count(*) FROM ((SELECT id FROM $t EXCEPT SELECT id FROM ref_kept)
                      UNION ALL (SELECT id FROM ref_kept EXCEPT SELECT id FROM $t)) d"
done
echo "total: $(elapsed "$all0") s"
exit $status
