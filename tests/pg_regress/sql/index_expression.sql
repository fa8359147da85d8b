-- A simhash index on an expression: `USING simhash ((code::simhash64))` over a bit(64) column and
-- `USING simhash ((minhash64(body)))` without a stored fingerprint. The radius test written on that
-- expression, `expr <~> q <= k` (either side, <, hamming(), commuted, in a join, of two such
-- expressions), becomes the index's operator and is answered by the index, with the rows a
-- sequential scan finds; not where the index is partial, the other side depends on the same row,
-- or the expression is volatile.
SET jit = off;
CREATE TABLE expr_docs (id int PRIMARY KEY, code bit(64), body text);
INSERT INTO expr_docs
SELECT i, ('x' || substr(md5('expr' || i), 1, 16))::bit(64),
       'document ' || (i % 500) || ' about ' || md5((i % 500)::text) || CASE WHEN i % 3 = 0 THEN ' again' ELSE '' END
FROM generate_series(1, 5000) i;
-- near copies of code 7 at distances 1..12
INSERT INTO expr_docs
SELECT 10000 + d, (SELECT code FROM expr_docs WHERE id = 7) # (repeat('1', d) || repeat('0', 64 - d))::bit(64), NULL
FROM generate_series(1, 12) d;
CREATE INDEX expr_docs_code ON expr_docs USING simhash ((code::simhash64));
CREATE INDEX expr_docs_body ON expr_docs USING simhash ((minhash64(body)));
ANALYZE expr_docs;
CREATE TABLE expr_queries AS SELECT id AS j, code, code::simhash64 AS fp FROM expr_docs WHERE id IN (7, 100);

-- The plans: index scans on the expression's index.
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE code::simhash64 <~> X'0123456789abcdef'::simhash64 <= 9;
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE X'0123456789abcdef'::simhash64 <~> code::simhash64 < 10;
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE 9 >= hamming(code::simhash64, '0123456789abcdef');
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE minhash64(body) <~> minhash64('document 7 about x') <= 9;
EXPLAIN (COSTS OFF)
SELECT q.j, d.id FROM expr_queries q JOIN expr_docs d ON d.code::simhash64 <~> q.fp <= 4;
-- Not rewritten: the other side is of the same row; a volatile expression.
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE code::simhash64 <~> minhash64(body) <= 9;
EXPLAIN (COSTS OFF)
SELECT id FROM expr_docs WHERE (code::bigint # (random() * 0)::bigint)::simhash64 <~> '0123456789abcdef' <= 9;

-- The same rows as the sequential scan (the rewrite off), at every radius, for two query points
-- and the join.
CREATE FUNCTION expr_found(k int) RETURNS TABLE (j int, n bigint, ids int[]) LANGUAGE sql AS $$
  SELECT q.j, count(*), array_agg(d.id ORDER BY d.id)
  FROM expr_queries q JOIN expr_docs d ON d.code::simhash64 <~> q.fp <= k GROUP BY q.j ORDER BY q.j
$$;
CREATE TEMP TABLE with_index AS
SELECT k, f.* FROM generate_series(0, 24, 3) k, expr_found(k) f;
SET simhash.enable_rewrite = off;
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE code::simhash64 <~> X'0123456789abcdef'::simhash64 <= 9;
CREATE TEMP TABLE by_scan AS
SELECT k, f.* FROM generate_series(0, 24, 3) k, expr_found(k) f;
RESET simhash.enable_rewrite;
SELECT count(*) AS radii_and_queries, sum(n) AS rows_found FROM with_index;
(SELECT * FROM with_index EXCEPT SELECT * FROM by_scan) UNION ALL (SELECT * FROM by_scan EXCEPT SELECT * FROM with_index);
-- minhash64(body) through its index: the same count as the scan.
SELECT count(*) FROM expr_docs WHERE minhash64(body) <~> minhash64('document 7 about ' || md5('7') || ' again') <= 9;
SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM expr_docs WHERE minhash64(body) <~> minhash64('document 7 about ' || md5('7') || ' again') <= 9;
RESET enable_indexscan; RESET enable_bitmapscan;

-- A join of two indexed expressions: one test per side, each probing its own index, whichever
-- side is restricted; counted once in the row estimate; the rows of a scan.
CREATE TABLE expr_docs2 AS SELECT id, code FROM expr_docs;
CREATE INDEX expr_docs2_code ON expr_docs2 USING simhash ((code::simhash64));
ANALYZE expr_docs2;
EXPLAIN (COSTS OFF)
SELECT a.id, b.id FROM expr_docs a JOIN expr_docs2 b ON a.code::simhash64 <~> b.code::simhash64 <= 4 WHERE a.id = 7;
EXPLAIN (COSTS OFF)
SELECT a.id, b.id FROM expr_docs a JOIN expr_docs2 b ON a.code::simhash64 <~> b.code::simhash64 <= 4 WHERE b.id = 7;
CREATE FUNCTION pg_temp.estimate(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
SELECT pg_temp.estimate('SELECT * FROM expr_docs a, expr_docs2 b WHERE a.code::simhash64 <~> b.code::simhash64 <= 20')
     = pg_temp.estimate('SELECT * FROM expr_docs a, expr_docs2 b WHERE a.code::simhash64 <@ simhash_ball(b.code::simhash64, 20)') AS counted_once;
SELECT array_agg(a.id ORDER BY a.id) AS through_index FROM expr_docs a JOIN expr_docs2 b ON a.code::simhash64 <~> b.code::simhash64 <= 4 WHERE b.id = 7;
SET simhash.enable_rewrite = off;
SELECT array_agg(a.id ORDER BY a.id) AS by_scan FROM expr_docs a JOIN expr_docs2 b ON a.code::simhash64 <~> b.code::simhash64 <= 4 WHERE b.id = 7;
RESET simhash.enable_rewrite;
DROP TABLE expr_docs2;

-- A partial index on the expression is not used by the rewrite.
DROP INDEX expr_docs_code;
CREATE INDEX expr_docs_code_partial ON expr_docs USING simhash ((code::simhash64)) WHERE id > 0;
EXPLAIN (COSTS OFF) SELECT id FROM expr_docs WHERE code::simhash64 <~> X'0123456789abcdef'::simhash64 <= 9;
DROP TABLE expr_docs, expr_queries;
DROP FUNCTION expr_found;
