-- Memory (issue 35): the simhash index keeps to maintenance_work_mem when it is built or checked,
-- and its scans to work_mem, or an ERROR 54000 with a hint; never more memory than that.
\set VERBOSITY sqlstate

-- 60,000 rows: a third with one fingerprint (many copies), a third distinct, a third NULL.
CREATE TABLE mem (id int PRIMARY KEY, fp simhash64);
INSERT INTO mem
SELECT i, CASE i % 3 WHEN 0 THEN '00000000000000ff'::simhash64
                     WHEN 1 THEN lpad(to_hex(i * 2654435761), 16, '0')::simhash64 END
FROM generate_series(1, 60000) i;
ANALYZE mem;

-- Built within 1 MB: 40,000 rows with a fingerprint take 1.25 MB in memory, so the build moves
-- them to sorts that spill to disk. The index is whole, and answers as a sequential scan does.
SET maintenance_work_mem = '1MB';
\set VERBOSITY default
CREATE INDEX mem_fp ON mem USING simhash (fp);
\set VERBOSITY sqlstate
RESET maintenance_work_mem;
SELECT simhash_index_check('mem_fp');
-- (checked within 1 MB too: the TIDs sorted on disk)
SET maintenance_work_mem = '1MB';
SELECT simhash_index_check('mem_fp');
RESET maintenance_work_mem;
-- Built in memory, for comparison: the same size.
CREATE INDEX mem_fp_in_memory ON mem USING simhash (fp);
SELECT pg_relation_size('mem_fp') = pg_relation_size('mem_fp_in_memory') AS same_size;
DROP INDEX mem_fp_in_memory;

CREATE TEMP TABLE queries AS
SELECT q::simhash64 AS q, k FROM (VALUES ('00000000000000f0', 4), ('00000000000000ff', 0),
    (lpad(to_hex(301 * 2654435761), 16, '0'), 0), (lpad(to_hex(304 * 2654435761), 16, '0'), 11)) v(q, k);
CREATE TEMP TABLE expected AS
SELECT q, k, count(*) AS n, sum(id) AS ids FROM queries, mem WHERE fp <~> q <= k GROUP BY q, k;

-- A radius test whose matches take more than work_mem (20,000 copies within 4 bits at 64 kB,
-- where 4,096 fit): the index scan goes on as an ordered scan, which keeps to work_mem, and
-- finds the same rows; so does a bitmap scan (its bitmap keeps to work_mem).
SET work_mem = '64kB';
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM mem WHERE fp <~> '00000000000000f0' <= 4;
SELECT format('SELECT %L AS q, %s AS k, count(*) AS n, sum(id) = %s AS same FROM mem WHERE fp <~> %L <= %s',
              q, k, ids, q, k)
FROM expected ORDER BY n, q \gexec
-- Nearest first within the radius, from the same fallback: in order, the same rows.
SELECT count(*) AS n, sum(id) = (SELECT ids FROM expected WHERE k = 4) AS same_rows,
       bool_and(d >= prev) AS in_order
FROM (SELECT id, fp <~> '00000000000000f0' AS d, lag(fp <~> '00000000000000f0', 1, 0) OVER () AS prev
      FROM (SELECT id, fp FROM mem WHERE fp <~> '00000000000000f0' <= 4
            ORDER BY fp <-> '00000000000000f0') s) t;
-- Ordered around another fingerprint than the radius test's.
SELECT count(*) AS n FROM (SELECT id FROM mem WHERE fp <~> '00000000000000f0' <= 4
                           ORDER BY fp <-> '0000000000000000') s;
SET enable_indexscan = off;
SET enable_bitmapscan = on;
EXPLAIN (COSTS OFF) SELECT id FROM mem WHERE fp <~> '00000000000000f0' <= 4;
SELECT format('SELECT %L AS q, %s AS k, count(*) AS n, sum(id) = %s AS same FROM mem WHERE fp <~> %L <= %s',
              q, k, ids, q, k)
FROM expected ORDER BY n, q \gexec
RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_seqscan;

-- The near-duplicate constraint finds a near row through the same scan, within work_mem.
SELECT simhash_add_dedup('mem', 'fp', 3, 'error');
INSERT INTO mem VALUES (0, '00000000000000fe');
-- The deferred check at COMMIT looks up a thousand rows at a time, holding their matches: beyond
-- work_mem that is an ERROR 54000 (with a hint to raise it), not unbounded memory.
SELECT tgname FROM pg_trigger WHERE tgrelid = 'mem'::regclass ORDER BY 1;
DROP TRIGGER mem_fp_dedup ON mem;
SELECT simhash_add_dedup('mem', 'fp', 3, 'error', deferred => true);
INSERT INTO mem VALUES (0, '00000000000000fe');
RESET work_mem;
INSERT INTO mem VALUES (0, '00000000000000fe');
DROP TABLE mem;

-- The text functions work in memory that PostgreSQL does not see, several times the text's
-- size: each call estimates its need from the text's length and refuses (54000) a text that
-- would need more than simhash.max_text_memory, before allocating it.
SHOW simhash.max_text_memory;
SET simhash.max_text_memory = '1MB';
CREATE TEMP TABLE texts AS SELECT repeat('near duplicate 近似重复 ', 20000) AS t;  -- 560 kB
\set VERBOSITY default
SELECT simhash(t) FROM texts;
\set VERBOSITY sqlstate
SELECT simhash(t, 20) FROM texts;
SELECT minhash64(t) FROM texts;
SELECT simhash_ngrams(t) FROM texts;
SELECT length(simhash_fold(t)) FROM texts;
SELECT simhash_similarity(t, t) FROM texts;
SELECT simhash_containment(t, t) FROM texts;
SELECT count(*) FROM texts, simhash_features(t);
-- (a tenth of it fits)
SELECT simhash(left(t, 50000)) IS NOT NULL AS fits FROM texts;
RESET simhash.max_text_memory;
SELECT simhash(t) = simhash(t || '') AS same, simhash_similarity(t, t) FROM texts;
