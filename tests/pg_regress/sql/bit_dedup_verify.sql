-- The verified near-duplicate check on bit(n) codes (simhash_add_dedup(..., verify => 'body')): a
-- stored row within k is a near-duplicate only if its text is at least min_similarity similar, at
-- each row (the lookup through the column's simhash index) and deferred; the argument checks; the
-- rows kept against a brute-force verified first-come rule.
SET jit = off;
\set VERBOSITY sqlstate
CREATE FUNCTION pg_temp.code256(seed text) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT simhash_code(decode(md5(seed || 'a') || md5(seed || 'b'), 'hex'))::bit(256) $$;
CREATE FUNCTION pg_temp.flip(n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT (repeat('1', n) || repeat('0', 256 - n))::bit(256) $$;
CREATE FUNCTION pg_temp.words(seed text) RETURNS text LANGUAGE sql IMMUTABLE
    AS $$ SELECT string_agg(md5(seed || j), ' ') FROM generate_series(1, 8) j $$;

-- 1. At each row, with the column's simhash index (k = 8): within k and similar, 23505; within k
-- and unrelated, stored; a NULL text never matches. The lookup takes the index.
CREATE TABLE vc (id integer PRIMARY KEY, code bit(256), body text);
CREATE INDEX vc_code ON vc USING simhash (code);
SELECT simhash_add_dedup('vc', 'code', 8, 'error', verify => 'body');
INSERT INTO vc VALUES (1, pg_temp.code256('a'), pg_temp.words('a'));
INSERT INTO vc VALUES (2, pg_temp.code256('a') # pg_temp.flip(8), pg_temp.words('a') || '!');  -- 23505
INSERT INTO vc VALUES (2, pg_temp.code256('a') # pg_temp.flip(8), pg_temp.words('z'));         -- unrelated: stored
INSERT INTO vc VALUES (3, pg_temp.code256('a') # pg_temp.flip(3), NULL);                       -- NULL: stored
INSERT INTO vc VALUES (4, pg_temp.code256('a') # pg_temp.flip(9), pg_temp.words('a'));         -- 9 bits: stored
SELECT id FROM vc ORDER BY id;
SET enable_seqscan = off;
SET plan_cache_mode = force_generic_plan;
SELECT simhash_dedup_lookup('vc', 'code', 8, 'body') AS lookup \gset
PREPARE lookup_v(bit, tid, text) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup_v(pg_temp.code256('a'), '(0,0)', 'x');
EXECUTE lookup_v(pg_temp.code256('a') # pg_temp.flip(1), '(0,0)', pg_temp.words('z'));
DEALLOCATE lookup_v;
RESET plan_cache_mode;
RESET enable_seqscan;
-- The arguments: min_similarity and n out of range (22023; NULL too, which would otherwise make
-- a trigger that refuses every row), a missing text column (42703), one that is not text (42804).
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'body', min_similarity => 1.5);
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'body', n => 0);
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'body', min_similarity => NULL);
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'body', n => NULL);
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'nope');
SELECT simhash_add_dedup('vc', 'code', 8, verify => 'id');

-- 2. Deferred, action 'skip': the transaction's own rows are compared by text too.
SELECT simhash_add_dedup('vc', 'code', 8, 'skip', verify => 'body', deferred => true) IS NOT NULL AS attached;
BEGIN;
INSERT INTO vc VALUES (10, pg_temp.code256('b'), pg_temp.words('b'));
INSERT INTO vc VALUES (11, pg_temp.code256('b') # pg_temp.flip(4), pg_temp.words('b') || '.');  -- skipped
INSERT INTO vc VALUES (12, pg_temp.code256('b') # pg_temp.flip(5), pg_temp.words('y'));         -- kept
INSERT INTO vc VALUES (13, pg_temp.code256('a') # pg_temp.flip(2), pg_temp.words('a') || '?');  -- near row 1: skipped
COMMIT;
SELECT id FROM vc ORDER BY id;

-- 3. The rows kept equal a brute-force verified first-come rule: 600 rows in groups of 6 (a code
-- and codes 3 to 12 bits off it, k = 10), each text either its group's (one character changed) or
-- unrelated; at each row through the index and deferred without one.
CREATE TABLE src AS
SELECT i, pg_temp.code256((i / 6)::text) # (pg_temp.flip(i % 6 * 2) >> (i % 5 * 40)) AS code,
       CASE WHEN hashint4(i) % 3 = 0 THEN pg_temp.words('other' || i)
            ELSE overlay(pg_temp.words((i / 6)::text) placing 'Z' from 1 + i % 60 for 1) END AS body
FROM generate_series(0, 599) i;
CREATE FUNCTION pg_temp.first_come(k int) RETURNS SETOF int LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    CREATE TEMP TABLE kept (i int, code bit(256), body text);
    FOR r IN SELECT * FROM src ORDER BY i LOOP
        IF NOT EXISTS (SELECT FROM kept WHERE bit_count(kept.code # r.code) <= k
                                         AND simhash_similarity(kept.body, r.body) >= 0.7) THEN
            INSERT INTO kept VALUES (r.i, r.code, r.body);
        END IF;
    END LOOP;
    RETURN QUERY SELECT i FROM kept;
    DROP TABLE kept;
END $$;
CREATE TABLE expected AS SELECT pg_temp.first_come(10) AS i;
CREATE TABLE bf (i integer PRIMARY KEY, code bit(256), body text);
CREATE INDEX bf_code ON bf USING simhash (code);
SELECT simhash_add_dedup('bf', 'code', 10, 'skip', verify => 'body') IS NOT NULL AS attached;
INSERT INTO bf SELECT * FROM src ORDER BY i;
CREATE TABLE bf_deferred (i integer PRIMARY KEY, code bit(256), body text);
SET client_min_messages = error;  -- (the WARNING about the missing index)
SELECT simhash_add_dedup('bf_deferred', 'code', 10, 'skip', verify => 'body', deferred => true) IS NOT NULL AS attached;
INSERT INTO bf_deferred SELECT * FROM src ORDER BY i;
RESET client_min_messages;
SELECT (SELECT count(*) FROM expected) AS expected,
       (SELECT count(*) FROM src s WHERE NOT EXISTS (SELECT FROM expected e WHERE e.i = s.i)) AS refused,
       (SELECT count(*) FROM expected e WHERE EXISTS (SELECT FROM src a JOIN src b ON a.i < b.i
            WHERE e.i = b.i AND bit_count(a.code # b.code) <= 10)) AS kept_within_k,
       (SELECT count(*) FROM (SELECT i FROM bf EXCEPT SELECT i FROM expected) x)
     + (SELECT count(*) FROM (SELECT i FROM expected EXCEPT SELECT i FROM bf) x) AS differ_at_each_row,
       (SELECT count(*) FROM (SELECT i FROM bf_deferred EXCEPT SELECT i FROM expected) x)
     + (SELECT count(*) FROM (SELECT i FROM expected EXCEPT SELECT i FROM bf_deferred) x) AS differ_deferred;
DROP TABLE vc, src, expected, bf, bf_deferred;
