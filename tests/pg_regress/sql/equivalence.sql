-- The indexed lookup returns exactly the rows a sequential scan returns, for every k from 0 to 64,
-- through the SimHash Radius Scan over four covering segment B-trees, the BitmapOr over them and over
-- compact ones, and the GIN bands index, on 100,000 fingerprints with
-- near-duplicates planted at distances 0..12 around 50 query fingerprints. The reference distance
-- is PostgreSQL's own bit_count() of the XOR, not our hamming().
-- (No JIT: with sequential scans switched off below, every small query would be JIT-compiled.)
SET jit = off;
CREATE TABLE eq_docs (id int PRIMARY KEY, fp simhash64 NOT NULL);
INSERT INTO eq_docs SELECT i, ('x' || substr(md5('eq' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 100000) i;
CREATE TABLE eq_queries AS SELECT id / 2000 AS j, fp FROM eq_docs WHERE id % 2000 = 0;
-- Copy d of query j flips bits j*7, j*7 + 13, j*7 + 26, ... (mod 64, all distinct): spread over
-- the segments, so each segment holds about d/4 of the flips (the probes' worst case).
INSERT INTO eq_docs
SELECT 1000000 + q.j * 100 + d,
       (q.fp::bigint # coalesce((SELECT bit_or(1::bigint << ((q.j * 7 + t * 13) % 64))
                                 FROM generate_series(0, d - 1) t), 0))::simhash64
FROM eq_queries q, generate_series(0, 12) d;
SELECT count(*) AS rows, count(DISTINCT fp) AS distinct_fps FROM eq_docs;

-- Reference: every (query, row) pair within distance 12, by sequential scan.
CREATE TABLE eq_reference AS
SELECT q.j, d.id, bit_count((d.fp::bigint # q.fp::bigint)::bit(64)) AS distance
FROM eq_queries q JOIN eq_docs d ON bit_count((d.fp::bigint # q.fp::bigint)::bit(64)) <= 12;
SELECT distance, count(*) FROM eq_reference GROUP BY distance ORDER BY distance;

-- Each lookup is planned with constant q and k, as an application would send it; sequential scans
-- are switched off so that the probes themselves are checked wherever the rewrite applies.
CREATE FUNCTION eq_check(k int, OUT radius int, OUT rows_found bigint, OUT rows_expected bigint,
                         OUT differences bigint, OUT scan text)
LANGUAGE plpgsql AS $$
DECLARE
    q record;
    got int[];
    want int[];
    plan text;
BEGIN
    radius := k; rows_found := 0; rows_expected := 0; differences := 0;
    EXECUTE format('EXPLAIN (COSTS OFF) SELECT id FROM eq_docs WHERE fp <~> %L <= %s',
                   (SELECT fp FROM eq_queries WHERE j = 1), k) INTO plan;
    scan := split_part(plan, ' on ', 1);
    FOR q IN SELECT j, fp FROM eq_queries ORDER BY j LOOP
        EXECUTE format('SELECT coalesce(array_agg(id ORDER BY id), ''{}'') FROM eq_docs WHERE fp <~> %L <= %s',
                       q.fp, k) INTO got;
        SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO want
        FROM eq_reference r WHERE r.j = q.j AND r.distance <= k;
        rows_found := rows_found + cardinality(got);
        rows_expected := rows_expected + cardinality(want);
        IF got IS DISTINCT FROM want THEN
            differences := differences + 1;
        END IF;
    END LOOP;
END $$;

-- Four covering segment B-trees: the SimHash Radius Scan.
SELECT simhash_create_indexes('eq_docs', 'fp');
ANALYZE eq_docs;
SET enable_seqscan = off;
SELECT (eq_check(k)).* FROM generate_series(0, 12) k;

-- The same indexes through the BitmapOr.
SET simhash.enable_radius_scan = off;
SELECT (eq_check(k)).* FROM generate_series(0, 12) k;
RESET simhash.enable_radius_scan;
RESET enable_seqscan;

-- A correlated subquery: one radius scan, rescanned with each query's fingerprint as a parameter.
EXPLAIN (COSTS OFF) SELECT q.j, (SELECT count(*) FROM eq_docs d WHERE d.fp <~> q.fp <= 7) FROM eq_queries q;
SELECT count(*) AS queries, count(*) FILTER (WHERE found <> expected) AS differences
FROM (SELECT q.j, (SELECT count(*) FROM eq_docs d WHERE d.fp <~> q.fp <= 7) AS found,
             (SELECT count(*) FROM eq_reference r WHERE r.j = q.j AND r.distance <= 7) AS expected
      FROM eq_queries q) c;

-- The same as one join: a nested loop whose inner side is a radius scan, once per query.
-- (k as a literal, as an application would send it: the join is planned for that radius.)
CREATE FUNCTION eq_join_differences(k int, OUT radius int, OUT differences bigint, OUT inner_scan text)
LANGUAGE plpgsql AS $$
DECLARE
    join_sql text := format('SELECT q.j, d.id FROM eq_queries q JOIN eq_docs d ON d.fp <~> q.fp <= %s', k);
    line text;
BEGIN
    radius := k;
    EXECUTE format('SELECT count(*) FROM ((%s EXCEPT SELECT j, id FROM eq_reference WHERE distance <= %s)
                    UNION ALL (SELECT j, id FROM eq_reference WHERE distance <= %s EXCEPT %s)) x',
                   join_sql, k, k, join_sql) INTO differences;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || join_sql LOOP
        IF inner_scan IS NULL AND line ~ '->  .* on eq_docs' THEN
            inner_scan := substring(line from '->  (.*) on eq_docs');
        END IF;
    END LOOP;
END $$;
EXPLAIN (COSTS OFF) SELECT q.j, d.id FROM eq_queries q JOIN eq_docs d ON d.fp <~> q.fp <= 3;
SELECT (eq_join_differences(k)).* FROM unnest(ARRAY[3, 7, 9, 11]) k;

-- Radii 13 to 64 (never rewritten): the counts of one query agree with bit_count's histogram.
SELECT count(*) AS radii_checked,
       count(*) FILTER (WHERE found <> expected) AS differences
FROM (SELECT k,
             (SELECT count(*) FROM eq_docs d WHERE d.fp <~> q.fp <= k) AS found,
             (SELECT count(*) FROM eq_docs d WHERE bit_count((d.fp::bigint # q.fp::bigint)::bit(64)) <= k) AS expected
      FROM eq_queries q, generate_series(13, 64) k WHERE q.j = 1) c;

-- Four compact segment B-trees (no fingerprint in them): the BitmapOr.
DROP INDEX eq_docs_fp_segment_0, eq_docs_fp_segment_1, eq_docs_fp_segment_2, eq_docs_fp_segment_3;
SELECT simhash_create_indexes('eq_docs', 'fp', 'btree_compact') \g /dev/null
ANALYZE eq_docs;
SET enable_seqscan = off;
SELECT (eq_check(k)).* FROM generate_series(0, 12) k;
RESET enable_seqscan;
-- The join through the BitmapOr: a nested loop probing the segment indexes once per query.
EXPLAIN (COSTS OFF) SELECT q.j, d.id FROM eq_queries q JOIN eq_docs d ON d.fp <~> q.fp <= 3;
SELECT (eq_join_differences(k)).* FROM unnest(ARRAY[3, 7, 9, 11]) k;

-- One GIN index instead.
DROP INDEX eq_docs_fp_segment_0, eq_docs_fp_segment_1, eq_docs_fp_segment_2, eq_docs_fp_segment_3;
SELECT simhash_create_indexes('eq_docs', 'fp', 'gin');
ANALYZE eq_docs;
SET enable_seqscan = off;
SELECT (eq_check(k)).* FROM generate_series(0, 12) k;
RESET enable_seqscan;

DROP FUNCTION eq_check(int), eq_join_differences(int);
DROP TABLE eq_docs, eq_queries, eq_reference;
