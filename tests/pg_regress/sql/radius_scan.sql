-- The SimHash Radius Scan (src/lookup/): radius lookups that check the distance inside covering
-- segment B-trees and read the table only for rows within the radius.
SET jit = off;
CREATE TABLE rs (id int PRIMARY KEY, fp simhash64, note text);
INSERT INTO rs SELECT i, ('x' || substr(md5('rs' || i), 1, 16))::bit(64)::bigint::simhash64, 'row ' || i
FROM generate_series(1, 20000) i;
-- Near-duplicates of row 1 at distances 1, 2, 3, 5, 8 and 11; a NULL fingerprint.
INSERT INTO rs SELECT 100000 + d, (fp::bigint # ((1::bigint << d) - 1))::simhash64, 'copy ' || d
FROM rs, unnest(ARRAY[1, 2, 3, 5, 8, 11]) d WHERE id = 1;
INSERT INTO rs VALUES (200000, NULL, 'no fingerprint');
SELECT fp AS q FROM rs WHERE id = 1 \gset
SELECT simhash_create_indexes('rs', 'fp');
VACUUM ANALYZE rs;

-- The plan: the exact test is the only filter; the probe arrays of the rewrite are not needed.
EXPLAIN (COSTS OFF) SELECT id FROM rs WHERE fp <~> :'q' <= 3;
SELECT id, note FROM rs WHERE fp <~> :'q' <= 3 ORDER BY id;
SELECT id FROM rs WHERE fp <~> :'q' <= 11 ORDER BY id;
-- Index tuples checked versus rows read from the table. (At k = 8 the 548 probes cost more than
-- reading this small table; the planner would scan it.)
SET enable_seqscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) SELECT id FROM rs WHERE fp <~> :'q' <= 8;
RESET enable_seqscan;

-- Other restrictions are checked on the fetched rows; projections and LIMIT work as usual.
SELECT id, upper(note) FROM rs WHERE fp <~> :'q' <= 11 AND id > 100002 ORDER BY id LIMIT 2;
SELECT count(*) FROM rs WHERE fp <~> :'q' < 6 AND note LIKE 'copy%';

-- ctid and tableoid come along: UPDATE, DELETE and row locks through the scan.
BEGIN;
EXPLAIN (COSTS OFF) UPDATE rs SET note = 'updated' WHERE fp <~> :'q' <= 2;
UPDATE rs SET note = 'updated' WHERE fp <~> :'q' <= 2 RETURNING id, note;
-- The scan finds the new versions (through the HOT chain when the update was HOT).
SELECT id, note FROM rs WHERE fp <~> :'q' <= 2 ORDER BY id;
DELETE FROM rs WHERE fp <~> :'q' <= 1 RETURNING id;
SELECT id FROM rs WHERE fp <~> :'q' <= 3 ORDER BY id;
ROLLBACK;
SELECT id, tableoid::regclass FROM rs WHERE fp <~> :'q' <= 1 ORDER BY id FOR UPDATE;

-- Other system columns are not in PostgreSQL 15's virtual slot of a custom scan: another plan.
EXPLAIN (COSTS OFF) SELECT xmin, id FROM rs WHERE fp <~> :'q' <= 3;
SELECT xmin IS NOT NULL AS has_xmin, id FROM rs WHERE fp <~> :'q' <= 1 ORDER BY id;

