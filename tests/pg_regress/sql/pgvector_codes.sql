-- needs: vector
-- pgvector's queries on a bit column served by a simhash index (src/lookup/codes.rs): the planner
-- hook finds pgvector's `code <~> q <= k` (its hamming_distance, float8, under pg_catalog's float8
-- comparisons) and `ORDER BY code <~> q` and offers the index with `code <@ simhash_code_ball(q, k)`
-- or `ORDER BY code <~> simhash_code_ball(q, 0)`: the same rows as a sequential scan. An operator
-- `<~>` on bit that is not pgvector's is left alone. (bit_codes, bit_index: the extension's own
-- spelling.)
\set VERBOSITY sqlstate
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE items (id int PRIMARY KEY, code bit(128));
INSERT INTO items SELECT i, ('x' || md5(i::text))::bit(128) FROM generate_series(1, 5000) i;
-- Copies of item 7 at 1..12 bits.
INSERT INTO items SELECT 10000 + d, code # (repeat('1', d) || repeat('0', 128 - d))::bit(128)
FROM items, generate_series(1, 12) d WHERE id = 7;
INSERT INTO items VALUES (20000, NULL);
CREATE INDEX items_code ON items USING simhash (code);
ANALYZE items;
CREATE TEMP TABLE q AS SELECT code AS q FROM items WHERE id = 7;
SELECT q AS q7 FROM q \gset

-- The plans: a constant query code (a psql variable) in every form of the radius test.
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE code <~> :'q7'::bit(128) <= 5;
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE :'q7'::bit(128) <~> code < 5.5;
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE 5 >= hamming_distance(code, :'q7'::bit(128));
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY code <~> :'q7'::bit(128) LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE code <~> :'q7'::bit(128) <= 5 ORDER BY code <~> :'q7'::bit(128) LIMIT 3;
-- A generic plan: the query code a parameter.
PREPARE near(bit) AS SELECT id FROM items WHERE code <~> $1 <= 5 ORDER BY code <~> $1, id;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE near(B'1');
EXECUTE near(:'q7');
RESET plan_cache_mode;

