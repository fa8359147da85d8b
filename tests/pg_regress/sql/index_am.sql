-- The simhash index access method: CREATE INDEX ... USING simhash (fp). A lookup through it returns
-- exactly the rows a sequential scan returns, for every k from 0 to 64 (the reference is
-- PostgreSQL's own bit_count() of the XOR), after the build, after inserts into the built index
-- (new pages and new buckets), and after DELETE and VACUUM; plus NULLs, an empty table, an
-- unlogged table, and its errors.
SET jit = off;
CREATE TABLE am_docs (id int PRIMARY KEY, fp simhash64);
-- 8,000 random fingerprints, and near-duplicates planted at distances 0..20 around 10 of them
-- (copy d of query j flips bits j*7, j*7 + 13, ... mod 64: spread over the segments).
INSERT INTO am_docs SELECT i, ('x' || substr(md5('am' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 8000) i;
CREATE TABLE am_queries AS SELECT id / 800 AS j, fp FROM am_docs WHERE id % 800 = 0;
INSERT INTO am_docs
SELECT 1000000 + q.j * 100 + d,
       (q.fp::bigint # coalesce((SELECT bit_or(1::bigint << ((q.j * 7 + t * 13) % 64))
                                 FROM generate_series(0, d - 1) t), 0))::simhash64
FROM am_queries q, generate_series(0, 20) d;
INSERT INTO am_docs VALUES (-1, NULL);
CREATE INDEX am_docs_fp ON am_docs USING simhash (fp);
ANALYZE am_docs;

-- The planner rewrites the radius test into the index's operator, for every k.
EXPLAIN (COSTS OFF) SELECT id FROM am_docs WHERE fp <~> '0123456789abcdef' <= 3;
EXPLAIN (COSTS OFF) SELECT id FROM am_docs WHERE '0123456789abcdef' <~> fp < 40;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM am_docs WHERE fp <~> '0123456789abcdef' <= 11;
RESET enable_bitmapscan;
-- The planner's estimate: the share of uniform fingerprints within k (k = 64: every row).
CREATE FUNCTION am_estimate(k int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
    EXECUTE format('EXPLAIN (FORMAT JSON) SELECT id FROM am_docs WHERE fp <~> %L <= %s', '0123456789abcdef', k) INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END $$;
SELECT am_estimate(0) AS k0, am_estimate(20) AS k20, am_estimate(64) = (SELECT count(*) FROM am_docs) AS k64_all;
-- The operator itself: NULL ball fields give NULL, as fp <~> NULL <= k does.
SELECT '0123456789abcdef'::simhash64 <@ simhash_ball('0123456789abcdee', 1) AS one_bit,
       '0123456789abcdef'::simhash64 <@ simhash_ball('0123456789abcdee', 0) AS zero,
       '0123456789abcdef'::simhash64 <@ simhash_ball(NULL, 3) AS null_center,
       '0123456789abcdef'::simhash64 <@ simhash_ball('0123456789abcdee', NULL) AS null_radius,
       '0123456789abcdef'::simhash64 <@ simhash_ball('0123456789abcdee', -1) AS negative;

-- Every query and every k from 0 to 64, through the index (bitmap and plain index scans) and by
-- sequential scan: the differences (none).
CREATE FUNCTION am_check(label text) RETURNS TABLE (phase text, lookups bigint, rows_found bigint, differences bigint)
LANGUAGE plpgsql AS $$
DECLARE
    q record;
    k int;
    plan text;
    got int[];
    want int[];
    diffs bigint := 0;
    found bigint := 0;
    n bigint := 0;
BEGIN
    FOR q IN SELECT * FROM am_queries ORDER BY j LOOP
        FOR k IN 0..64 LOOP
            FOREACH plan IN ARRAY ARRAY['bitmap', 'index'] LOOP
                SET LOCAL enable_seqscan = off;
                IF plan = 'index' THEN SET LOCAL enable_bitmapscan = off; ELSE SET LOCAL enable_bitmapscan = on; END IF;
                EXECUTE format('SELECT array_agg(id ORDER BY id) FROM am_docs WHERE fp <~> %L <= %s', q.fp, k) INTO got;
                RESET enable_seqscan;
                RESET enable_bitmapscan;
                SELECT array_agg(id ORDER BY id) INTO want FROM am_docs
                WHERE bit_count((fp::bigint # q.fp::bigint)::bit(64)) <= k;
                n := n + 1;
                found := found + coalesce(cardinality(got), 0);
                IF got IS DISTINCT FROM want THEN
                    diffs := diffs + 1;
                    RAISE NOTICE 'query % k % (%): % rows, % expected', q.j, k, plan,
                        coalesce(cardinality(got), 0), coalesce(cardinality(want), 0);
                END IF;
            END LOOP;
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT label, n, found, diffs;
END $$;
SELECT * FROM am_check('after the build');
SELECT simhash_index_check('am_docs_fp') = (SELECT count(*) FROM am_docs) AS check_ok;

-- Inserts into the built index: more rows than it was built for (its buckets grow chains of pages).
INSERT INTO am_docs SELECT i, ('x' || substr(md5('more' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(8001, 24000) i;
INSERT INTO am_docs
SELECT 2000000 + q.j * 100 + d, (q.fp::bigint # (7::bigint << (d * 3)))::simhash64
FROM am_queries q, generate_series(0, 20) d;
SELECT * FROM am_check('after inserts');
SELECT simhash_index_check('am_docs_fp') = (SELECT count(*) FROM am_docs) AS check_ok;

-- DELETE and VACUUM: the removed rows' entries go.
DELETE FROM am_docs WHERE id % 3 = 0;
VACUUM (INDEX_CLEANUP ON) am_docs;
SELECT * FROM am_check('after delete and vacuum');
INSERT INTO am_docs SELECT i, ('x' || substr(md5('again' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(100001, 101000) i;
SELECT * FROM am_check('after more inserts');
SELECT simhash_index_check('am_docs_fp') = (SELECT count(*) FROM am_docs) AS check_ok;

-- CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY (which list the index's rows through its
-- bulk delete) give the same index.
DROP INDEX am_docs_fp;
CREATE INDEX CONCURRENTLY am_docs_fp ON am_docs USING simhash (fp);
REINDEX INDEX CONCURRENTLY am_docs_fp;
SELECT simhash_index_check('am_docs_fp') = (SELECT count(*) FROM am_docs) AS check_ok;
SELECT * FROM am_check('after CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY');

-- A parameter, and a join: the value probes the index of the inner side.
PREPARE am_lookup(simhash64, int) AS SELECT count(*) FROM am_docs WHERE fp <~> $1 <= $2;
EXECUTE am_lookup('0123456789abcdef', 20);
SELECT count(*) FROM am_docs WHERE bit_count((fp::bigint # '0123456789abcdef'::simhash64::bigint)::bit(64)) <= 20;
SET enable_seqscan = off;
SELECT count(*) FROM am_queries q JOIN am_docs d ON d.fp <~> q.fp <= 5;
RESET enable_seqscan;
SELECT count(*) FROM am_queries q JOIN am_docs d ON bit_count((d.fp::bigint # q.fp::bigint)::bit(64)) <= 5;

-- An empty table, then rows; REINDEX; an unlogged table; a temporary table.
CREATE TABLE am_empty (fp simhash64);
CREATE INDEX ON am_empty USING simhash (fp);
SET enable_seqscan = off;
SELECT count(*) FROM am_empty WHERE fp <~> '0123456789abcdef' <= 64;
INSERT INTO am_empty SELECT ('x' || substr(md5('e' || i), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 2000) i;
SELECT count(*) FROM am_empty WHERE fp <~> '0123456789abcdef' <= 64;
REINDEX TABLE am_empty;
SELECT count(*) FROM am_empty WHERE fp <~> '0123456789abcdef' <= 30;
RESET enable_seqscan;
SELECT count(*) FROM am_empty WHERE bit_count((fp::bigint # '0123456789abcdef'::simhash64::bigint)::bit(64)) <= 30;
CREATE UNLOGGED TABLE am_unlogged (fp simhash64);
CREATE INDEX ON am_unlogged USING simhash (fp);
INSERT INTO am_unlogged SELECT fp FROM am_empty;
CREATE TEMP TABLE am_temp (fp simhash64);
CREATE INDEX ON am_temp USING simhash (fp);
INSERT INTO am_temp SELECT fp FROM am_empty;
SET enable_seqscan = off;
SELECT (SELECT count(*) FROM am_unlogged WHERE fp <~> '0123456789abcdef' <= 30) AS unlogged,
       (SELECT count(*) FROM am_temp WHERE fp <~> '0123456789abcdef' <= 30) AS temp;
RESET enable_seqscan;

-- simhash_create_indexes makes it too.
SELECT simhash_create_indexes('am_empty', 'fp', 'simhash');

-- A bucket page read again through the buffer that held it the last time (skipping the shared
-- buffer mapping table) counts as a block read and hit of the index, as a page read through
-- ReadBuffer does: in a new session (nothing remembered), one lookup reads its pages through
-- ReadBuffer; the next twenty read their bucket pages through the remembered buffers (the lookups
-- above raised the pages' usage counts to the maximum); each reads the same pages. (This
-- session's counts are flushed first: a backend flushes what is pending as it exits, which would
-- land in the middle.)
DROP TABLE am_temp;
SELECT pg_stat_force_next_flush();
\c
CREATE FUNCTION am_fetched() RETURNS bigint LANGUAGE sql AS $$
    SELECT idx_blks_read + idx_blks_hit FROM pg_statio_all_indexes WHERE indexrelid = 'am_docs_fp'::regclass $$;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT pg_stat_force_next_flush();
SELECT am_fetched() AS before \gset
SELECT count(*) FROM am_docs WHERE fp <~> '0123456789abcdef' <= 11;
SELECT pg_stat_force_next_flush();
SELECT am_fetched() AS once \gset
DO $$ BEGIN FOR i IN 1..20 LOOP PERFORM count(*) FROM am_docs WHERE fp <~> '0123456789abcdef' <= 11; END LOOP; END $$;
SELECT pg_stat_force_next_flush();
SELECT :once - :before > 0 AS read, am_fetched() - :once = 20 * (:once - :before) AS counted;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP FUNCTION am_fetched();

-- Errors: storage parameters; a column of another type; more than one column.
\set VERBOSITY terse
CREATE INDEX ON am_docs USING simhash (fp) WITH (fillfactor = 50);
CREATE INDEX ON am_docs USING simhash (id);
CREATE INDEX ON am_docs USING simhash (fp, fp);
SELECT simhash_index_check('am_docs_pkey');
-- simhash_index_check is for superusers and roles granted it (it locks writers out while it runs).
CREATE ROLE regress_am_reader;
SET ROLE regress_am_reader;
SELECT simhash_index_check('am_docs_fp');
RESET ROLE;
DROP ROLE regress_am_reader;
\set VERBOSITY default
DROP TABLE am_docs, am_queries, am_empty, am_unlogged;
DROP FUNCTION am_check(text), am_estimate(int);