-- Parameters: a generic plan computes the probes at execution; NULL finds nothing.
PREPARE near(simhash64, int) AS SELECT id FROM rs WHERE fp <~> $1 <= 3 AND id <> $2 ORDER BY id;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE near(:'q', 0);
EXECUTE near(:'q', 1);
EXECUTE near(NULL, 0);
-- A query text under an expression of parameters (the README's growing keyword cut) as well.
INSERT INTO rs VALUES (300000, simhash(repeat('数据库系统的查询优化器选择执行计划。', 50), 23), 'a text');
PREPARE near_text(text) AS
    SELECT id FROM rs WHERE fp <~> simhash($1, greatest(20, char_length($1) / 40)) <= 7 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE near_text(repeat('数据库系统的查询优化器选择执行计划。', 50));
EXECUTE near_text(repeat('数据库系统的查询优化器选择执行计划。', 50));
RESET plan_cache_mode;
DEALLOCATE near;
DEALLOCATE near_text;
DELETE FROM rs WHERE id = 300000;

-- Rescans: once per outer row, each with its own fingerprint.
SELECT o.id, (SELECT array_agg(id ORDER BY id) FROM rs WHERE rs.fp <~> o.fp <= 3) AS near
FROM rs o WHERE o.id IN (1, 2, 100011) ORDER BY o.id;

-- A join: the inner side of a nested loop, parameterized by the outer row's fingerprint.
CREATE TABLE rs_queries AS SELECT id AS query_id, fp FROM rs WHERE id IN (1, 2, 100011);
ANALYZE rs_queries;
EXPLAIN (COSTS OFF) SELECT q.query_id, r.id FROM rs_queries q JOIN rs r ON r.fp <~> q.fp <= 3;
SELECT q.query_id, r.id FROM rs_queries q JOIN rs r ON r.fp <~> q.fp <= 3 AND r.id <> q.query_id ORDER BY 1, 2;
-- At k = 9 too: PostgreSQL costs the BitmapOr's probe arrays of a parameter as 10 values, not 137,
-- so the bitmap paths over the same B-trees, which the radius scan dominates, are withdrawn.
EXPLAIN (COSTS OFF) SELECT q.query_id, r.id FROM rs_queries q JOIN rs r ON r.fp <~> q.fp <= 9;
SELECT q.query_id, count(*) FROM rs_queries q JOIN rs r ON r.fp <~> q.fp <= 9 GROUP BY 1 ORDER BY 1;
DROP TABLE rs_queries;

-- simhash.enable_radius_scan = off leaves the BitmapOr.
SET simhash.enable_radius_scan = off;
EXPLAIN (COSTS OFF) SELECT id FROM rs WHERE fp <~> :'q' <= 3;
RESET simhash.enable_radius_scan;

-- A user's own cast is left as written (only the rewrite's implicit one is taken).
EXPLAIN (COSTS OFF) SELECT id FROM rs WHERE hamming(fp, :'q')::int <= 3;

-- The fingerprint may sit anywhere among the INCLUDE columns; one compact B-tree among the four
-- means no radius scan (the BitmapOr still works).
DROP INDEX rs_fp_segment_2;
CREATE INDEX rs_fp_segment_2 ON rs (simhash_segment(fp, 2)) INCLUDE (id, note, fp);
EXPLAIN (COSTS OFF) SELECT id FROM rs WHERE fp <~> :'q' <= 5;
SELECT id FROM rs WHERE fp <~> :'q' <= 5 ORDER BY id;
DROP INDEX rs_fp_segment_3;
CREATE INDEX rs_fp_segment_3 ON rs (simhash_segment(fp, 3));
EXPLAIN (COSTS OFF) SELECT id FROM rs WHERE fp <~> :'q' <= 5;
SELECT id FROM rs WHERE fp <~> :'q' <= 5 ORDER BY id;

-- A materialized view with the indexes.
CREATE MATERIALIZED VIEW rs_view AS SELECT id, fp FROM rs WHERE id <= 1000 OR id > 100000;
SELECT simhash_create_indexes('rs_view', 'fp') \g /dev/null
ANALYZE rs_view;
EXPLAIN (COSTS OFF) SELECT id FROM rs_view WHERE fp <~> :'q' <= 3;
SELECT id FROM rs_view WHERE fp <~> :'q' <= 3 ORDER BY id;

DROP MATERIALIZED VIEW rs_view;
DROP TABLE rs;

