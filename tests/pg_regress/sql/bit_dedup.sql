-- The near-duplicate constraint on bit(n) codes (src/dedup/, value::Code): actions error, skip and
-- report without and with the column's simhash index, the argument checks, codes of another length
-- (22026), the lookup's plan, and the rows skip keeps against a brute-force first-come rule.
SET jit = off;
\set VERBOSITY sqlstate
-- A code of 256 bits from a seed; a sparse mask (each bit set with probability 2^-n); the first n
-- bits set (a code XOR flip(n) is exactly n bits away).
CREATE FUNCTION pg_temp.code256(seed text) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT simhash_code(decode(md5(seed || 'a') || md5(seed || 'b'), 'hex'))::bit(256) $$;
CREATE FUNCTION pg_temp.mask256(seed text, n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT bit_and(pg_temp.code256(seed || '/' || j)) FROM generate_series(1, n) j $$;
CREATE FUNCTION pg_temp.flip(n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT (repeat('1', n) || repeat('0', 256 - n))::bit(256) $$;

-- 1. Without an index (k = 8): the helper warns; every row is looked up with a sequential scan.
CREATE TABLE bd (id integer PRIMARY KEY, code bit(256), note text);
SELECT simhash_add_dedup('bd', 'code', 8, 'error');
SELECT simhash_indexed('bd', 'code');
INSERT INTO bd VALUES (1, pg_temp.code256('a')), (2, pg_temp.code256('b'));
INSERT INTO bd VALUES (3, pg_temp.code256('a') # pg_temp.flip(8));   -- 8 bits from row 1: 23505
INSERT INTO bd VALUES (3, pg_temp.code256('a') # pg_temp.flip(9));   -- 9 bits: stored
INSERT INTO bd VALUES (4, NULL);                                       -- NULL never matches
INSERT INTO bd VALUES (5, pg_temp.code256('c')), (6, pg_temp.code256('c') # pg_temp.flip(1));  -- same statement
UPDATE bd SET code = pg_temp.code256('b') # pg_temp.flip(2) WHERE id = 1;   -- moves next to row 2
UPDATE bd SET note = 'code unchanged' WHERE id = 1;
DO $$
BEGIN
    INSERT INTO bd VALUES (7, pg_temp.code256('b') # pg_temp.flip(3));
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'caught %', SQLSTATE;
END $$;
SELECT id, note FROM bd ORDER BY id;

-- The argument checks: the radius of codes goes up to 4096 (22023 beyond, or NULL); actions as for
-- simhash64. (The deferred check on codes: bit_dedup_deferred; verification: bit_dedup_verify.)
-- (with the hint: the codes' range, named for the function called)
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT simhash_add_dedup('bd', 'code', -1);
SELECT simhash_add_dedup('bd', 'code', 4097);
SELECT simhash_add_dedup('bd', 'code', NULL);
\set VERBOSITY sqlstate
\set SHOW_CONTEXT errors
SELECT simhash_add_dedup('bd', 'code', 8, 'drop');
SELECT simhash_dedup_lookup('bd', 'code', 4097);
-- Triggers made by hand are checked alike.
CREATE TRIGGER by_hand BEFORE INSERT ON bd FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('code', '4097');
INSERT INTO bd VALUES (8, pg_temp.code256('d'));
DROP TRIGGER by_hand ON bd;

-- Codes of another length: 22026, as simhash_hamming raises (a bit varying column).
CREATE TABLE bv (id integer PRIMARY KEY, code bit varying);
SELECT simhash_add_dedup('bv', 'code', 4) IS NOT NULL AS attached;
INSERT INTO bv VALUES (1, pg_temp.code256('a'));
INSERT INTO bv VALUES (2, pg_temp.code256('a')::bit(128));
INSERT INTO bv VALUES (2, pg_temp.code256('b'));
SELECT count(*) FROM bv;

-- action 'skip' (a large radius: 100 of 256 bits): rows dropped, one NOTICE per statement.
SELECT simhash_add_dedup('bd', 'code', 100, 'skip') IS NOT NULL AS attached;
INSERT INTO bd VALUES (10, pg_temp.code256('a') # pg_temp.flip(100)), (11, pg_temp.code256('e')),
                      (12, pg_temp.code256('e') # pg_temp.flip(60)), (13, pg_temp.code256('e') # pg_temp.flip(101));
SELECT id FROM bd WHERE id >= 10 ORDER BY id;

-- action 'report': rows kept and recorded; the report table's codes are bit varying.
SELECT simhash_add_dedup('bd', 'code', 8, 'report');
INSERT INTO bd VALUES (20, pg_temp.code256('e') # pg_temp.flip(5));
SELECT relation, trigger_name, new_key, existing_key, distance,
       new_fingerprint = (pg_temp.code256('e') # pg_temp.flip(5))::bit varying AS same_code
FROM bd_near_duplicates;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'bd_near_duplicates'::regclass AND attname = 'new_fingerprint';
-- A report table made for a simhash64 column does not take codes (42804).
CREATE TABLE fp64 (id integer PRIMARY KEY, fp simhash64);
SELECT simhash_add_dedup('fp64', 'fp', 3, 'report', report_table => 'shared_report') IS NOT NULL AS attached;
SELECT simhash_add_dedup('bd', 'code', 8, 'report', report_table => 'shared_report');

-- 2. With the column's simhash index: the same actions; the lookup goes through the index.
CREATE INDEX bd_code ON bd USING simhash (code);
SELECT simhash_add_dedup('bd', 'code', 8, 'error');
SELECT simhash_indexed('bd', 'code');
INSERT INTO bd VALUES (30, pg_temp.code256('b') # pg_temp.flip(8));   -- 23505
INSERT INTO bd VALUES (30, pg_temp.code256('b') # pg_temp.flip(9));   -- stored
SELECT simhash_add_dedup('bd', 'code', 8, 'skip') IS NOT NULL AS attached;
INSERT INTO bd VALUES (31, pg_temp.code256('b') # pg_temp.flip(4)), (32, pg_temp.code256('f'));
SELECT simhash_add_dedup('bd', 'code', 8, 'report') IS NOT NULL AS attached;
INSERT INTO bd VALUES (33, pg_temp.code256('f') # pg_temp.flip(7));
SELECT new_key, existing_key, distance FROM bd_near_duplicates ORDER BY reported_at, new_key;
SELECT id FROM bd WHERE id >= 30 ORDER BY id;
-- The statement the trigger runs (with sequential scans off, as the trigger runs it, and in the
-- generic plan its prepared statement ends up with): the planner rewrite sends it to the index.
SET enable_seqscan = off;
SET plan_cache_mode = force_generic_plan;
SELECT simhash_dedup_lookup('bd', 'code', 8) AS lookup \gset
PREPARE lookup8(bit, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup8(pg_temp.code256('f'), '(0,0)');
EXECUTE lookup8(pg_temp.code256('f') # pg_temp.flip(3), '(0,0)');
DEALLOCATE lookup8;
RESET plan_cache_mode;
RESET enable_seqscan;
DROP TABLE bd, bv, fp64, shared_report, bd_near_duplicates;

-- 3. The rows kept equal a brute-force first-come rule: 3,000 rows in groups of 10 (a code and
-- masks of about 32, 16, 8 and 4 bits off it, k = 10), loaded in order by one INSERT ... SELECT
-- through the index, and 800 of them without one.
CREATE TABLE src AS
SELECT i, CASE WHEN i % 10 = 0 THEN pg_temp.code256((i / 10)::text)
               ELSE pg_temp.code256((i / 10)::text) # pg_temp.mask256(i::text, 3 + i % 4) END AS code
FROM generate_series(0, 2999) i;
CREATE FUNCTION pg_temp.first_come(k int, n int) RETURNS SETOF int LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    CREATE TEMP TABLE kept (i int, code bit(256));
    FOR r IN SELECT * FROM src WHERE i < n ORDER BY i LOOP
        IF NOT EXISTS (SELECT FROM kept WHERE bit_count(kept.code # r.code) <= k) THEN
            INSERT INTO kept VALUES (r.i, r.code);
        END IF;
    END LOOP;
    RETURN QUERY SELECT i FROM kept;
    DROP TABLE kept;
END $$;
CREATE TABLE bf (i integer PRIMARY KEY, code bit(256));
CREATE INDEX bf_code ON bf USING simhash (code);
SELECT simhash_add_dedup('bf', 'code', 10, 'skip') IS NOT NULL AS attached;
INSERT INTO bf SELECT i, code FROM src ORDER BY i;
CREATE TABLE expected AS SELECT pg_temp.first_come(10, 3000) AS i;
SELECT (SELECT count(*) FROM bf) AS kept, (SELECT count(*) FROM expected) AS expected,
       (SELECT count(*) FROM (SELECT i FROM bf EXCEPT SELECT i FROM expected) x) AS only_kept,
       (SELECT count(*) FROM (SELECT i FROM expected EXCEPT SELECT i FROM bf) x) AS only_expected;
CREATE TABLE bf_plain (i integer PRIMARY KEY, code bit(256));
SET client_min_messages = error;  -- (the WARNING about the missing index)
SELECT simhash_add_dedup('bf_plain', 'code', 10, 'skip') IS NOT NULL AS attached;
RESET client_min_messages;
INSERT INTO bf_plain SELECT i, code FROM src WHERE i < 800 ORDER BY i;
SELECT (SELECT count(*) FROM bf_plain) AS kept,
       (SELECT count(*) FROM (SELECT i FROM bf_plain EXCEPT SELECT pg_temp.first_come(10, 800)) x) AS only_kept,
       (SELECT count(*) FROM (SELECT pg_temp.first_come(10, 800) EXCEPT SELECT i FROM bf_plain) x) AS only_expected;
DROP TABLE src, bf, bf_plain, expected;
-- A trigger replaced (same OID) to guard a simhash64 column with the report table it used for a
-- column of codes: the INSERT into the report table is prepared again for the other type (the plan
-- kept for bit varying took the simhash64 for a pointer: the backend crashed).
CREATE TABLE rk (id integer PRIMARY KEY, code bit(8), fp simhash64);
CREATE TABLE rk_report (relation regclass, trigger_name text, new_key text, existing_key text,
                        distance integer NOT NULL, new_fingerprint bit varying,
                        reported_at timestamptz DEFAULT now(), similarity float8);
SET client_min_messages = error;  -- (the WARNING about the missing index)
CREATE TRIGGER rk_dedup BEFORE INSERT OR UPDATE ON rk FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('code', '1', 'report', 'rk_report');
INSERT INTO rk VALUES (1, B'00000000', '0000000000000000'), (2, B'00000001', '0000000000000001');
CREATE OR REPLACE TRIGGER rk_dedup BEFORE INSERT OR UPDATE ON rk FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '1', 'report', 'rk_report');
INSERT INTO rk VALUES (3, B'11111111', '0000000000000003');  -- 42804: no simhash64 into bit varying
RESET client_min_messages;
SELECT new_key, existing_key, distance, new_fingerprint FROM rk_report ORDER BY new_key;
DROP TABLE rk, rk_report;
-- The column's type changed in the transaction after rows were checked: the commit-time recheck
-- does not read the new values as codes (an int8 read as a pointer crashed the backend) nor as
-- fingerprints; the constraint no longer applies to the column.
CREATE TABLE ty (id integer PRIMARY KEY, code bit(64));
SET client_min_messages = error;
SELECT simhash_add_dedup('ty', 'code', 3) IS NOT NULL AS attached;
RESET client_min_messages;
BEGIN;
SET LOCAL client_min_messages = error;
INSERT INTO ty VALUES (1, 1::bit(64)), (2, 255::bit(64));
ALTER TABLE ty ALTER COLUMN code TYPE bigint USING code::bigint;
COMMIT;
BEGIN;
SET LOCAL client_min_messages = error;
ALTER TABLE ty ALTER COLUMN code TYPE bit(64) USING code::bit(64);
INSERT INTO ty VALUES (3, 65535::bit(64));
ALTER TABLE ty ALTER COLUMN code TYPE text USING code::text;
COMMIT;
SELECT id, length(code) FROM ty ORDER BY id;
BEGIN;
ALTER TABLE ty ALTER COLUMN code TYPE bit(64) USING code::bit(64);
SET LOCAL client_min_messages = error;
INSERT INTO ty VALUES (4, repeat('1', 64)::bit(64));
ALTER TABLE ty DROP COLUMN code;
COMMIT;
SELECT count(*) FROM ty;
DROP TABLE ty;
-- A column of bit varying (and a domain over it) with its simhash index: the trigger's lookup
-- takes the index (it scanned the table at every row).
CREATE DOMAIN code16 AS bit varying(16);
CREATE TABLE vb (id integer PRIMARY KEY, code bit varying, dcode code16);
CREATE INDEX vb_code ON vb USING simhash (code);
CREATE INDEX vb_dcode ON vb USING simhash (dcode);
SET enable_seqscan = off;
SET plan_cache_mode = force_generic_plan;
SELECT simhash_dedup_lookup('vb', 'code', 2) AS lookup \gset
PREPARE lookup_vb(bit, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup_vb(B'1010', '(0,0)');
SELECT simhash_dedup_lookup('vb', 'dcode', 2) AS lookup \gset
PREPARE lookup_vbd(bit, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup_vbd(B'1010', '(0,0)');
DEALLOCATE lookup_vb;
DEALLOCATE lookup_vbd;
RESET enable_seqscan;
RESET plan_cache_mode;
SELECT simhash_add_dedup('vb', 'code', 2) IS NOT NULL AS attached;
INSERT INTO vb VALUES (1, B'10101010'), (2, B'01010101');
INSERT INTO vb VALUES (3, B'10101001');  -- 2 bits from row 1: 23505
INSERT INTO vb VALUES (4, B'1010');      -- another length: 22026
SELECT id, code FROM vb ORDER BY id;
DROP TABLE vb;
DROP DOMAIN code16;
-- A code of another length kept from a row rolled back (or deleted) does not fail the commit: at
-- commit, codes of unequal lengths are never near (the row's own lookup raises 22026 against the
-- stored codes it sees).
CREATE TABLE vn (id integer PRIMARY KEY, code bit varying);
SET client_min_messages = error;
SELECT simhash_add_dedup('vn', 'code', 1) IS NOT NULL AS attached;
BEGIN;
SAVEPOINT a;
INSERT INTO vn VALUES (1, B'1010');
ROLLBACK TO a;
INSERT INTO vn VALUES (2, B'10101010');
COMMIT;
TRUNCATE vn;
BEGIN;
INSERT INTO vn VALUES (3, B'1111');
DELETE FROM vn WHERE id = 3;
INSERT INTO vn VALUES (4, B'01010101');
COMMIT;
INSERT INTO vn VALUES (5, B'1111');      -- another length than row 4: 22026
INSERT INTO vn VALUES (6, B'01010100');  -- 1 bit from row 4: 23505
RESET client_min_messages;
SELECT id, code FROM vn ORDER BY id;
DROP TABLE vn;
