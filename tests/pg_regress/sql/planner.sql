-- The planner rewrite: fp <~> q <= k (k <= 11) becomes a BitmapOr over the four segment indexes.
CREATE TABLE docs (id int PRIMARY KEY, fp simhash64);
INSERT INTO docs SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 20000) i;
-- Near-duplicates of row 1 at distances 1, 2, 3 and 4.
INSERT INTO docs SELECT 100000 + d, (fp::bigint # ((1::bigint << d) - 1))::simhash64
FROM docs, generate_series(1, 4) d WHERE id = 1;
INSERT INTO docs VALUES (200000, NULL);
CREATE INDEX docs_segment_0 ON docs (simhash_segment(fp, 0));
CREATE INDEX docs_segment_1 ON docs (simhash_segment(fp, 1));
CREATE INDEX docs_segment_2 ON docs (simhash_segment(fp, 2));
CREATE INDEX docs_segment_3 ON docs (simhash_segment(fp, 3));
ANALYZE docs;
SELECT fp AS q FROM docs WHERE id = 1 \gset

-- A constant query fingerprint.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> :'q' <= 3;
SELECT id, fp <~> :'q' AS d FROM docs WHERE fp <~> :'q' <= 3 ORDER BY id;
-- The same through hamming(), the commuted form, <, BETWEEN and an int8 bound.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE 2 >= hamming(:'q', fp);
SELECT id FROM docs WHERE 2 >= hamming(:'q', fp) ORDER BY id;
SELECT id FROM docs WHERE fp <~> :'q' < 2 ORDER BY id;
SELECT id FROM docs WHERE 3 > fp <~> :'q' ORDER BY id;
SELECT id FROM docs WHERE fp <~> :'q' BETWEEN 2 AND 3 ORDER BY id;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> :'q' <= 1::bigint;
-- smallint bounds (some drivers send small integers as int2) and untyped literals rewrite too.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> :'q' <= 2::smallint;
SELECT id FROM docs WHERE fp <~> :'q' <= 2::smallint ORDER BY id;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE '1' >= fp <~> :'q';
SELECT id FROM docs WHERE '1' >= fp <~> :'q' ORDER BY id;
SELECT id FROM docs WHERE fp <~> :'q' <= 0 ORDER BY id;

-- A prepared lookup by text: simhash($1) is folded into a constant in custom plans ...
SELECT simhash('北京烤鸭') AS beijing \gset
UPDATE docs SET fp = :'beijing' WHERE id = 2;
PREPARE by_text(text) AS SELECT id FROM docs WHERE fp <~> simhash($1) <= 3;
EXPLAIN (COSTS OFF) EXECUTE by_text('北京烤鸭');
EXECUTE by_text('北京烤鸭');
-- ... and still uses the indexes in a generic plan, evaluated once per probe (memoised).
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE by_text('北京烤鸭');
EXECUTE by_text('北京烤鸭');
-- Any non-volatile expression of parameters is the same for every row too (the README's recipe
-- for long texts) ...
PREPARE by_long_text(text) AS
    SELECT id FROM docs WHERE fp <~> simhash($1, greatest(20, char_length($1) / 40)) <= 3;
EXPLAIN (COSTS OFF) EXECUTE by_long_text('北京烤鸭');
EXECUTE by_long_text('北京烤鸭');
-- ... but a volatile one could differ between the copies: no rewrite.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> simhash('北京烤鸭' || (random() * 0)::int) <= 3;
PREPARE by_fp(simhash64) AS SELECT id FROM docs WHERE fp <~> $1 <= 3 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE by_fp(:'q');
EXECUTE by_fp(:'q');
RESET plan_cache_mode;

-- A join: a parameterized nested loop probing the segment indexes for each outer row.
EXPLAIN (COSTS OFF)
SELECT a.id, b.id FROM docs a JOIN docs b ON a.fp <~> b.fp <= 3 AND a.id <> b.id WHERE a.id <= 3;
SELECT a.id, b.id, a.fp <~> b.fp AS d
FROM docs a JOIN docs b ON a.fp <~> b.fp <= 3 AND a.id <> b.id WHERE a.id <= 3 ORDER BY a.id, b.id;

-- Radii 4 to 7 probe each segment with the 17 values within one bit (here: a parameter, so the
-- probe sets are computed once per scan), 8 to 11 with the 137 values within two bits.
SET plan_cache_mode = force_generic_plan;
PREPARE within_7(simhash64) AS SELECT id FROM docs WHERE fp <~> $1 <= 7;
EXPLAIN (COSTS OFF) EXECUTE within_7(:'q');
RESET plan_cache_mode;
SELECT id FROM docs WHERE fp <~> :'q' <= 4 ORDER BY id;

-- No rewrite (and the same answers) where it cannot be exact or would duplicate work:
-- a radius above 11, a non-constant radius, a sub-select operand, a NULL radius.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> :'q' <= 12;
SELECT id FROM docs WHERE fp <~> :'q' <= 64 AND id > 100000 ORDER BY id;
SELECT count(*) FROM docs WHERE fp <~> :'q' < 0;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> (SELECT fp FROM docs WHERE id = 1) <= 3;
SELECT id FROM docs WHERE fp <~> (SELECT fp FROM docs WHERE id = 1) <= 3 ORDER BY id;
SET plan_cache_mode = force_generic_plan;
PREPARE by_radius(simhash64, int) AS SELECT id FROM docs WHERE fp <~> $1 <= $2 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE by_radius(:'q', 2);
EXECUTE by_radius(:'q', 2);
RESET plan_cache_mode;
SELECT count(*) FROM docs WHERE fp <~> :'q' <= NULL::int;
-- simhash() of a column would be computed five times per row: no rewrite.
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE simhash(id::text || ' 北京烤鸭') <~> :'q' <= 3;
-- A function of someone else's that is also called hamming() is left alone.
CREATE FUNCTION hamming(bigint, bigint) RETURNS simhash_distance
    AS 'SELECT abs($1 - $2)::int' LANGUAGE sql IMMUTABLE;
SELECT hamming(281474976710655, 281474976710656) <= 3 AS user_hamming_near;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE hamming(id::bigint, 7) <= 3;
DROP FUNCTION hamming(bigint, bigint);
-- The rewrite is exact in a select list too, NULL rows included.
SELECT id, fp <~> :'q' <= 3 AS near FROM docs WHERE id IN (1, 100004, 200000) ORDER BY id;
-- A pulled-up EXISTS subquery is simplified with the outer query's planner state: the rewrite
-- must not look its columns up in the wrong range table (this used to crash the backend).
CREATE TABLE other (id int, x int);
INSERT INTO other VALUES (1, 5), (2, 6);
SELECT o.id FROM other o WHERE o.x = 5 OR EXISTS
    (SELECT 1 FROM other o2, docs d WHERE d.fp <~> :'q' <= 3 AND d.id = o.id AND o2.id = d.id);
DROP TABLE other;

-- Without segment indexes the query is left as written: a plain sequential scan, same answer.
DROP INDEX docs_segment_0, docs_segment_1, docs_segment_2, docs_segment_3;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> :'q' <= 3;
SELECT id FROM docs WHERE fp <~> :'q' <= 3 ORDER BY id;

DROP TABLE docs;

-- A join of two columns with simhash indexes: fp <~> fp <= k becomes a test per side, one
-- condition; the row estimate counts it once (once: squared, 3 rows instead of about 1,600).
CREATE TABLE pa AS SELECT i AS id, simhash(i::text) AS fp FROM generate_series(1, 1000) i;
CREATE TABLE pb AS SELECT i AS id, simhash((-i)::text) AS fp FROM generate_series(1, 1000) i;
ANALYZE pa, pb;
CREATE FUNCTION pg_temp.estimate(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
CREATE INDEX pa_fp ON pa USING simhash (fp);
SELECT pg_temp.estimate('SELECT * FROM pa, pb WHERE pa.fp <~> pb.fp <= 20') AS one_index \gset
CREATE INDEX pb_fp ON pb USING simhash (fp);
SELECT pg_temp.estimate('SELECT * FROM pa, pb WHERE pa.fp <~> pb.fp <= 20') = :one_index AS same_with_two,
       :one_index > 100 AS above_100;
-- Restricted on either side, the join probes the other side's index: each index's cost counts
-- its own test in full (once, the side whose twin counted was costed as reading every row, and
-- a join restricted on the first table scanned the second).
ALTER TABLE pa ADD PRIMARY KEY (id);
ALTER TABLE pb ADD PRIMARY KEY (id);
ANALYZE pa, pb;
EXPLAIN (COSTS OFF) SELECT pa.id, pb.id FROM pa JOIN pb ON pa.fp <~> pb.fp <= 4 WHERE pa.id = 7;
EXPLAIN (COSTS OFF) SELECT pa.id, pb.id FROM pa JOIN pb ON pa.fp <~> pb.fp <= 4 WHERE pb.id = 7;
DROP TABLE pa, pb;
