-- ORDER BY fp <-> q [LIMIT n] through a simhash index: the rows nearest first, the same as a sort
-- of the table (the same distances in the same order, and the same rows ties aside), with the
-- rows whose fingerprint is NULL last; with LIMIT, joins (a rescan per outer row), a radius test
-- beside it, a work_mem so small that the scan drops rows and passes over the index again, and
-- after inserts, DELETE and VACUUM.
SET jit = off;
CREATE TABLE ord_docs (id int PRIMARY KEY, fp simhash64);
-- 30,000 random fingerprints (every 101st NULL), and near-duplicates planted at distances 0..20
-- around 10 of them.
INSERT INTO ord_docs
SELECT i, CASE WHEN i % 101 = 0 THEN NULL ELSE ('x' || substr(md5('ord' || i), 1, 16))::bit(64)::bigint::simhash64 END
FROM generate_series(1, 30000) i;
CREATE TABLE ord_queries AS SELECT id / 3000 AS j, fp FROM ord_docs WHERE id % 3000 = 1;
INSERT INTO ord_queries VALUES (100, '0123456789abcdef'), (101, 'ffffffffffffffff');
INSERT INTO ord_docs
SELECT 1000000 + q.j * 100 + d,
       (q.fp::bigint # coalesce((SELECT bit_or(1::bigint << ((q.j * 7 + t * 13) % 64))
                                 FROM generate_series(0, d - 1) t), 0))::simhash64
FROM ord_queries q, generate_series(0, 20) d WHERE q.j < 10;
CREATE INDEX ord_docs_fp ON ord_docs USING simhash (fp);
ANALYZE ord_docs;

