-- The simhash index of bit(n) codes (src/index/codes/): radius lookups and nearest rows through
-- the index equal to a sequential scan of bit_count(code # q), after the build, after inserts,
-- after DELETE and VACUUM; NULL codes; codes of another length; simhash_index_check.
SET jit = off;
\set VERBOSITY sqlstate
-- A code of 256 (or 1,024) bits from a seed, and a sparse mask (each bit set with probability
-- 2^-n): planted near-duplicates are a group's code XOR a mask.
CREATE FUNCTION pg_temp.code256(seed text) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT simhash_code(decode(md5(seed || 'a') || md5(seed || 'b'), 'hex'))::bit(256) $$;
CREATE FUNCTION pg_temp.mask256(seed text, n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT bit_and(pg_temp.code256(seed || '/' || j)) FROM generate_series(1, n) j $$;
CREATE FUNCTION pg_temp.code1024(seed text) RETURNS bit(1024) LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_temp.code256(seed || 1) || pg_temp.code256(seed || 2) || pg_temp.code256(seed || 3) || pg_temp.code256(seed || 4) $$;
CREATE FUNCTION pg_temp.mask1024(seed text, n int) RETURNS bit(1024) LANGUAGE sql IMMUTABLE
    AS $$ SELECT bit_and(pg_temp.code1024(seed || '/' || j)) FROM generate_series(1, n) j $$;

-- 20,000 rows of bit(256): groups of 10, two exact copies of the group's code, eight near copies
-- (about 32, 16, 8 or 4 bits away).
CREATE TABLE c256 (i int PRIMARY KEY, code bit(256));
INSERT INTO c256 SELECT i, CASE WHEN i % 10 < 2 THEN pg_temp.code256((i / 10)::text)
    ELSE pg_temp.code256((i / 10)::text) # pg_temp.mask256(i::text, 3 + i % 4) END
FROM generate_series(0, 19999) i;
INSERT INTO c256 VALUES (-1, NULL), (-2, NULL);
CREATE INDEX c256_code ON c256 USING simhash (code);
ANALYZE c256;
SELECT simhash_index_check('c256_code') AS indexed, (SELECT count(*) FROM c256) AS rows;
-- Queries: stored codes, a stored code with 3 bits flipped, a code of no row.
CREATE TABLE q256 (n int, q bit(256));
INSERT INTO q256 SELECT i, code FROM c256 WHERE i IN (7, 1234, 19999);
INSERT INTO q256 SELECT 4, code # (B'111' || repeat('0', 253)::bit(253)) FROM c256 WHERE i = 555;
INSERT INTO q256 VALUES (5, pg_temp.code256('no row'));
UPDATE q256 SET n = s.n FROM (SELECT q, row_number() OVER (ORDER BY q) AS n FROM q256) s WHERE q256.q = s.q;

-- Through the index (an index scan, then a bitmap scan) and by a sequential scan: the same rows.
CREATE FUNCTION pg_temp.compare(tbl regclass, ks int[]) RETURNS TABLE (k int, matches bigint, differ bigint)
LANGUAGE plpgsql AS $$
DECLARE through text; brute text;
BEGIN
    FOREACH k IN ARRAY ks LOOP
        through := format('SELECT i FROM %s, q256 WHERE code <@ simhash_code_ball(q, %s)', tbl, k);
        brute := format('SELECT i FROM %s, q256 WHERE bit_count(code # q) <= %s', tbl, k);
        SET LOCAL enable_seqscan = off;
        EXECUTE format('SELECT count(*) FROM (%s) m', through) INTO matches;
        EXECUTE format('SELECT count(*) FROM ((%s EXCEPT ALL %s) UNION ALL (%s EXCEPT ALL %s)) d',
                       through, brute, brute, through) INTO differ;
        RESET enable_seqscan;
        RETURN NEXT;
    END LOOP;
END $$;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT i FROM c256, q256 WHERE code <@ simhash_code_ball(q, 8);
SELECT * FROM pg_temp.compare('c256', ARRAY[0, 2, 5, 8, 12, 16, 24, 32, 40, 100, 128]);
RESET enable_bitmapscan;
SET enable_indexscan = off;
SELECT * FROM pg_temp.compare('c256', ARRAY[0, 8, 16, 32, 40, 128]);
RESET enable_indexscan;
-- Candidates beyond work_mem: the code store read in passes instead (still exact).
SET work_mem = 64;
SELECT * FROM pg_temp.compare('c256', ARRAY[24, 40, 128]);
RESET work_mem;
-- A build of 16,384 rows or more makes the segments' entries on a second thread while parallel
-- maintenance workers are allowed, else on the backend's own: the same answers either way (every
-- segment indexed). A DEBUG1 message says which way each build went.
CREATE TABLE c256t AS SELECT * FROM c256;
SET max_parallel_maintenance_workers = 0;
\set VERBOSITY default
SET client_min_messages = debug1;
CREATE INDEX c256t_code ON c256t USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
\set VERBOSITY sqlstate
SELECT simhash_index_check('c256t_code') AS indexed;
SELECT * FROM pg_temp.compare('c256t', ARRAY[0, 8, 24, 40, 128]);
DROP INDEX c256t_code;
SET max_parallel_maintenance_workers = 2;
\set VERBOSITY default
SET client_min_messages = debug1;
CREATE INDEX c256t_code ON c256t USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
\set VERBOSITY sqlstate
SELECT simhash_index_check('c256t_code') AS indexed;
SELECT * FROM pg_temp.compare('c256t', ARRAY[0, 8, 24, 40, 128]);
RESET max_parallel_maintenance_workers;
DROP TABLE c256t;

-- An inner index scan of a nested loop is rescanned for every outer row: what a rescan allocates
-- must not stay until the end of the query (it did: each outer row's scan key, its code detoasted
-- in the executor's context). The executor's memory, read every 500 outer rows,
-- grows by less than 64 kB over 20,000 rescans, for a radius and for nearest rows.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
CREATE FUNCTION pg_temp.executor_bytes() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT sum(used_bytes)::bigint FROM pg_backend_memory_contexts WHERE name = 'ExecutorState' $$;
EXPLAIN (COSTS OFF) SELECT count(*) FROM c256 a JOIN c256 b ON b.code <@ simhash_code_ball(a.code, 0);
SELECT max(used) - min(used) < 65536 AS radius_rescans_keep_nothing FROM (
    SELECT CASE WHEN a.i % 500 = 0 AND a.i = b.i THEN pg_temp.executor_bytes() END AS used
    FROM c256 a JOIN c256 b ON b.code <@ simhash_code_ball(a.code, 0)) s;
SELECT max(used) - min(used) < 65536 AS nearest_rescans_keep_nothing FROM (
    SELECT CASE WHEN a.i % 500 = 0 THEN pg_temp.executor_bytes() END AS used
    FROM c256 a CROSS JOIN LATERAL (SELECT b.i FROM c256 b ORDER BY b.code <-> simhash_code_ball(a.code, 0) LIMIT 1) n) s;
RESET enable_hashjoin;
RESET enable_mergejoin;

-- The planner takes the index for a selective ball, the sequential scan for one that reads all.
-- (generic plans: the query code a parameter, printed alike on 15 and 18)
SET plan_cache_mode = force_generic_plan;
PREPARE ball_16(bit) AS SELECT i FROM c256 WHERE code <@ simhash_code_ball($1, 16);
PREPARE ball_128(bit) AS SELECT i FROM c256 WHERE code <@ simhash_code_ball($1, 128);
EXPLAIN (COSTS OFF) EXECUTE ball_16(B'1');
EXPLAIN (COSTS OFF) EXECUTE ball_128(B'1');

-- Nearest rows: nearest first, ties in table order, NULL codes last (every row).
CREATE FUNCTION pg_temp.same_order(tbl regclass, lim int) RETURNS TABLE (n int, same boolean)
LANGUAGE plpgsql AS $$
DECLARE a tid[]; b tid[];
BEGIN
    FOR n IN SELECT q256.n FROM q256 ORDER BY 1 LOOP
        SET LOCAL enable_seqscan = off;
        EXECUTE format('SELECT array(SELECT ctid FROM %s ORDER BY code <-> simhash_code_ball((SELECT q FROM q256 WHERE n = %s), 0) LIMIT %s)', tbl, n, lim) INTO a;
        RESET enable_seqscan;
        EXECUTE format('SELECT array(SELECT ctid FROM %s ORDER BY bit_count(code # (SELECT q FROM q256 WHERE n = %s)) NULLS LAST, ctid LIMIT %s)', tbl, n, lim) INTO b;
        same := a = b AND cardinality(a) = least(lim, (SELECT count(*) FROM c256));
        RETURN NEXT;
    END LOOP;
END $$;
SET enable_seqscan = off;
PREPARE nearest_10(bit) AS SELECT i FROM c256 ORDER BY code <-> simhash_code_ball($1, 0) LIMIT 10;
EXPLAIN (COSTS OFF) EXECUTE nearest_10(B'1');
RESET enable_seqscan;
RESET plan_cache_mode;
SELECT * FROM pg_temp.same_order('c256', 10);
SELECT * FROM pg_temp.same_order('c256', 1000) WHERE n <= 2;
-- Two distances in ORDER BY, the first as float8 (<~>, strategy 3): the index orders by the
-- first and hands both to the executor (whose reorder queue loses the rows' ctid: compared by i).
SET enable_seqscan = off;
SELECT array(SELECT i FROM c256 ORDER BY code <~> simhash_code_ball((SELECT q FROM q256 WHERE n = 1), 0),
                    code <-> simhash_code_ball((SELECT q FROM q256 WHERE n = 2), 0), i LIMIT 50)
     = array(SELECT i FROM c256 ORDER BY bit_count(code # (SELECT q FROM q256 WHERE n = 1)),
                    bit_count(code # (SELECT q FROM q256 WHERE n = 2)), i LIMIT 50) AS same;
RESET enable_seqscan;
-- Every row, in passes of 2,730 rows (work_mem 64 kB).
SET work_mem = 64;
SELECT * FROM pg_temp.same_order('c256', 30000) WHERE n = 3;
RESET work_mem;

-- Inserts after the build (copies of built rows, new groups, NULLs) go to the tail.
INSERT INTO c256 SELECT 100000 + i, CASE WHEN i % 3 = 0 THEN code ELSE code # pg_temp.mask256('ins' || i, 4) END
FROM c256 WHERE i BETWEEN 0 AND 499;
INSERT INTO c256 SELECT 200000 + i, pg_temp.code256('new' || i) FROM generate_series(1, 300) i;
INSERT INTO c256 VALUES (-3, NULL);
SELECT simhash_index_check('c256_code') AS indexed, (SELECT count(*) FROM c256) AS rows;
SELECT * FROM pg_temp.compare('c256', ARRAY[0, 8, 24, 40, 128]);
SELECT * FROM pg_temp.same_order('c256', 50);
-- Another length: 22026, at insert and in a query.
INSERT INTO c256 VALUES (-4, B'101');
SET enable_seqscan = off;
SELECT count(*) FROM c256 WHERE code <@ simhash_code_ball(B'101', 1);
RESET enable_seqscan;
-- DELETE and VACUUM: removed rows leave the code store and the tail.
DELETE FROM c256 WHERE i % 7 = 0 OR i = -1;
VACUUM c256;
SELECT simhash_index_check('c256_code') AS indexed, (SELECT count(*) FROM c256) AS rows;
SELECT * FROM pg_temp.compare('c256', ARRAY[0, 8, 40]);
SELECT * FROM pg_temp.same_order('c256', 100);

-- 2,000 rows of bit(1024) (every one of its 64 segments of 16 bits indexed by default), planted
-- as above.
CREATE TABLE c1024 (i int PRIMARY KEY, code bit(1024));
INSERT INTO c1024 SELECT i, CASE WHEN i % 10 < 2 THEN pg_temp.code1024((i / 10)::text)
    ELSE pg_temp.code1024((i / 10)::text) # pg_temp.mask1024(i::text, 3 + i % 4) END
FROM generate_series(0, 1999) i;
CREATE INDEX c1024_code ON c1024 USING simhash (code);
SELECT simhash_index_check('c1024_code') AS indexed;
TRUNCATE q256;
ALTER TABLE q256 ALTER COLUMN q TYPE bit(1024) USING NULL;
INSERT INTO q256 SELECT row_number() OVER (ORDER BY i), code FROM c1024 WHERE i IN (3, 999, 1500) ORDER BY i;
SELECT * FROM pg_temp.compare('c1024', ARRAY[0, 16, 40, 64, 128, 400]);
SELECT * FROM pg_temp.same_order('c1024', 10);
-- WITH (segments = s): 16 segments indexed (the rest of each code only compared) or one: the same
-- rows, radius and nearest, from an index whose size follows its segments; 256 asks for all of
-- them, as the default does; RESET and REINDEX give the default back. Out of range, or another
-- parameter: 22023. An index of simhash64 fingerprints takes the parameter but files its rows
-- under its four segments whatever it says (a WARNING, 01000, at each build): ALTER INDEX cannot
-- tell the two kinds apart, so a refusal at the build would fail every later REINDEX, VACUUM
-- FULL, CLUSTER and the restore of a dump (`WITH (segments='4')`) of such an index.
SELECT pg_relation_size('c1024_code') AS default_size \gset
DROP INDEX c1024_code;
CREATE INDEX c1024_16 ON c1024 USING simhash (code) WITH (segments = 16);
SELECT simhash_index_check('c1024_16') AS indexed, reloptions FROM pg_class WHERE relname = 'c1024_16';
SELECT 2 * pg_relation_size('c1024_16') < :default_size AS smaller;
SELECT * FROM pg_temp.compare('c1024', ARRAY[0, 16, 40, 64, 128, 400]);
SELECT * FROM pg_temp.same_order('c1024', 10);
ALTER INDEX c1024_16 SET (segments = 1);
REINDEX INDEX c1024_16;
SELECT simhash_index_check('c1024_16') AS indexed, pg_relation_size('c1024_16') < :default_size AS smaller;
SELECT * FROM pg_temp.compare('c1024', ARRAY[0, 16, 64]);
SELECT * FROM pg_temp.same_order('c1024', 10);
ALTER INDEX c1024_16 SET (segments = 256);
REINDEX INDEX c1024_16;
SELECT pg_relation_size('c1024_16') = :default_size AS all_is_default;
ALTER INDEX c1024_16 RESET (segments);
REINDEX INDEX c1024_16;
SELECT pg_relation_size('c1024_16') = :default_size AS default_again;
CREATE INDEX ON c1024 USING simhash (code) WITH (segments = 0);
CREATE INDEX ON c1024 USING simhash (code) WITH (segments = 257);
CREATE INDEX ON c1024 USING simhash (code) WITH (fillfactor = 50);
CREATE TABLE f64 (fp simhash64);
INSERT INTO f64 SELECT ('x' || substr(md5('f64' || i), 1, 16))::bit(64)::bigint::simhash64
    FROM generate_series(1, 300) i;
CREATE INDEX f64_with ON f64 USING simhash (fp) WITH (segments = 40);
SELECT simhash_index_check('f64_with') AS indexed;
DROP INDEX f64_with;
CREATE INDEX f64_fp ON f64 USING simhash (fp);
SELECT pg_relation_size('f64_fp') AS f64_size \gset
ALTER INDEX f64_fp SET (segments = 1);
REINDEX INDEX f64_fp;
VACUUM FULL f64;
SELECT simhash_index_check('f64_fp') AS indexed, pg_relation_size('f64_fp') = :f64_size AS same_size;
DROP INDEX f64_fp;
CREATE INDEX f64_fp ON public.f64 USING simhash (fp) WITH (segments='4');
SET enable_seqscan = off;
SELECT count(*) AS near FROM f64 WHERE fp <@ simhash_ball((SELECT fp FROM f64 LIMIT 1), 3);
RESET enable_seqscan;
DROP TABLE f64;
-- On a partitioned table the parameter reaches each partition's index, an unlogged partition's
-- and one attached later too; each answers as the sequential scan does.
CREATE TABLE pc (i int, code bit(1024)) PARTITION BY RANGE (i);
CREATE TABLE pc1 PARTITION OF pc FOR VALUES FROM (0) TO (1000);
CREATE UNLOGGED TABLE pc2 PARTITION OF pc FOR VALUES FROM (1000) TO (1500);
INSERT INTO pc SELECT i, code FROM c1024 WHERE i < 1500;
CREATE INDEX pc_code ON pc USING simhash (code) WITH (segments = 40);
CREATE TABLE pc3 (i int, code bit(1024));
INSERT INTO pc3 SELECT i, code FROM c1024 WHERE i >= 1500;
ALTER TABLE pc ATTACH PARTITION pc3 FOR VALUES FROM (1500) TO (2000);
SELECT c.relname, c.reloptions, simhash_index_check(c.oid::regclass) AS indexed
FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid WHERE h.inhparent = 'pc_code'::regclass ORDER BY 1;
SELECT * FROM pg_temp.compare('pc', ARRAY[0, 64, 400]);
DROP TABLE pc;

-- bit varying(n): the first row's length (n is a maximum); another is refused at the build and
-- at insert (22026).
CREATE TABLE cv (code bit varying(8));
INSERT INTO cv VALUES (B'1010'), (B'10101');
CREATE INDEX ON cv USING simhash (code);
-- (TRUNCATE, not DELETE: a deleted row another snapshot may still see is built too)
TRUNCATE cv;
INSERT INTO cv VALUES (B'1010');
CREATE INDEX cv_code ON cv USING simhash (code);
INSERT INTO cv VALUES (B'0110'), (NULL);
INSERT INTO cv VALUES (B'01');
SET enable_seqscan = off;
SELECT code FROM cv WHERE code <@ simhash_code_ball(B'0010', 1) ORDER BY code;
SELECT code FROM cv ORDER BY code <-> simhash_code_ball(B'0111', 0);
RESET enable_seqscan;
SELECT simhash_index_check('cv_code');
-- Built empty: the first row inserted sets the length; an empty code is refused (22026), at
-- insert and at the build, saying so (not "a code of 0 bits cannot be compared with the 0-bit codes").
CREATE TABLE ce (code bit varying);
CREATE INDEX ce_code ON ce USING simhash (code);
\set VERBOSITY default
INSERT INTO ce VALUES (B'');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE cempty (code bit varying);
INSERT INTO cempty VALUES (NULL), (B'');
CREATE INDEX ON cempty USING simhash (code);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY sqlstate
DROP TABLE cempty;
INSERT INTO ce VALUES (B'110'), (B'111');
INSERT INTO ce VALUES (B'11');
SET enable_seqscan = off;
SELECT code FROM ce WHERE code <@ simhash_code_ball(B'110', 0);
RESET enable_seqscan;
-- CREATE INDEX CONCURRENTLY (its validation reads every TID through ambulkdelete).
CREATE INDEX CONCURRENTLY c1024_again ON c1024 USING simhash (code);
SELECT simhash_index_check('c1024_again');
DROP INDEX c1024_again;
-- Codes longer than an index takes (4,096 bits): 54000.
CREATE TABLE clong (code bit(4097));
CREATE INDEX ON clong USING simhash (code);
-- (Beyond maintenance_work_mem the build sorts on disk: bit_spill.)
-- ORDER BY code <-> ball: the ordering operators read the ball's center alone, so a ball with a
-- NULL radius orders by distance too, through the index as in a sequential scan (once: rows in
-- table order, and with a second key XX000 "index returned tuples in wrong order").
CREATE TABLE cnull_radius AS SELECT i AS id, pg_temp.code256('r' || i) AS code FROM generate_series(1, 300) i;
CREATE INDEX ON cnull_radius USING simhash (code);
ANALYZE cnull_radius;
SET enable_seqscan = off;
SET enable_sort = off;
SELECT array_agg(d) AS by_index FROM (SELECT code <-> simhash_code_ball(pg_temp.code256('r7'), 0) AS d FROM cnull_radius
    ORDER BY code <-> simhash_code_ball(pg_temp.code256('r7'), NULL) LIMIT 3) s;
SELECT count(*) AS rows_in_order FROM (SELECT id FROM cnull_radius
    ORDER BY code <-> simhash_code_ball(pg_temp.code256('r7'), NULL),
             code <~> simhash_code_ball(pg_temp.code256('r8'), 0) LIMIT 3) s;
RESET enable_seqscan;
RESET enable_sort;
SET enable_indexscan = off;
SELECT array_agg(d) AS by_sort FROM (SELECT code <-> simhash_code_ball(pg_temp.code256('r7'), 0) AS d FROM cnull_radius
    ORDER BY code <-> simhash_code_ball(pg_temp.code256('r7'), NULL) LIMIT 3) s;
RESET enable_indexscan;
DROP TABLE cnull_radius;
-- An ordered scan offered with the radius tests of the planner's other paths on the index takes
-- no col <@ ANY(array) among them (only a bitmap scan takes one; once: XX000 "ScalarArrayOpExpr
-- index qual found where not allowed"): it stays a filter, the rows the same.
CREATE TABLE csaop AS SELECT i AS id, pg_temp.code256('s' || i) AS code FROM generate_series(1, 300) i;
CREATE INDEX ON csaop USING simhash (code);
ANALYZE csaop;
SET enable_seqscan = off;
SET enable_sort = off;
SELECT array_agg(d) AS by_index FROM (SELECT code <-> simhash_code_ball(pg_temp.code256('s7'), 0) AS d FROM csaop
    WHERE code <@ ANY (ARRAY[simhash_code_ball(pg_temp.code256('s7'), 120), simhash_code_ball(pg_temp.code256('s9'), 0)])
    ORDER BY simhash_hamming(code, pg_temp.code256('s7')) LIMIT 4) s;
RESET enable_seqscan;
RESET enable_sort;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT array_agg(d) AS by_sort FROM (SELECT code <-> simhash_code_ball(pg_temp.code256('s7'), 0) AS d FROM csaop
    WHERE code <@ ANY (ARRAY[simhash_code_ball(pg_temp.code256('s7'), 120), simhash_code_ball(pg_temp.code256('s9'), 0)])
    ORDER BY simhash_hamming(code, pg_temp.code256('s7')) LIMIT 4) s;
RESET enable_indexscan;
RESET enable_bitmapscan;
DROP TABLE csaop;
-- simhash_index_check of a partitioned index (no pages of its own): 42809, not XX002 "corrupt".
CREATE TABLE cparted (id int, code bit(8)) PARTITION BY RANGE (id);
CREATE TABLE cparted_1 PARTITION OF cparted FOR VALUES FROM (0) TO (10);
CREATE INDEX cparted_code ON cparted USING simhash (code);
SELECT simhash_index_check('cparted_code');
SELECT simhash_index_check('cparted_1_code_idx');
DROP TABLE cparted;
-- A join of two indexed columns: simhash_hamming(a.code, b.code) <= k becomes a test per side
-- (each probes its own index), which are one condition: the row estimate counts it once (once:
-- squared, 1 row), with one index or two, and for the two spellings.
CREATE TABLE cja AS SELECT i AS id, ('x' || md5(i::text))::bit(128) AS code FROM generate_series(1, 1000) i;
CREATE TABLE cjb AS SELECT i AS id, ('x' || md5((i * 7)::text))::bit(128) AS code FROM generate_series(1, 1000) i;
ANALYZE cja, cjb;
CREATE FUNCTION pg_temp.estimate(query text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
CREATE TEMP TABLE join_estimates (indexes int, form text, estimate float8);
INSERT INTO join_estimates SELECT 0, f, pg_temp.estimate(f) FROM unnest(ARRAY[
    'SELECT * FROM cja a, cjb b WHERE simhash_hamming(a.code, b.code) <= 40',
    'SELECT * FROM cja a, cjb b WHERE a.code <@ simhash_code_ball(b.code, 40) AND b.code <@ simhash_code_ball(a.code, 40)']) f;
CREATE INDEX cja_code ON cja USING simhash (code);
INSERT INTO join_estimates SELECT 1, form, pg_temp.estimate(form) FROM join_estimates WHERE indexes = 0;
CREATE INDEX cjb_code ON cjb USING simhash (code);
INSERT INTO join_estimates SELECT 2, form, pg_temp.estimate(form) FROM join_estimates WHERE indexes = 0;
EXPLAIN (COSTS OFF) SELECT * FROM cja a, cjb b WHERE simhash_hamming(a.code, b.code) <= 40;
SELECT indexes, left(form, 60) AS form, estimate = (SELECT estimate FROM join_estimates WHERE indexes = 1 AND form LIKE '%simhash_hamming%') AS same,
       estimate > 5 AS above_5
FROM join_estimates WHERE indexes > 0 ORDER BY 1, 2;
DROP TABLE cja, cjb;
-- Codes stored as bytea, indexed as the expression simhash_code(hash): simhash_hamming of that
-- expression <= k becomes its <@ test (either order, a parameter too) and reads the index; the
-- rows equal a sequential scan's. An expression with no index of its own, or compared with the
-- same row, stays as written. In a join of two such expressions the test becomes one per side,
-- each probing its own index, whichever side is restricted, and is counted once in the estimate.
CREATE TABLE cbytes AS SELECT i AS id, decode(md5(i::text) || md5((i + 1)::text), 'hex') AS hash FROM generate_series(1, 3000) i;
INSERT INTO cbytes SELECT 10000 + id, set_byte(hash, 0, get_byte(hash, 0) # 1) FROM cbytes WHERE id % 100 = 0;
CREATE INDEX cbytes_code ON cbytes USING simhash ((simhash_code(hash)));
ANALYZE cbytes;
SET plan_cache_mode = force_generic_plan;
PREPARE cbytes_radius(bytea) AS SELECT id FROM cbytes WHERE simhash_hamming(simhash_code(hash), simhash_code($1)) <= 8;
EXPLAIN (COSTS OFF) EXECUTE cbytes_radius('\x00');
PREPARE cbytes_radius_commuted(bytea) AS SELECT id FROM cbytes WHERE 100 > simhash_hamming(simhash_code($1), simhash_code(hash)) ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE cbytes_radius_commuted('\x00');
RESET plan_cache_mode;
EXPLAIN (COSTS OFF) SELECT id FROM cbytes WHERE simhash_hamming(simhash_code(substr(hash, 1, 16)), simhash_code('\x00'::bytea)) <= 8;
EXPLAIN (COSTS OFF) SELECT id FROM cbytes WHERE simhash_hamming(simhash_code(hash), simhash_code(hash || '\x00'::bytea)) <= 8;
CREATE TABLE cbytes2 AS SELECT * FROM cbytes;
CREATE INDEX cbytes2_code ON cbytes2 USING simhash ((simhash_code(hash)));
ANALYZE cbytes2;
EXPLAIN (COSTS OFF) SELECT a.id FROM cbytes a JOIN cbytes2 b ON simhash_hamming(simhash_code(a.hash), simhash_code(b.hash)) <= 3 WHERE b.id = 500;
EXPLAIN (COSTS OFF) SELECT a.id FROM cbytes a JOIN cbytes2 b ON simhash_hamming(simhash_code(a.hash), simhash_code(b.hash)) <= 3 WHERE a.id = 500;
SELECT pg_temp.estimate('SELECT * FROM cbytes a, cbytes2 b WHERE simhash_hamming(simhash_code(a.hash), simhash_code(b.hash)) <= 110')
     = pg_temp.estimate('SELECT * FROM cbytes a, cbytes2 b WHERE simhash_code(a.hash) <@ simhash_code_ball(simhash_code(b.hash), 110)') AS counted_once;
SELECT count(*) FILTER (WHERE simhash_hamming(simhash_code(a.hash), simhash_code(b.hash)) <= 3) AS within_3,
       (SELECT count(*) FROM cbytes a JOIN cbytes2 b ON simhash_hamming(simhash_code(a.hash), simhash_code(b.hash)) <= 3 WHERE a.id % 100 = 0) AS through_index
FROM cbytes a, cbytes2 b WHERE a.id % 100 = 0;
DROP TABLE cbytes2;
CREATE TEMP TABLE cbytes_q AS SELECT hash AS q FROM cbytes WHERE id IN (700, 1500);
-- The expression on the nullable side of a LEFT JOIN that the test makes an inner join (on 16 and
-- later its columns name the join when the test is rewritten): still through the index.
EXPLAIN (COSTS OFF) SELECT p.id FROM cbytes_q LEFT JOIN cbytes p ON true WHERE simhash_hamming(simhash_code(p.hash), simhash_code(q)) <= 3;
SET enable_seqscan = off;
CREATE TEMP TABLE cbytes_by_index AS SELECT q, array(SELECT id FROM cbytes WHERE simhash_hamming(simhash_code(hash), simhash_code(q)) <= 110 ORDER BY id) AS ids
    FROM cbytes_q;
RESET enable_seqscan;
SELECT count(*) AS queries, bool_and(ids = array(SELECT id FROM cbytes WHERE bit_count(simhash_code(hash) # simhash_code(q)) <= 110 ORDER BY id)) AS same,
       sum(cardinality(ids)) > 2 AS found_near
FROM cbytes_by_index;
SELECT id FROM cbytes WHERE simhash_hamming(simhash_code(hash), simhash_code('\x0102'::bytea)) <= 8;
DROP TABLE cbytes;
-- NULL codes in ORDER BY come last in table order, read in passes bounded by work_mem (64 kB:
-- 2,730 rows a pass) as the codes are: 6,000 NULL rows, after the build and inserted.
CREATE TABLE cnulls AS SELECT i AS id, CASE WHEN i % 3 = 0 THEN pg_temp.code256('n' || i) END AS code FROM generate_series(1, 6000) i;
CREATE INDEX cnulls_code ON cnulls USING simhash (code);
INSERT INTO cnulls SELECT 10000 + i, NULL FROM generate_series(1, 3000) i;
SET work_mem = 64;
SET enable_seqscan = off;
CREATE TEMP TABLE by_index AS SELECT row_number() OVER () AS n, ctid AS t, code IS NULL AS is_null
    FROM (SELECT ctid, code FROM cnulls ORDER BY code <-> simhash_code_ball(pg_temp.code256('n3'), 0)) s;
RESET enable_seqscan;
RESET work_mem;
SELECT count(*) AS rows, count(*) FILTER (WHERE is_null) AS null_rows,
       bool_and(NOT is_null) FILTER (WHERE n <= 2000) AS codes_first,
       array(SELECT t FROM by_index WHERE is_null ORDER BY n) = array(SELECT ctid FROM cnulls WHERE code IS NULL ORDER BY ctid) AS nulls_in_table_order
FROM by_index;
DROP TABLE cnulls;
-- A partitioned table: ORDER BY simhash_hamming(code, q) LIMIT n is a Merge Append of each
-- partition's ordered index scan (once, on 18: a sort of every row).
CREATE TABLE cparts (id int, code bit(64)) PARTITION BY RANGE (id);
CREATE TABLE cparts_1 PARTITION OF cparts FOR VALUES FROM (0) TO (3000);
CREATE TABLE cparts_2 PARTITION OF cparts FOR VALUES FROM (3000) TO (6000);
INSERT INTO cparts SELECT i, ('x' || md5(i::text))::bit(64) FROM generate_series(0, 5999) i;
INSERT INTO cparts VALUES (5, NULL);
CREATE INDEX cparts_code ON cparts USING simhash (code);
ANALYZE cparts;
SET plan_cache_mode = force_generic_plan;
PREPARE cparts_nearest_only(bit) AS SELECT id FROM cparts ORDER BY simhash_hamming(code, $1) LIMIT 5;
EXPLAIN (COSTS OFF) EXECUTE cparts_nearest_only(B'1');
RESET plan_cache_mode;
SET enable_seqscan = off;
SET enable_sort = off;
SELECT array(SELECT simhash_hamming(code, ('x' || md5('17'))::bit(64)) FROM cparts
    ORDER BY simhash_hamming(code, ('x' || md5('17'))::bit(64)) LIMIT 8) AS by_index;
RESET enable_seqscan;
RESET enable_sort;
SELECT array(SELECT bit_count(code # ('x' || md5('17'))::bit(64)) FROM cparts ORDER BY 1 LIMIT 8) AS by_sort;
DROP TABLE cparts;
-- Nearest rows of clustered codes (simhash_bits of vectors around 20 centres, as embeddings are),
-- where the rounds through the segments keep the rows met and read (those beyond a round's
-- radius carried to the next) and jump to the nearest row carried: with every segment indexed
-- (the default) and with 16 of them, in the order of a scan and sort, at several LIMITs, and with work_mem too
-- small for the rows met (then passes over the code store).
CREATE TABLE cl (i int, code bit(1024));
CREATE TEMP TABLE cl_centres AS
    SELECT c, array_agg((2 * random() - 1)::real ORDER BY d) AS v FROM generate_series(0, 19) c, generate_series(1, 32) d GROUP BY c;
INSERT INTO cl SELECT i, simhash_bits((SELECT array_agg(x + (0.3 * (random() - 0.5))::real) FROM unnest(ce.v) x), 1024)
    FROM generate_series(1, 3000) i JOIN cl_centres ce ON ce.c = i % 20;
CREATE TEMP TABLE cl_q AS SELECT n, simhash_bits((SELECT array_agg(x + (0.3 * (random() - 0.5))::real) FROM unnest(ce.v) x), 1024) AS q
    FROM generate_series(1, 4) n JOIN cl_centres ce ON ce.c = n * 3;
INSERT INTO cl_q SELECT 5, simhash_bits(array(SELECT (2 * random() - 1)::real FROM generate_series(1, 32)), 1024);
CREATE FUNCTION pg_temp.cl_same(lim int) RETURNS TABLE (n int, same boolean)
LANGUAGE plpgsql AS $$
DECLARE a tid[]; b tid[];
BEGIN
    FOR n IN SELECT cl_q.n FROM cl_q ORDER BY 1 LOOP
        SET LOCAL enable_seqscan = off;
        SELECT array(SELECT ctid FROM cl ORDER BY code <-> simhash_code_ball((SELECT q FROM cl_q WHERE cl_q.n = cl_same.n), 0) LIMIT lim) INTO a;
        RESET enable_seqscan;
        SELECT array(SELECT ctid FROM cl ORDER BY bit_count(code # (SELECT q FROM cl_q WHERE cl_q.n = cl_same.n)), ctid LIMIT lim) INTO b;
        same := a = b AND cardinality(a) = lim;
        RETURN NEXT;
    END LOOP;
END $$;
CREATE INDEX cl_all ON cl USING simhash (code);
SELECT n, bool_and(same) AS same FROM (SELECT * FROM pg_temp.cl_same(1) UNION ALL SELECT * FROM pg_temp.cl_same(10)
    UNION ALL SELECT * FROM pg_temp.cl_same(200)) s GROUP BY n ORDER BY n;
SET work_mem = 64;
SELECT n, bool_and(same) AS same FROM (SELECT * FROM pg_temp.cl_same(10) UNION ALL SELECT * FROM pg_temp.cl_same(500)) s GROUP BY n ORDER BY n;
RESET work_mem;
DROP INDEX cl_all;
CREATE INDEX cl_16 ON cl USING simhash (code) WITH (segments = 16);
SELECT n, bool_and(same) AS same FROM (SELECT * FROM pg_temp.cl_same(1) UNION ALL SELECT * FROM pg_temp.cl_same(10)
    UNION ALL SELECT * FROM pg_temp.cl_same(200)) s GROUP BY n ORDER BY n;
DROP TABLE cl;

-- Lean bits (the same in nearly every row) crowding a segment the index files rows under: a
-- NOTICE at the build, for codes and for simhash64 (20,000 values below 2^50: bits 1-17 zero).
-- None for uniform codes, for copies of one value, for lean bits outside the indexed segments,
-- or below 10,000 rows.
CREATE TABLE lean AS SELECT g, (g * 2654435761 % (1::bigint << 50))::bit(64) AS code,
    (g * 2654435761 % (1::bigint << 50))::simhash64 AS fp, ('x' || md5(g::text))::bit(128) AS uniform,
    B'1011'::bit(64) AS copy, (('x' || md5(g::text))::bit(128) || B'0000')::bit(132) AS tail_lean
FROM generate_series(1, 20000) g;
\set VERBOSITY default
CREATE INDEX lean_code ON lean USING simhash (code);
CREATE INDEX lean_fp ON lean USING simhash (fp);
CREATE INDEX lean_uniform ON lean USING simhash (uniform);
CREATE INDEX lean_copy ON lean USING simhash (copy);
CREATE INDEX lean_tail_first ON lean USING simhash (tail_lean) WITH (segments = 1);
CREATE INDEX lean_tail ON lean USING simhash (tail_lean);
CREATE INDEX lean_few ON lean USING simhash (code) WHERE g <= 9000;
\set VERBOSITY sqlstate
-- The lookups are exact all the same.
SELECT count(*) FROM lean WHERE simhash_hamming(code, (SELECT code FROM lean WHERE g = 7)) <= 3;
SELECT simhash_index_check('lean_code'), simhash_index_check('lean_fp');
DROP TABLE lean;
