-- The tail of an index of codes (the rows inserted after its build) as a backend keeps a copy of
-- it (src/index/codes/tail.rs): radius lookups through the index equal a sequential scan of
-- bit_count(code # q) before the copy is kept, once it is, after more inserts (read from where
-- it stopped), and after DELETE + VACUUM + inserts that reuse the removed rows' TIDs with other
-- codes (the copy is dropped: a stale one would return those rows). Nearest rows (ORDER BY) through
-- the index equal a sort by distance and TID at each stage: by passes over the tail before the
-- copy is kept, by rounds of lookups through the copy once it is.
SET jit = off;
\set VERBOSITY sqlstate
CREATE FUNCTION pg_temp.code(seed text) RETURNS bit(64) LANGUAGE sql IMMUTABLE
    AS $$ SELECT simhash_code(decode(md5(seed), 'hex'))::bit(64) $$;
-- Groups of 8 rows: a code and copies of it with up to 7 bits flipped.
CREATE FUNCTION pg_temp.row_code(i int, salt text) RETURNS bit(64) LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_temp.code(salt || (i / 8)) # (repeat('1', i % 8) || repeat('0', 64 - i % 8))::bit(64) $$;
CREATE TABLE tail_t (i int, code bit(64)) WITH (autovacuum_enabled = off);
CREATE INDEX tail_t_code ON tail_t USING simhash (code);
INSERT INTO tail_t SELECT i, pg_temp.row_code(i, '') FROM generate_series(1, 3000) i;
SELECT simhash_index_check('tail_t_code') AS checked;

-- Each query row looked up through the index (one scan each) and by brute force: the rows that
-- differ, and the matches.
CREATE FUNCTION pg_temp.compare(k int) RETURNS TABLE (lookups bigint, matches bigint, differ bigint)
LANGUAGE sql AS $$
    SELECT count(*), sum(through), count(*) FILTER (WHERE through <> brute OR through_ids <> brute_ids)
    FROM (SELECT (SELECT count(*) FROM tail_t t WHERE t.code <@ simhash_code_ball(q.code, k)) AS through,
                 (SELECT array_agg(t.i ORDER BY t.i) FROM tail_t t WHERE t.code <@ simhash_code_ball(q.code, k)) AS through_ids,
                 (SELECT count(*) FROM tail_t t WHERE bit_count(t.code # q.code) <= k) AS brute,
                 (SELECT array_agg(t.i ORDER BY t.i) FROM tail_t t WHERE bit_count(t.code # q.code) <= k) AS brute_ids
          FROM tail_t q WHERE q.i % 50 = 3) s
$$;
-- The 10 nearest rows of query rows and of codes far from every row, through the index (ties in
-- TID order) and by a sort: the queries whose rows differ.
CREATE FUNCTION pg_temp.compare_nearest() RETURNS TABLE (queries bigint, differ bigint)
LANGUAGE sql AS $$
    SELECT count(*), count(*) FILTER (WHERE through IS DISTINCT FROM sorted)
    FROM (SELECT (SELECT array_agg(i) FROM (SELECT t.i FROM tail_t t ORDER BY t.code <-> simhash_code_ball(q.code, 0) LIMIT 10) x) AS through,
                 (SELECT array_agg(i) FROM (SELECT t.i FROM tail_t t ORDER BY bit_count(t.code # q.code), t.ctid LIMIT 10) x) AS sorted
          FROM (SELECT code FROM tail_t WHERE i % 100 = 7
                UNION ALL SELECT pg_temp.code('far' || n) FROM generate_series(1, 10) n) q) s
$$;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM tail_t t WHERE t.code <@ simhash_code_ball(B'0'::bit(64), 4);
EXPLAIN (COSTS OFF) SELECT t.i FROM tail_t t ORDER BY t.code <-> simhash_code_ball(B'0'::bit(64), 0) LIMIT 10;
SELECT * FROM pg_temp.compare_nearest();
-- The first lookups read the tail whole; the later ones its copy.
SELECT k, c.* FROM unnest(ARRAY[0, 3, 8, 20]) k, pg_temp.compare(k) c;
SELECT * FROM pg_temp.compare_nearest();
-- More rows: the copy reads those after where it stopped.
INSERT INTO tail_t SELECT i, pg_temp.row_code(i, '') FROM generate_series(3001, 4000) i;
SELECT k, c.* FROM unnest(ARRAY[0, 3, 8]) k, pg_temp.compare(k) c;
-- Rows removed by VACUUM, and their TIDs reused by rows of other codes.
CREATE TABLE removed AS SELECT ctid AS tid FROM tail_t WHERE i % 4 = 1;
DELETE FROM tail_t WHERE i % 4 = 1;
VACUUM tail_t;
INSERT INTO tail_t SELECT i, pg_temp.row_code(i, 'other') FROM generate_series(5001, 6000) i;
SELECT count(*) > 100 AS tids_reused FROM tail_t WHERE ctid IN (SELECT tid FROM removed);
SELECT k, c.* FROM unnest(ARRAY[0, 3, 8]) k, pg_temp.compare(k) c;
SELECT * FROM pg_temp.compare_nearest();
SELECT simhash_index_check('tail_t_code') AS checked;
-- A setting too small for the tail (the copy dropped), then none (0): the same answers.
SET simhash.index_tail_memory = '200kB';
SELECT k, c.* FROM unnest(ARRAY[3]) k, pg_temp.compare(k) c;
SET simhash.index_tail_memory = 0;
SELECT k, c.* FROM unnest(ARRAY[3]) k, pg_temp.compare(k) c;
SET simhash.index_tail_memory = -1;
RESET simhash.index_tail_memory;
RESET enable_seqscan;
DROP TABLE tail_t, removed;