-- The plans: an Index Scan with Order By, either side of <->, with a radius test, in a join.
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY fp <-> '0123456789abcdef' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY '0123456789abcdef' <-> fp LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs WHERE fp <~> '0123456789abcdef' <= 20 ORDER BY fp <-> '0123456789abcdef' LIMIT 10;
EXPLAIN (COSTS OFF)
SELECT q.j, d.id FROM ord_queries q CROSS JOIN LATERAL (SELECT id FROM ord_docs ORDER BY fp <-> q.fp LIMIT 3) d;
-- ORDER BY fp <~> q (whose domain PostgreSQL sorts as integer, which its own matching against
-- the index's ordering operator does not see through): the same index scan, which the planner
-- hook offers, with <-> in Order By; the same answers below.
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY fp <~> '0123456789abcdef' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id, fp <~> '0123456789abcdef' AS d FROM ord_docs ORDER BY d LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY '0123456789abcdef' <~> fp LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs WHERE fp <~> '0123456789abcdef' <= 20 ORDER BY fp <~> '0123456789abcdef' LIMIT 10;
EXPLAIN (COSTS OFF)
SELECT q.j, d.id FROM ord_queries q CROSS JOIN LATERAL (SELECT id FROM ord_docs ORDER BY fp <~> q.fp LIMIT 3) d;
-- Not for a descending order (as for <->), nor with the hook off.
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY fp <~> '0123456789abcdef' DESC LIMIT 10;
SET simhash.enable_rewrite = off;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY fp <~> '0123456789abcdef' LIMIT 10;
RESET simhash.enable_rewrite;
-- For every query point and LIMIT, <~> gives the rows and distances of <->, position by position.
CREATE FUNCTION ord_answers_of(tilde boolean)
RETURNS TABLE (j int, n int, pos bigint, id int, d int) LANGUAGE plpgsql AS $$
BEGIN
    IF tilde THEN
        RETURN QUERY SELECT q.j, u.n, s.pos, s.id, s.d
        FROM ord_queries q CROSS JOIN unnest(ARRAY[1, 10, 100, 1000]) u(n)
        CROSS JOIN LATERAL (SELECT row_number() OVER () AS pos, o.id, o.d
                            FROM (SELECT x.id, (x.fp <~> q.fp)::int AS d FROM ord_docs x ORDER BY x.fp <~> q.fp LIMIT u.n) o) s;
    ELSE
        RETURN QUERY SELECT q.j, u.n, s.pos, s.id, s.d
        FROM ord_queries q CROSS JOIN unnest(ARRAY[1, 10, 100, 1000]) u(n)
        CROSS JOIN LATERAL (SELECT row_number() OVER () AS pos, o.id, o.d
                            FROM (SELECT x.id, x.fp <-> q.fp AS d FROM ord_docs x ORDER BY x.fp <-> q.fp LIMIT u.n) o) s;
    END IF;
END
$$;
SELECT count(*) AS answers,
       count(*) FILTER (WHERE a.d IS DISTINCT FROM b.d) AS wrong_distances,
       count(*) FILTER (WHERE a.id IS DISTINCT FROM b.id) AS other_rows
FROM ord_answers_of(true) a FULL JOIN ord_answers_of(false) b USING (j, n, pos);
DROP FUNCTION ord_answers_of(boolean);

-- For every query point and LIMIT: (position, id, distance), through the index or through a sort.
CREATE FUNCTION ord_answers()
RETURNS TABLE (j int, n int, pos bigint, id int, d int) LANGUAGE sql AS $$
    SELECT q.j, n, s.pos, s.id, s.d
    FROM ord_queries q CROSS JOIN unnest(ARRAY[1, 10, 100, 1000, 40000]) n
    CROSS JOIN LATERAL (SELECT row_number() OVER () AS pos, o.id, o.fp <-> q.fp AS d
                        FROM (SELECT id, fp FROM ord_docs ORDER BY fp <-> q.fp LIMIT n) o) s
$$;
-- Differences between the index's answers and the sort's: distances at each position, and rows
-- nearer than the last distance returned (farther ones are ties cut by the LIMIT).
CREATE FUNCTION ord_check(label text)
RETURNS TABLE (stage text, answers bigint, wrong_distances bigint, wrong_rows bigint, nulls_not_last bigint)
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL enable_seqscan = off;
    SET LOCAL enable_bitmapscan = off;
    CREATE TEMP TABLE via_index AS SELECT * FROM ord_answers();
    SET LOCAL enable_seqscan = on;
    SET LOCAL enable_indexscan = off;
    CREATE TEMP TABLE via_sort AS SELECT * FROM ord_answers();
    RETURN QUERY
    WITH last AS (SELECT i.j, i.n, max(i.d) AS d FROM via_sort i GROUP BY 1, 2)
    SELECT label,
           (SELECT count(*) FROM via_index),
           (SELECT count(*) FROM via_index i FULL JOIN via_sort s USING (j, n, pos)
            WHERE i.d IS DISTINCT FROM s.d OR i.pos IS NULL OR s.pos IS NULL),
           (SELECT count(*) FROM ((SELECT i.j, i.n, i.id FROM via_index i JOIN last l USING (j, n) WHERE i.d < l.d
                                   EXCEPT ALL SELECT s.j, s.n, s.id FROM via_sort s JOIN last l USING (j, n) WHERE s.d < l.d)
                                  UNION ALL
                                  (SELECT s.j, s.n, s.id FROM via_sort s JOIN last l USING (j, n) WHERE s.d < l.d
                                   EXCEPT ALL SELECT i.j, i.n, i.id FROM via_index i JOIN last l USING (j, n) WHERE i.d < l.d)) x),
           (SELECT count(*) FROM via_index a JOIN via_index b ON (a.j, a.n) = (b.j, b.n) AND b.pos = a.pos + 1
            WHERE a.d IS NULL AND b.d IS NOT NULL);
    DROP TABLE via_index, via_sort;
END
$$;
SELECT * FROM ord_check('after the build');
-- A work_mem of 64kB: the scan keeps at most 8,192 rows waiting, drops the farthest and reads
-- segment 0 again for them.
SET work_mem = '64kB';
SELECT * FROM ord_check('with work_mem 64kB');
RESET work_mem;

-- Every row comes out once, the NULL ones last, in a full ordering.
SET enable_seqscan = off;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_rows, count(fp) AS not_null
FROM (SELECT id, fp FROM ord_docs ORDER BY fp <-> 'fedcba9876543210') o;
-- ORDER BY a NULL: every row, in no particular order.
SELECT count(*) FROM (SELECT id FROM ord_docs ORDER BY fp <-> NULL::simhash64) o;
-- ORDER BY a NULL parameter in a generic plan: the index scan, every row; with a second distance
-- after it, the rows ordered by that one.
SET plan_cache_mode = force_generic_plan;
PREPARE ord_one(simhash64) AS SELECT count(*) FROM (SELECT id FROM ord_docs ORDER BY fp <-> $1) o;
EXPLAIN (COSTS OFF) EXECUTE ord_one(NULL);
EXECUTE ord_one(NULL);
PREPARE ord_two(simhash64, simhash64) AS SELECT fp <-> $2 AS d FROM ord_docs ORDER BY fp <-> $1, fp <-> $2 LIMIT 100;
EXPLAIN (COSTS OFF) EXECUTE ord_two(NULL, '0123456789abcdef');
CREATE TEMP TABLE ord_two_out AS EXECUTE ord_two(NULL, '0123456789abcdef');
SELECT array_agg(d) = (SELECT array_agg(d) FROM (SELECT fp <-> '0123456789abcdef' AS d FROM ord_docs ORDER BY 1 LIMIT 100) x)
       AS ordered_by_the_second
FROM ord_two_out;
DEALLOCATE ord_one;
DEALLOCATE ord_two;
RESET plan_cache_mode;
-- A radius test and ORDER BY: the rows within the radius, nearest first.
SELECT array_agg(fp <-> '0123456789abcdef') = (SELECT array_agg(d ORDER BY d) FROM (SELECT fp <-> '0123456789abcdef' AS d FROM ord_docs WHERE fp <~> '0123456789abcdef' <= 22) x) AS same,
       count(*)
FROM (SELECT fp FROM ord_docs WHERE fp <~> '0123456789abcdef' <= 22 ORDER BY fp <-> '0123456789abcdef') o;
RESET enable_seqscan;

-- A partial simhash index whose predicate is the query's only condition: the scan of it (priced
-- out, but the only one left with sequential scans off on some versions) returns every row.
CREATE INDEX ord_docs_partial ON ord_docs USING simhash (fp) WHERE id % 7 = 0;
SELECT count(*) FROM ord_docs WHERE id % 7 = 0;
SET enable_seqscan = off;
SELECT count(*) FROM ord_docs WHERE id % 7 = 0;
SET enable_bitmapscan = off;
SELECT count(*) FROM ord_docs WHERE id % 7 = 0;
RESET enable_bitmapscan;
RESET enable_seqscan;
DROP INDEX ord_docs_partial;
-- A partial index serves ORDER BY fp <~> q only where the query implies its predicate, as for <->.
CREATE TABLE ord_part AS SELECT id, fp FROM ord_docs WHERE id <= 2000;
CREATE INDEX ord_part_fp ON ord_part USING simhash (fp) WHERE id % 2 = 0;
ANALYZE ord_part;
EXPLAIN (COSTS OFF) SELECT id FROM ord_part ORDER BY fp <~> '0123456789abcdef' LIMIT 5;
SELECT count(*) FILTER (WHERE id % 2 = 1) AS odd_rows
FROM (SELECT id FROM ord_part ORDER BY fp <~> '0123456789abcdef' LIMIT 20) s;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ord_part WHERE id % 2 = 0 ORDER BY fp <~> '0123456789abcdef' LIMIT 5;
RESET enable_seqscan;
DROP TABLE ord_part;