-- A partitionwise join: the inner side's path, parameterized by the outer partitioned table, is
-- copied for each pair of partitions and must read the outer partition's fingerprint.
CREATE TABLE rs_docs (tenant int, id int, fp simhash64) PARTITION BY LIST (tenant);
CREATE TABLE rs_docs_1 PARTITION OF rs_docs FOR VALUES IN (1);
CREATE TABLE rs_docs_2 PARTITION OF rs_docs FOR VALUES IN (2);
CREATE TABLE rs_asks (tenant int, ask int, fp simhash64) PARTITION BY LIST (tenant);
CREATE TABLE rs_asks_1 PARTITION OF rs_asks FOR VALUES IN (1);
CREATE TABLE rs_asks_2 PARTITION OF rs_asks FOR VALUES IN (2);
INSERT INTO rs_docs SELECT 1 + i % 2, i, ('x' || substr(md5('rs' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 20000) i;
-- Ask i is doc i with i mod 8 bits flipped.
INSERT INTO rs_asks SELECT tenant, id, (fp::bigint # ((1::bigint << (id % 8)) - 1))::simhash64
FROM rs_docs WHERE id <= 40;
SELECT simhash_create_indexes('rs_docs', 'fp') \g /dev/null
ANALYZE rs_docs, rs_asks;
SET enable_partitionwise_join = on;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF)
SELECT a.ask, d.id FROM rs_asks a JOIN rs_docs d ON a.tenant = d.tenant AND d.fp <~> a.fp <= 5;
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE bit_count((d.fp::bigint # a.fp::bigint)::bit(64)) > 5) AS too_far
FROM rs_asks a JOIN rs_docs d ON a.tenant = d.tenant AND d.fp <~> a.fp <= 5;
SELECT count(*) AS expected FROM rs_asks a JOIN rs_docs d
ON a.tenant = d.tenant AND bit_count((d.fp::bigint # a.fp::bigint)::bit(64)) <= 5;
RESET enable_partitionwise_join;
RESET enable_hashjoin;
RESET enable_mergejoin;
DROP TABLE rs_docs, rs_asks;

-- The join clause of an outer join that commutes with another, on the nullable side's
-- fingerprint (PostgreSQL 16 and later plan it in two versions, neither of which a scan may be
-- parameterized by; once, the radius scan made of one crashed the backend on 18), and one that
-- reads two tables: the rows of the plain join.
CREATE TABLE rs_fps (id int PRIMARY KEY, fp simhash64);
INSERT INTO rs_fps SELECT i, simhash(i::text) FROM generate_series(1, 3000) i;
INSERT INTO rs_fps SELECT 10000 + id, (fp::bigint # 5)::simhash64 FROM rs_fps WHERE id % 100 = 0;
SELECT count(*) FROM simhash_create_indexes('rs_fps', 'fp');
CREATE TABLE rs_ids AS SELECT id FROM rs_fps WHERE id % 50 = 0 UNION ALL SELECT 99999;
CREATE TABLE rs_some AS SELECT id, fp FROM rs_fps WHERE id % 100 = 0;
ANALYZE rs_fps, rs_ids, rs_some;
CREATE TEMP TABLE rs_outer_scan AS
SELECT r.id AS r, f.id AS f, g.id AS g FROM rs_ids r LEFT JOIN rs_some s ON s.id = r.id
    LEFT JOIN rs_fps f ON f.fp <~> s.fp <= 3
    LEFT JOIN rs_fps g ON g.fp <~> coalesce(s.fp, f.fp) <= 2;
SET simhash.enable_rewrite = off;
SET simhash.enable_radius_scan = off;
CREATE TEMP TABLE rs_outer_plain AS
SELECT r.id AS r, f.id AS f, g.id AS g FROM rs_ids r LEFT JOIN rs_some s ON s.id = r.id
    LEFT JOIN rs_fps f ON f.fp <~> s.fp <= 3
    LEFT JOIN rs_fps g ON g.fp <~> coalesce(s.fp, f.fp) <= 2;
RESET simhash.enable_rewrite;
RESET simhash.enable_radius_scan;
SELECT (SELECT count(*) FROM rs_outer_scan) AS rows, (SELECT count(*) FROM rs_outer_scan WHERE f IS NOT NULL) AS matched,
       NOT EXISTS ((TABLE rs_outer_scan EXCEPT ALL TABLE rs_outer_plain) UNION ALL (TABLE rs_outer_plain EXCEPT ALL TABLE rs_outer_scan)) AS same;
DROP TABLE rs_fps, rs_ids, rs_some;