-- The rows: through the index equal a sequential scan's, for every form and radius.
CREATE FUNCTION pg_temp.rows(test text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
    EXECUTE format('SELECT array_agg(id ORDER BY id) FROM items, q WHERE %s', test) INTO r;
    RETURN r;
END $$;
CREATE TEMP TABLE tests AS SELECT t, k FROM unnest(ARRAY[
    'code <~> q <= %s', 'code <~> q < %s', '%s >= q <~> code', '%s > code <~> q',
    'hamming_distance(code, q) <= %s']) t, unnest(ARRAY['0', '3', '3.5', '8', '12', '40', '-1', '''NaN''']) k;
SET enable_seqscan = off;
CREATE TEMP TABLE through_index AS SELECT t, k, pg_temp.rows(format(t, k)) AS r FROM tests;
RESET enable_seqscan;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
CREATE TEMP TABLE by_scan AS SELECT t, k, pg_temp.rows(format(t, k)) AS r FROM tests;
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT count(*) AS tests, count(*) FILTER (WHERE i.r IS DISTINCT FROM s.r) AS differ,
       count(*) FILTER (WHERE i.r IS NOT NULL) AS with_rows
FROM through_index i JOIN by_scan s USING (t, k);
-- A join, pgvector's a.code <~> b.code <= k: the inner side probes its index once per outer row
-- (a left join too); the rows of a nested loop over every pair.
CREATE TABLE probes AS SELECT id, code FROM items WHERE id IN (7, 100, 10005, 20000);
ANALYZE probes;
EXPLAIN (COSTS OFF) SELECT p.id, i.id FROM probes p JOIN items i ON i.code <~> p.code <= 5;
EXPLAIN (COSTS OFF) SELECT p.id, i.id FROM probes p LEFT JOIN items i ON p.code <~> i.code < 5.5 WHERE p.id = 7;
CREATE TEMP TABLE join_by_index AS SELECT p.id AS p, i.id AS i FROM probes p LEFT JOIN items i ON i.code <~> p.code <= 5;
SET simhash.enable_rewrite = off;
EXPLAIN (COSTS OFF) SELECT p.id, i.id FROM probes p JOIN items i ON i.code <~> p.code <= 5;
CREATE TEMP TABLE join_by_scan AS SELECT p.id AS p, i.id AS i FROM probes p LEFT JOIN items i ON i.code <~> p.code <= 5;
RESET simhash.enable_rewrite;
SELECT (SELECT count(*) FROM join_by_index) AS pairs, (SELECT count(*) FROM join_by_index WHERE i IS NULL) AS unmatched,
       NOT EXISTS ((TABLE join_by_index EXCEPT TABLE join_by_scan) UNION ALL (TABLE join_by_scan EXCEPT TABLE join_by_index)) AS same;
-- The clause of an outer join that commutes with another, on the other side's nullable columns
-- (on PostgreSQL 16 and later planned in two versions, neither of which an index path may take:
-- once, a path made of one crashed the backend), and one reading two tables: the rows of the scan.
CREATE TABLE probe_ids AS SELECT id FROM probes UNION ALL SELECT 99999;
CREATE TEMP TABLE outer_by_index AS
SELECT r.id AS r, i.id AS i, j.id AS j FROM probe_ids r LEFT JOIN probes p ON p.id = r.id
    LEFT JOIN items i ON i.code <~> p.code <= 5
    LEFT JOIN items j ON j.code <~> coalesce(p.code, i.code) <= 1;
SET simhash.enable_rewrite = off;
CREATE TEMP TABLE outer_by_scan AS
SELECT r.id AS r, i.id AS i, j.id AS j FROM probe_ids r LEFT JOIN probes p ON p.id = r.id
    LEFT JOIN items i ON i.code <~> p.code <= 5
    LEFT JOIN items j ON j.code <~> coalesce(p.code, i.code) <= 1;
RESET simhash.enable_rewrite;
SELECT (SELECT count(*) FROM outer_by_index) AS rows,
       NOT EXISTS ((TABLE outer_by_index EXCEPT ALL TABLE outer_by_scan) UNION ALL (TABLE outer_by_scan EXCEPT ALL TABLE outer_by_index)) AS same;
-- Under a row security policy the join test (not leakproof) runs after the policy, never as an
-- index condition below it; the role sees its own rows only. (Without a policy: the index.)
CREATE ROLE simhash_codes_rls;
CREATE TABLE owned AS SELECT id, CASE WHEN id % 2 = 0 THEN 'simhash_codes_rls' ELSE 'someone' END AS owner, code FROM items;
CREATE INDEX owned_code ON owned USING simhash (code);
ALTER TABLE owned ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON owned USING (owner = current_user);
GRANT SELECT ON owned, probes TO simhash_codes_rls;
ANALYZE owned;
SET ROLE simhash_codes_rls;
EXPLAIN (COSTS OFF) SELECT p.id, o.id FROM probes p JOIN owned o ON o.code <~> p.code <= 5;
SELECT count(*) AS pairs, bool_and(o.id % 2 = 0) AS own_rows_only FROM probes p JOIN owned o ON o.code <~> p.code <= 5;
RESET ROLE;
DROP TABLE owned, probes, probe_ids;
DROP ROLE simhash_codes_rls;
-- Nearest rows: the same order as a sort, NULL last.
SET enable_seqscan = off;
SELECT array_agg(id) AS through_index FROM (SELECT id FROM items, q ORDER BY code <~> q LIMIT 14) s;
RESET enable_seqscan;
SELECT array_agg(id ORDER BY d, id) AS by_sort FROM (SELECT id, code <~> q AS d FROM items, q ORDER BY d LIMIT 14) s;

-- With pgvector's HNSW on the same column too, simhash.enable_rewrite = off leaves <~> to it.
CREATE INDEX items_hnsw ON items USING hnsw (code bit_hamming_ops);
SET simhash.enable_rewrite = off;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY code <~> :'q7'::bit(128) LIMIT 3;
RESET simhash.enable_rewrite;
DROP INDEX items_hnsw;

-- An operator <~> on bit whose function is named hamming_distance but is not pgvector's is not
-- taken for it.
CREATE SCHEMA other;
CREATE FUNCTION other.hamming_distance(bit, bit) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN 0; END';
CREATE OPERATOR other.<~> (LEFTARG = bit, RIGHTARG = bit, FUNCTION = other.hamming_distance);
EXPLAIN (COSTS OFF) SELECT id FROM items WHERE code OPERATOR(other.<~>) :'q7'::bit(128) <= 5;
SET client_min_messages = warning;
DROP SCHEMA other CASCADE;
RESET client_min_messages;

-- Both indexes on one column, 12,000 rows: ORDER BY code <~> q LIMIT 10 takes the simhash index
-- (exact, its first rows near the query) over HNSW (approximate); without LIMIT the index still
-- orders every row. (once: costed as a read of every code before the first row, HNSW won)
CREATE TABLE both_idx AS SELECT i AS id, ('x' || md5(i::text))::bit(64) AS code FROM generate_series(1, 12000) i;
CREATE INDEX both_idx_simhash ON both_idx USING simhash (code);
CREATE INDEX both_idx_hnsw ON both_idx USING hnsw (code bit_hamming_ops);
ANALYZE both_idx;
SET plan_cache_mode = force_generic_plan;
PREPARE both_10(bit) AS SELECT id FROM both_idx ORDER BY code <~> $1 LIMIT 10;
PREPARE both_10_own(bit) AS SELECT id FROM both_idx ORDER BY simhash_hamming(code, $1) LIMIT 10;
EXPLAIN (COSTS OFF) EXECUTE both_10(B'1');
EXPLAIN (COSTS OFF) EXECUTE both_10_own(B'1');
RESET plan_cache_mode;
SELECT array(SELECT code <~> ('x' || md5('77'))::bit(64) FROM both_idx ORDER BY code <~> ('x' || md5('77'))::bit(64) LIMIT 10)
     = array(SELECT bit_count(code # ('x' || md5('77'))::bit(64))::float8 FROM both_idx ORDER BY 1 LIMIT 10) AS exact;
DROP TABLE both_idx;

-- A partitioned table: pgvector's ORDER BY code <~> q LIMIT n, a Merge Append of each
-- partition's ordered scan of its simhash index (once, on 18: a sort of every row).
CREATE TABLE vparts (id int, code bit(64)) PARTITION BY RANGE (id);
CREATE TABLE vparts_1 PARTITION OF vparts FOR VALUES FROM (0) TO (3000);
CREATE TABLE vparts_2 PARTITION OF vparts FOR VALUES FROM (3000) TO (6000);
INSERT INTO vparts SELECT i, ('x' || md5(i::text))::bit(64) FROM generate_series(0, 5999) i;
CREATE INDEX vparts_code ON vparts USING simhash (code);
ANALYZE vparts;
SET plan_cache_mode = force_generic_plan;
PREPARE vparts_nearest(bit) AS SELECT id FROM vparts ORDER BY code <~> $1 LIMIT 5;
EXPLAIN (COSTS OFF) EXECUTE vparts_nearest(B'1');
RESET plan_cache_mode;
DROP TABLE vparts;

-- pgvector's binary quantization without a bit column (its documented form: the index on
-- binary_quantize(embedding)::bit(n), the query on the same expression), any dimension: a simhash
-- index on that expression serves pgvector's ORDER BY ... <~> ... LIMIT n and radius test as
-- written, and simhash_hamming of the expression <= k; the rows equal a sequential scan's.
CREATE TABLE embeddings (id int PRIMARY KEY, embedding vector(256));
INSERT INTO embeddings SELECT i, (SELECT array_agg(sin(i * 7.1 + d * 1.3 + i * d * 0.37) ORDER BY d) FROM generate_series(1, 256) d)::vector
FROM generate_series(1, 3000) i;
-- Copies of row 7 with its first d dimensions negated: codes d bits away.
INSERT INTO embeddings SELECT 10000 + d, (SELECT array_agg(CASE WHEN n <= d THEN -x ELSE x END ORDER BY n)
    FROM unnest(embedding::real[]) WITH ORDINALITY u(x, n))::vector
FROM embeddings, generate_series(1, 12) d WHERE id = 7;
CREATE INDEX embeddings_bq ON embeddings USING simhash ((binary_quantize(embedding)::bit(256)));
ANALYZE embeddings;
SET plan_cache_mode = force_generic_plan;
PREPARE bq_nearest(vector) AS SELECT id FROM embeddings ORDER BY binary_quantize(embedding)::bit(256) <~> binary_quantize($1) LIMIT 5;
PREPARE bq_radius(vector) AS SELECT id FROM embeddings WHERE binary_quantize(embedding)::bit(256) <~> binary_quantize($1) <= 6;
PREPARE bq_hamming(vector) AS SELECT id FROM embeddings WHERE simhash_hamming(binary_quantize(embedding)::bit(256), binary_quantize($1)) <= 6;
EXPLAIN (COSTS OFF) EXECUTE bq_nearest('[1,2,3]');
EXPLAIN (COSTS OFF) EXECUTE bq_radius('[1,2,3]');
EXPLAIN (COSTS OFF) EXECUTE bq_hamming('[1,2,3]');
RESET plan_cache_mode;
CREATE TEMP TABLE bq_q AS SELECT embedding AS e FROM embeddings WHERE id IN (7, 1500, 10003);
SET enable_seqscan = off;
CREATE TEMP TABLE bq_by_index AS SELECT e,
    array(SELECT id FROM embeddings WHERE binary_quantize(embedding)::bit(256) <~> binary_quantize(e) <= 8 ORDER BY id) AS pgvector_radius,
    array(SELECT id FROM embeddings WHERE simhash_hamming(binary_quantize(embedding)::bit(256), binary_quantize(e)) <= 8 ORDER BY id) AS hamming_radius,
    array(SELECT binary_quantize(embedding)::bit(256) <~> binary_quantize(e) FROM embeddings
          ORDER BY binary_quantize(embedding)::bit(256) <~> binary_quantize(e) LIMIT 15) AS nearest
FROM bq_q;
RESET enable_seqscan;
SELECT count(*) AS queries,
       bool_and(pgvector_radius = array(SELECT id FROM embeddings WHERE bit_count(binary_quantize(embedding) # binary_quantize(e)) <= 8 ORDER BY id)) AS radius_same,
       bool_and(hamming_radius = pgvector_radius) AS hamming_same,
       bool_and(nearest = array(SELECT bit_count(binary_quantize(embedding) # binary_quantize(e))::float8 FROM embeddings ORDER BY 1 LIMIT 15)) AS nearest_same,
       min(cardinality(pgvector_radius)) AS fewest_rows
FROM bq_by_index;
DROP TABLE embeddings;