-- After inserts into the built index (NULL ones too), then DELETE and VACUUM.
INSERT INTO ord_docs
SELECT i, CASE WHEN i % 53 = 0 THEN NULL ELSE ('x' || substr(md5('more' || i), 1, 16))::bit(64)::bigint::simhash64 END
FROM generate_series(30001, 45000) i;
SELECT * FROM ord_check('after inserts');
DELETE FROM ord_docs WHERE id % 3 = 0;
VACUUM ord_docs;
SELECT simhash_index_check('ord_docs_fp') = (SELECT count(*) FROM ord_docs) AS check_counts_rows;
SELECT * FROM ord_check('after DELETE and VACUUM');

-- Two distances: the index orders by the first and the executor sorts each run of equal first
-- distances by the second (the index hands it the first distance and a lower bound of the second).
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM ord_docs ORDER BY fp <-> '0123456789abcdef', fp <-> 'fedcba9876543210' LIMIT 10;
CREATE TEMP TABLE two_index AS
SELECT row_number() OVER () AS pos, fp <-> '0123456789abcdef' AS d1, fp <-> 'fedcba9876543210' AS d2
FROM (SELECT fp FROM ord_docs ORDER BY fp <-> '0123456789abcdef', fp <-> 'fedcba9876543210') o;
RESET enable_seqscan;
SET enable_indexscan = off;
CREATE TEMP TABLE two_sort AS
SELECT row_number() OVER () AS pos, fp <-> '0123456789abcdef' AS d1, fp <-> 'fedcba9876543210' AS d2
FROM (SELECT fp FROM ord_docs ORDER BY fp <-> '0123456789abcdef', fp <-> 'fedcba9876543210') o;
RESET enable_indexscan;
SELECT count(*) AS rows, count(*) FILTER (WHERE (i.d1, i.d2) IS DISTINCT FROM (s.d1, s.d2)) AS different
FROM two_index i FULL JOIN two_sort s USING (pos);

DROP TABLE ord_docs, ord_queries, two_index, two_sort, ord_two_out;
DROP FUNCTION ord_answers(), ord_check(text);
-- A partitioned table: ORDER BY fp <~> q LIMIT n (as fp <-> q) is a Merge Append of each
-- partition's ordered index scan (once, on 18: a sort of every row for <~>).
CREATE TABLE ord_parts (id int, fp simhash64) PARTITION BY RANGE (id);
CREATE TABLE ord_parts_1 PARTITION OF ord_parts FOR VALUES FROM (0) TO (1000);
CREATE TABLE ord_parts_2 PARTITION OF ord_parts FOR VALUES FROM (1000) TO (2001);
INSERT INTO ord_parts SELECT i, simhash(i::text) FROM generate_series(0, 2000) i;
CREATE INDEX ord_parts_fp ON ord_parts USING simhash (fp);
ANALYZE ord_parts;
SET plan_cache_mode = force_generic_plan;
PREPARE ord_parts_nearest(simhash64) AS SELECT id FROM ord_parts ORDER BY fp <~> $1 LIMIT 5;
EXPLAIN (COSTS OFF) EXECUTE ord_parts_nearest('0123456789abcdef');
RESET plan_cache_mode;
DROP TABLE ord_parts;
