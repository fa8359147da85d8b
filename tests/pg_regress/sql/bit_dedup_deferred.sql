-- The deferred near-duplicate check on bit(n) codes (simhash_add_dedup(..., deferred => true),
-- src/dedup/deferred.rs with value::Code): rows judged at COMMIT in the order written, against
-- committed rows and the transaction's earlier kept rows; UPDATEs, savepoints, codes of another
-- length, codes stored out of line (TOAST), and the rows kept against a brute-force first-come rule
-- with and without the column's simhash index.
SET jit = off;
\set VERBOSITY sqlstate
CREATE FUNCTION pg_temp.code256(seed text) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT simhash_code(decode(md5(seed || 'a') || md5(seed || 'b'), 'hex'))::bit(256) $$;
CREATE FUNCTION pg_temp.mask256(seed text, n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT bit_and(pg_temp.code256(seed || '/' || j)) FROM generate_series(1, n) j $$;
CREATE FUNCTION pg_temp.flip(n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT (repeat('1', n) || repeat('0', 256 - n))::bit(256) $$;

-- 1. Action 'error' (k = 8, the column's simhash index): near rows in one transaction pass each
-- statement and fail the COMMIT (23505); a committed row refuses a later transaction's row at its
-- COMMIT; rows of a rolled-back savepoint, and a row moved away by an UPDATE, do not count.
CREATE TABLE dc (id integer PRIMARY KEY, code bit(256));
CREATE INDEX dc_code ON dc USING simhash (code);
SELECT simhash_add_dedup('dc', 'code', 8, 'error', deferred => true);
SELECT tgname, tgtype & 2 = 0 AS after_row, tgdeferrable FROM pg_trigger WHERE tgrelid = 'dc'::regclass AND NOT tgisinternal ORDER BY 1;
BEGIN;
INSERT INTO dc VALUES (1, pg_temp.code256('a'));
INSERT INTO dc VALUES (2, pg_temp.code256('a') # pg_temp.flip(8));   -- passes the statement
SELECT count(*) FROM dc;
COMMIT;                                                               -- 23505
SELECT count(*) FROM dc;
BEGIN;
INSERT INTO dc VALUES (1, pg_temp.code256('a'));
SAVEPOINT s;
INSERT INTO dc VALUES (2, pg_temp.code256('a') # pg_temp.flip(3));
ROLLBACK TO s;
INSERT INTO dc VALUES (3, pg_temp.code256('a') # pg_temp.flip(9));   -- 9 bits: kept
INSERT INTO dc VALUES (4, pg_temp.code256('b'));
UPDATE dc SET code = pg_temp.code256('c') WHERE id = 4;
INSERT INTO dc VALUES (5, pg_temp.code256('b') # pg_temp.flip(2));   -- row 4 moved away: kept
COMMIT;
SELECT id FROM dc ORDER BY id;
BEGIN;
INSERT INTO dc VALUES (6, pg_temp.code256('c') # pg_temp.flip(5));   -- near the committed row 4
COMMIT;                                                               -- 23505
-- An UPDATE of a committed row that keeps its code is not checked; one that moves it next to
-- another committed row is.
UPDATE dc SET id = 40 WHERE id = 4;
UPDATE dc SET code = pg_temp.code256('a') # pg_temp.flip(1) WHERE id = 5;   -- 23505 at its COMMIT
SELECT id FROM dc ORDER BY id;
-- Not deferred: the action 'report' (0A000). (Verified and deferred: bit_dedup_verify.)
SELECT simhash_add_dedup('dc', 'code', 8, 'report', deferred => true);

-- 2. Action 'skip': refused rows are deleted at COMMIT with one NOTICE; a row near a committed
-- row goes too. A bit varying column: codes of another length are never near at COMMIT (the check
-- at each row raises 22026 when its lookup meets one).
CREATE TABLE dv (id integer PRIMARY KEY, code bit varying);
SET client_min_messages = error;  -- (the WARNING about the missing index)
SELECT simhash_add_dedup('dv', 'code', 2, 'skip', deferred => true) IS NOT NULL AS attached;
RESET client_min_messages;
INSERT INTO dv VALUES (1, B'10101010'), (2, B'10101011'), (3, B'1010'), (4, B'1011'), (5, B'0101010101'), (6, NULL);
SELECT id, code FROM dv ORDER BY id;
INSERT INTO dv VALUES (7, B'10111010'), (8, B'0101');   -- 7: 1 bit from row 1, skipped; 8: kept
SELECT id, code FROM dv ORDER BY id;

-- 3. Codes stored out of line (TOAST): read at COMMIT with a snapshot, by the deferred check and
-- by the commit-time recheck of the check at each row (which failed there with XX000 without one).
CREATE TABLE dt (i int, code bit(4096), c2 bit(4096), c3 bit(4096), c4 bit(4096));
ALTER TABLE dt ALTER code SET STORAGE EXTERNAL, ALTER c2 SET STORAGE PLAIN,
    ALTER c3 SET STORAGE PLAIN, ALTER c4 SET STORAGE PLAIN;
CREATE FUNCTION pg_temp.load_dt() RETURNS void LANGUAGE sql AS $$
    INSERT INTO dt SELECT i, c, c, c, c
    FROM (SELECT i, repeat(pg_temp.code256((i % 3)::text)::text, 16)::bit(4096) AS c FROM generate_series(1, 10) i) s $$;
SET client_min_messages = error;
SELECT simhash_add_dedup('dt', 'code', 8, 'skip', deferred => true) IS NOT NULL AS attached;
RESET client_min_messages;
SELECT pg_temp.load_dt();
SELECT array_agg(i ORDER BY i) AS kept, (SELECT pg_relation_size(reltoastrelid) > 0 FROM pg_class WHERE oid = 'dt'::regclass) AS out_of_line FROM dt;
TRUNCATE dt;
SET client_min_messages = error;
SELECT simhash_add_dedup('dt', 'code', 8, 'skip') IS NOT NULL AS attached;
RESET client_min_messages;
SELECT pg_temp.load_dt();
SELECT array_agg(i ORDER BY i) AS kept FROM dt;

-- 4. The rows kept equal a brute-force first-come rule: 3,000 rows in groups of 10 (a code and
-- masks of about 32, 16, 8 and 4 bits off it, k = 10) loaded in one transaction, in order, with
-- the column's simhash index and (800 rows) without one; with a committed row near some of them.
CREATE TABLE src AS
SELECT i, CASE WHEN i % 10 = 0 THEN pg_temp.code256((i / 10)::text)
               ELSE pg_temp.code256((i / 10)::text) # pg_temp.mask256(i::text, 3 + i % 4) END AS code
FROM generate_series(0, 2999) i;
CREATE FUNCTION pg_temp.first_come(k int, n int) RETURNS SETOF int LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    CREATE TEMP TABLE kept (i int, code bit(256));
    INSERT INTO kept SELECT -1, code FROM src WHERE i = 77;  -- the committed row
    FOR r IN SELECT * FROM src WHERE i < n ORDER BY i LOOP
        IF NOT EXISTS (SELECT FROM kept WHERE bit_count(kept.code # r.code) <= k) THEN
            INSERT INTO kept VALUES (r.i, r.code);
        END IF;
    END LOOP;
    RETURN QUERY SELECT i FROM kept WHERE i >= 0;
    DROP TABLE kept;
END $$;
CREATE TABLE bf (i integer PRIMARY KEY, code bit(256));
CREATE INDEX bf_code ON bf USING simhash (code);
SELECT simhash_add_dedup('bf', 'code', 10, 'skip', deferred => true) IS NOT NULL AS attached;
INSERT INTO bf SELECT -1, code FROM src WHERE i = 77;
BEGIN;
INSERT INTO bf SELECT i, code FROM src WHERE i < 1500 ORDER BY i;
INSERT INTO bf SELECT i, code FROM src WHERE i >= 1500 ORDER BY i;
COMMIT;
CREATE TABLE expected AS SELECT pg_temp.first_come(10, 3000) AS i;
SELECT (SELECT count(*) FROM bf WHERE i >= 0) AS kept, (SELECT count(*) FROM expected) AS expected,
       (SELECT count(*) FROM (SELECT i FROM bf WHERE i >= 0 EXCEPT SELECT i FROM expected) x) AS only_kept,
       (SELECT count(*) FROM (SELECT i FROM expected EXCEPT SELECT i FROM bf) x) AS only_expected;
CREATE TABLE bf_plain (i integer PRIMARY KEY, code bit(256));
SET client_min_messages = error;  -- (the WARNING about the missing index)
SELECT simhash_add_dedup('bf_plain', 'code', 10, 'skip', deferred => true) IS NOT NULL AS attached;
INSERT INTO bf_plain SELECT -1, code FROM src WHERE i = 77;
INSERT INTO bf_plain SELECT i, code FROM src WHERE i < 800 ORDER BY i;
RESET client_min_messages;
SELECT (SELECT count(*) FROM bf_plain WHERE i >= 0) AS kept,
       (SELECT count(*) FROM (SELECT i FROM bf_plain WHERE i >= 0 EXCEPT SELECT pg_temp.first_come(10, 800)) x) AS only_kept,
       (SELECT count(*) FROM (SELECT pg_temp.first_come(10, 800) EXCEPT SELECT i FROM bf_plain WHERE i >= 0) x) AS only_expected;
-- 5. A row the transaction inserted, updated to a NULL code (not remembered) and then onto a
-- near-duplicate is deleted whole by 'skip' (it failed the COMMIT with 23505, taken for a row
-- older than the transaction); a committed row taken the same way still fails with 23505.
CREATE TABLE dn (id integer PRIMARY KEY, code bit(16));
SET client_min_messages = error;
SELECT simhash_add_dedup('dn', 'code', 2, 'skip', deferred => true) IS NOT NULL AS attached;
INSERT INTO dn VALUES (1, B'1111000011110000'), (3, B'0011001100110011');  -- (the WARNING about the missing index)
RESET client_min_messages;
BEGIN;
INSERT INTO dn VALUES (2, B'0000000000000000');
UPDATE dn SET code = NULL WHERE id = 2;
UPDATE dn SET code = B'1111000011110001' WHERE id = 2;
COMMIT;                                                               -- NOTICE: 1 skipped
SELECT id FROM dn ORDER BY id;
BEGIN;
UPDATE dn SET code = NULL WHERE id = 3;
UPDATE dn SET code = B'1111000011110011' WHERE id = 3;
COMMIT;                                                               -- 23505
SELECT id, code FROM dn ORDER BY id;
DROP TABLE dc, dv, dt, src, bf, bf_plain, expected, dn;
