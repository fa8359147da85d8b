-- The deferred near-duplicate check: simhash_add_dedup(..., deferred => true). The rows a
-- transaction writes are stored at once and checked together when it commits, in the order
-- written: a row within k of a committed row, or of an earlier row of the transaction that was
-- kept, is refused (error) or deleted (skip).
CREATE TABLE ddocs (id integer PRIMARY KEY, fp simhash64, body text);
SELECT simhash_create_indexes('ddocs', 'fp');
SELECT simhash_add_dedup('ddocs', 'fp', 3, 'error', deferred => true);
SELECT tgname, tgtype & 2 = 2 AS before, pg_get_triggerdef(oid) LIKE '%AFTER INSERT OR UPDATE%' AS after
FROM pg_trigger WHERE tgrelid = 'ddocs'::regclass AND NOT tgisinternal ORDER BY tgname;

-- action 'error': near-duplicates within one transaction are seen only at commit.
INSERT INTO ddocs VALUES (1, '0000000000000000'), (2, 'ffffffffffffffff');
BEGIN;
INSERT INTO ddocs VALUES (3, '0000000000000007');          -- distance 3 from row 1
SELECT count(*) FROM ddocs;                                -- stored until commit
COMMIT;
BEGIN;
INSERT INTO ddocs VALUES (3, 'f0f0f0f0f0f0f0f0');
INSERT INTO ddocs VALUES (4, 'f0f0f0f0f0f0f0f1');          -- within the transaction
COMMIT;
-- The SQLSTATE, as an ETL job would check it (raised by COMMIT, here by the implicit one).
\set VERBOSITY sqlstate
INSERT INTO ddocs VALUES (5, 'fffffffffffffffe');
\set VERBOSITY default
SELECT id, fp FROM ddocs ORDER BY id;
-- A near-duplicate deleted, updated away or rolled back before the commit does not count.
BEGIN;
INSERT INTO ddocs VALUES (6, '1111111111111111');
INSERT INTO ddocs VALUES (7, '1111111111111110');
DELETE FROM ddocs WHERE id = 6;
INSERT INTO ddocs VALUES (8, '2222222222222222');
UPDATE ddocs SET fp = '3333333333333333' WHERE id = 8;
INSERT INTO ddocs VALUES (9, '2222222222222223');
SAVEPOINT s;
INSERT INTO ddocs VALUES (10, '4444444444444444');
ROLLBACK TO SAVEPOINT s;
INSERT INTO ddocs VALUES (11, '4444444444444445');
COMMIT;
SELECT id, fp FROM ddocs ORDER BY id;
-- A row updated onto a near-duplicate, and a row of this transaction updated (its new version is
-- checked, even with the fingerprint unchanged).
UPDATE ddocs SET fp = '0000000000000001' WHERE id = 11;
BEGIN;
INSERT INTO ddocs VALUES (12, '5555555555555555');
UPDATE ddocs SET body = 'changed' WHERE id = 12;
INSERT INTO ddocs VALUES (13, '5555555555555554');
COMMIT;
-- An older row updated without changing its fingerprint is not checked.
UPDATE ddocs SET body = 'unchanged fingerprint' WHERE id = 1;
SELECT id, fp, body FROM ddocs ORDER BY id;

-- action 'skip': the later of two near-duplicates is deleted at commit, one NOTICE per table.
SELECT simhash_add_dedup('ddocs', 'fp', 3, 'skip', deferred => true);
SELECT tgname FROM pg_trigger WHERE tgrelid = 'ddocs'::regclass AND NOT tgisinternal ORDER BY tgname;
BEGIN;
INSERT INTO ddocs VALUES (20, '0000000000000003'),        -- near row 1 (committed): skipped
                         (21, 'c0c0c0c0c0c0c0c0'),        -- kept
                         (22, 'c0c0c0c0c0c0c0c1'),        -- near row 21: skipped
                         (23, 'c0c0c0c0c0c0c0c3');        -- near row 21 (and 22, skipped): skipped
COPY ddocs (id, fp) FROM stdin;
24	1234123412341236
25	1234123412341237
\.
INSERT INTO ddocs VALUES (26, 'c0c0c0c0c0c0c0c0');        -- a copy of row 21: skipped
SELECT count(*) FROM ddocs WHERE id >= 20;                 -- all stored until commit
COMMIT;
SELECT id, fp FROM ddocs WHERE id >= 20 ORDER BY id;
-- Skipped rows never reach a later statement of another transaction; the count of each commit.
BEGIN;
INSERT INTO ddocs SELECT 100 + g, ('x' || md5('far' || g % 5))::bit(64)::bigint::simhash64
FROM generate_series(1, 300) g;                            -- 300 rows, 5 fingerprints far from the rest
COMMIT;
SELECT count(*), count(DISTINCT fp), min(id), max(id) FROM ddocs WHERE id > 100;
-- An update of an older row onto a near-duplicate cannot be skipped (deleting it would lose the
-- row): it fails as with 'error'.
UPDATE ddocs SET fp = '8000000000000002' WHERE id = 2;
SELECT id, fp FROM ddocs WHERE id = 2;
-- A skip that would delete a row of a table with DELETE triggers fails (55000): the triggers
-- could not run.
CREATE FUNCTION pg_temp.nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$;
CREATE TRIGGER ddocs_on_delete BEFORE DELETE ON ddocs FOR EACH ROW EXECUTE FUNCTION pg_temp.nothing();
INSERT INTO ddocs VALUES (30, '0000000000000003');
INSERT INTO ddocs VALUES (31, '7777777777777777');         -- nothing to skip: fine
DROP TRIGGER ddocs_on_delete ON ddocs;

-- Many rows at k = 11, checked through the simhash index: the same rows kept as by the check at
-- each row.
CREATE TABLE dbig (id integer PRIMARY KEY, fp simhash64);
CREATE TABLE dbig_row (id integer PRIMARY KEY, fp simhash64);
SELECT simhash_create_indexes('dbig', 'fp', 'simhash');
SELECT simhash_create_indexes('dbig_row', 'fp', 'simhash');
INSERT INTO dbig SELECT g, ('x' || md5(g::text))::bit(64)::bigint::simhash64 FROM generate_series(1, 2000) g;
INSERT INTO dbig_row SELECT * FROM dbig;
SELECT simhash_add_dedup('dbig', 'fp', 11, 'skip', deferred => true);
SELECT simhash_add_dedup('dbig_row', 'fp', 11, 'skip');
-- New rows: 400 variants of stored rows, 200 variants of 40 new seeds (within 8 bits of each
-- other: the first of a seed is kept), 400 random (a few bits flipped).
CREATE TEMP TABLE dnew AS
SELECT 10000 + g AS id,
       (CASE WHEN g % 5 < 2 THEN ('x' || md5((1 + g % 700)::text))::bit(64)::bigint
             WHEN g % 5 = 2 THEN ('x' || md5('seed' || g % 40))::bit(64)::bigint
             ELSE ('x' || md5('new' || g))::bit(64)::bigint END
        # (1::bigint << (g % 61)) # (7::bigint << (g % 13)))::simhash64 AS fp
FROM generate_series(1, 1000) g;
SET client_min_messages = warning;
INSERT INTO dbig SELECT * FROM dnew ORDER BY id;
INSERT INTO dbig_row SELECT * FROM dnew ORDER BY id;
RESET client_min_messages;
SELECT (SELECT count(*) FROM dbig) AS deferred_rows, (SELECT count(*) FROM dbig_row) AS row_rows,
       (SELECT count(*) FROM (TABLE dbig EXCEPT TABLE dbig_row) d) AS differ;
SELECT count(*) AS near_pairs FROM dbig a JOIN dbig b ON a.id < b.id AND a.fp <~> b.fp <= 11;

-- A table rewritten or truncated after the transaction wrote rows to it: the rows were moved, so
-- the COMMIT fails (55000). Before the first row, either is fine.
CREATE TABLE drw (id integer PRIMARY KEY, fp simhash64, n integer);
SELECT count(*) FROM simhash_create_indexes('drw', 'fp');
SELECT simhash_add_dedup('drw', 'fp', 3, 'skip', deferred => true);
BEGIN;
INSERT INTO drw VALUES (1, '0000000000000000', 1), (2, '0000000000000001', 2);
ALTER TABLE drw ALTER COLUMN n TYPE bigint;
COMMIT;
BEGIN;
INSERT INTO drw VALUES (1, '0000000000000000', 1);
TRUNCATE drw;
COMMIT;
BEGIN;
TRUNCATE drw;
ALTER TABLE drw ALTER COLUMN n TYPE bigint;
INSERT INTO drw VALUES (1, '0000000000000000', 1), (2, '0000000000000001', 2);
COMMIT;
SELECT id, fp FROM drw;

-- Rows of the transaction that the trigger did not remember count like stored rows: an UPDATE of
-- an older row that keeps its fingerprint (its new version is the transaction's), rows written
-- while the trigger was disabled. Switching between the check at each row and the deferred one
-- after writing rows in the transaction is refused (55000).
CREATE TABLE dmix (id integer PRIMARY KEY, fp simhash64, body text);
SELECT count(*) FROM simhash_create_indexes('dmix', 'fp', 'simhash');
SELECT simhash_add_dedup('dmix', 'fp', 3, 'error', deferred => true);
INSERT INTO dmix VALUES (1, '0000000000000000', 'p');
BEGIN;
INSERT INTO dmix VALUES (2, '0000000000000001');
UPDATE dmix SET body = 'p, edited' WHERE id = 1;
COMMIT;
BEGIN;
ALTER TABLE dmix DISABLE TRIGGER dmix_fp_dedup;
INSERT INTO dmix VALUES (3, '3333333333333333');
ALTER TABLE dmix ENABLE TRIGGER dmix_fp_dedup;
INSERT INTO dmix VALUES (4, '3333333333333330');
COMMIT;
BEGIN;
SELECT simhash_add_dedup('dmix', 'fp', 3, 'error');
INSERT INTO dmix VALUES (3, '3333333333333333');
SELECT simhash_add_dedup('dmix', 'fp', 3, 'error', deferred => true);
INSERT INTO dmix VALUES (4, '3333333333333330');
ROLLBACK;
BEGIN;
INSERT INTO dmix VALUES (3, '3333333333333333');
SELECT simhash_add_dedup('dmix', 'fp', 5, 'error', deferred => true);
INSERT INTO dmix VALUES (4, '3333333333333330');
ROLLBACK;
SELECT simhash_add_dedup('dmix', 'fp', 3, 'error', deferred => true);
-- A row updated three times is checked in its last version; a row near that version is refused.
BEGIN;
INSERT INTO dmix VALUES (5, '5555555555555555');
UPDATE dmix SET fp = '6666666666666666' WHERE id = 5;
UPDATE dmix SET fp = '7777777777777777' WHERE id = 5;
UPDATE dmix SET body = 'last' WHERE id = 5;
INSERT INTO dmix VALUES (6, '5555555555555555');        -- near the first version only: kept
INSERT INTO dmix VALUES (7, '7777777777777776');        -- near the last version: refused
COMMIT;
BEGIN;
INSERT INTO dmix VALUES (5, '5555555555555555');
UPDATE dmix SET fp = '6666666666666666' WHERE id = 5;
UPDATE dmix SET fp = '7777777777777777' WHERE id = 5;
UPDATE dmix SET body = 'last' WHERE id = 5;
INSERT INTO dmix VALUES (6, '5555555555555555');
COMMIT;
-- INSERT ... ON CONFLICT DO UPDATE of an older row onto a near-duplicate.
INSERT INTO dmix VALUES (1, '7777777777777775') ON CONFLICT (id) DO UPDATE SET fp = excluded.fp;
SELECT id, fp, body FROM dmix ORDER BY id;
-- COPY FREEZE writes rows that look committed long ago: refused (0A000).
BEGIN;
TRUNCATE dmix;
COPY dmix (id, fp) FROM stdin WITH (FREEZE);
1	0000000000000000
\.
ROLLBACK;
-- A table created in the transaction is truncated in place: the rows written before are gone, and
-- their places reused.
BEGIN;
CREATE TABLE dnewtbl (id integer PRIMARY KEY, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('dnewtbl', 'fp');
SELECT simhash_add_dedup('dnewtbl', 'fp', 3, 'skip', deferred => true);
INSERT INTO dnewtbl VALUES (1, '0000000000000000'), (2, 'ffffffffffffffff');
TRUNCATE dnewtbl;
INSERT INTO dnewtbl VALUES (3, '0000000000000000');
INSERT INTO dnewtbl SELECT 3 + g, '0000000000000001' FROM generate_series(1, 3) g;
COMMIT;
SELECT id, fp FROM dnewtbl ORDER BY id;
-- A TRUNCATE rolled back to a savepoint, with the rows written after it: nothing was moved.
BEGIN;
INSERT INTO dnewtbl VALUES (1020, '2222222222222222');
SAVEPOINT s;
TRUNCATE dnewtbl;
INSERT INTO dnewtbl VALUES (1021, '2222222222222223');
ROLLBACK TO SAVEPOINT s;
INSERT INTO dnewtbl VALUES (1022, '2222222222222220');
COMMIT;
SELECT id, fp FROM dnewtbl ORDER BY id;
-- (Places past the table's end after such a TRUNCATE are not read.)
BEGIN;
CREATE TABLE dnewtbl2 (id integer PRIMARY KEY, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('dnewtbl2', 'fp');
SELECT simhash_add_dedup('dnewtbl2', 'fp', 3, 'skip', deferred => true);
INSERT INTO dnewtbl2 SELECT g, ('x' || md5(g::text))::bit(64)::bigint::simhash64 FROM generate_series(1, 2000) g;
TRUNCATE dnewtbl2;
INSERT INTO dnewtbl2 VALUES (1, '0000000000000000'), (2, '0000000000000001');
COMMIT;
SELECT id, fp FROM dnewtbl2 ORDER BY id;
-- A table that existed before: TRUNCATE after rows were written is 55000 (see above).
BEGIN;
INSERT INTO dnewtbl SELECT g, ('x' || md5(g::text))::bit(64)::bigint::simhash64 FROM generate_series(10, 900) g;
TRUNCATE dnewtbl;
COMMIT;
-- A stored generated fingerprint, and a partitioned table (each partition checked on its own).
CREATE TABLE dgen (id integer PRIMARY KEY, body text, fp simhash64 GENERATED ALWAYS AS (simhash(body)) STORED);
SELECT count(*) FROM simhash_create_indexes('dgen', 'fp');
SELECT simhash_add_dedup('dgen', 'fp', 3, 'skip', deferred => true);
INSERT INTO dgen VALUES (1, 'the quick brown fox jumps over the lazy dog'), (2, 'the quick brown fox jumps over the lazy dog'),
                        (3, 'an entirely different sentence about databases');
SELECT id FROM dgen ORDER BY id;
CREATE TABLE dpart (id integer, region integer, fp simhash64, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE dpart_1 PARTITION OF dpart FOR VALUES IN (1);
CREATE TABLE dpart_2 PARTITION OF dpart FOR VALUES IN (2);
SELECT count(*) FROM simhash_create_indexes('dpart', 'fp');
SELECT simhash_add_dedup('dpart', 'fp', 3, 'skip', deferred => true);
INSERT INTO dpart VALUES (1, 1, '0000000000000000'), (2, 1, '0000000000000001'), (3, 2, '0000000000000003');
SELECT id, region FROM dpart ORDER BY id;

-- An UPDATE that keeps the fingerprint of a row the transaction wrote leaves the row in its place
-- in the order: the later near-duplicate is the one skipped, as by the check at each row. A row
-- inserted and then updated (twice) is still a new row: skipped at commit, not refused as an
-- older one. An UPDATE rolled back to a savepoint leaves the row as it was.
CREATE TABLE dord (id integer PRIMARY KEY, fp simhash64, body text);
SELECT count(*) FROM simhash_create_indexes('dord', 'fp');
SELECT simhash_add_dedup('dord', 'fp', 3, 'skip', deferred => true);
INSERT INTO dord VALUES (1, '0f0f0f0f0f0f0f0f', 'committed');
BEGIN;
INSERT INTO dord VALUES (2, '5555555555555555');
INSERT INTO dord VALUES (3, '5555555555555554');          -- near row 2: skipped
UPDATE dord SET body = 'enriched' WHERE id = 2;
UPDATE dord SET body = 'enriched twice' WHERE id = 2;
INSERT INTO dord VALUES (4, '0f0f0f0f0f0f0f0e');          -- near row 1: skipped
UPDATE dord SET body = 'updated' WHERE id = 4;
UPDATE dord SET body = 'updated twice' WHERE id = 4;
INSERT INTO dord VALUES (5, 'cccccccccccccccc');
SAVEPOINT s;
UPDATE dord SET body = 'rolled back' WHERE id = 5;
ROLLBACK TO SAVEPOINT s;
INSERT INTO dord VALUES (6, 'cccccccccccccccd');          -- near row 5: skipped
COMMIT;
SELECT id, fp, body FROM dord ORDER BY id;
-- A deferred check that was rolled back to a savepoint does not stand in the way of switching.
BEGIN;
SAVEPOINT s;
INSERT INTO dord VALUES (7, '9999999999999999');
ROLLBACK TO SAVEPOINT s;
SELECT simhash_add_dedup('dord', 'fp', 3, 'error');
INSERT INTO dord VALUES (7, '9999999999999999');
COMMIT;
SELECT simhash_add_dedup('dord', 'fp', 3, 'skip', deferred => true);
-- Two deferred checks of one table where one skips rows: refused (0A000) when the second takes a
-- row (each judges its rows on its own at commit). Both with 'error' is fine.
ALTER TABLE dord ADD COLUMN fp2 simhash64;
CREATE TRIGGER dord_fp2_dedup AFTER INSERT OR UPDATE ON dord FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp2', '3', 'error');
INSERT INTO dord VALUES (8, '1234567812345678', NULL, '1234567812345678');
SELECT simhash_add_dedup('dord', 'fp', 3, 'error', deferred => true);
INSERT INTO dord VALUES (8, '1234567812345678', NULL, '1234567812345678');
INSERT INTO dord VALUES (9, '8765432187654321', NULL, '1234567812345679');
DROP TRIGGER dord_fp2_dedup ON dord;
-- Fired AFTER UPDATE OF a column list, the deferred check would miss UPDATEs of remembered rows:
-- refused (0A000).
CREATE TRIGGER dord_fp3_dedup AFTER INSERT OR UPDATE OF fp ON dord FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error');
INSERT INTO dord VALUES (10, 'abababababababab');
DROP TRIGGER dord_fp3_dedup ON dord;
-- So are a WHEN condition and a trigger fired AFTER INSERT only.
CREATE TRIGGER dord_fp3_dedup AFTER INSERT OR UPDATE ON dord FOR EACH ROW
    WHEN (NEW.body IS NULL) EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error');
INSERT INTO dord VALUES (10, 'abababababababab');
DROP TRIGGER dord_fp3_dedup ON dord;
CREATE TRIGGER dord_fp3_dedup AFTER INSERT ON dord FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error');
INSERT INTO dord VALUES (10, 'abababababababab');
DROP TRIGGER dord_fp3_dedup ON dord;
SELECT id, fp, fp2 FROM dord ORDER BY id;
-- A row skipped at commit from a table that publishes deletes needs a replica identity, as a
-- DELETE does (55000).
CREATE TABLE dpub (fp simhash64);
SELECT count(*) FROM simhash_create_indexes('dpub', 'fp');
SELECT simhash_add_dedup('dpub', 'fp', 3, 'skip', deferred => true);
SET client_min_messages = error;
CREATE PUBLICATION dpub_deletes FOR TABLE dpub;
RESET client_min_messages;
\set VERBOSITY sqlstate
INSERT INTO dpub VALUES ('0000000000000000'), ('0000000000000001');
\set VERBOSITY default
INSERT INTO dpub VALUES ('0000000000000000'), ('ffffffffffffffff');   -- nothing to skip: fine
DROP PUBLICATION dpub_deletes;
INSERT INTO dpub VALUES ('0000000000000001');
SELECT fp FROM dpub ORDER BY fp;

-- Refused: action 'report' and NULL. (Verified: dedup_deferred_verify.)
SELECT simhash_add_dedup('ddocs', 'fp', 3, 'report', deferred => true);
SELECT simhash_add_dedup('ddocs', 'fp', 3, 'error', deferred => NULL);
-- The trigger function fired AFTER with action 'report' (made by hand): 0A000 too.
CREATE TABLE dhand (id integer, fp simhash64);
CREATE TRIGGER dhand_dedup AFTER INSERT OR UPDATE ON dhand FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'report', 'ddocs');
INSERT INTO dhand VALUES (1, '0000000000000000');
-- Back to the check at each row: the BEFORE trigger replaces the AFTER one.
SELECT simhash_add_dedup('ddocs', 'fp', 3, 'skip');
SELECT tgname, tgtype & 2 = 2 AS before FROM pg_trigger WHERE tgrelid = 'ddocs'::regclass AND NOT tgisinternal ORDER BY tgname;
DROP TABLE ddocs, dbig, dbig_row, dhand, drw, dmix, dnewtbl, dnewtbl2, dgen, dpart, dord, dpub;

-- The SQLSTATEs of the refusals above, each once more with only its code: 0A000 for what the
-- deferred check does not support, 55000 for a COMMIT that cannot skip its rows or finds them
-- moved, 23505 for an older row updated onto a near-duplicate under 'skip'.
CREATE TABLE dcodes (id integer PRIMARY KEY, fp simhash64, body text);
SELECT count(*) FROM simhash_create_indexes('dcodes', 'fp');
SELECT simhash_add_dedup('dcodes', 'fp', 3, 'skip', deferred => true);
INSERT INTO dcodes VALUES (1, '0000000000000000'), (2, 'ffffffffffffffff');
\set VERBOSITY sqlstate
-- 0A000: action 'report'; COPY FREEZE; a second deferred check of the table while one skips
-- rows; a trigger not fired on every UPDATE (AFTER INSERT only); a table of another access method
-- than heap (here one that is heap under another name).
SELECT simhash_add_dedup('dcodes', 'fp', 3, 'report', deferred => true);
BEGIN;
TRUNCATE dcodes;
COPY dcodes (id, fp) FROM stdin WITH (FREEZE);
1	0000000000000000
\.
ROLLBACK;
CREATE TRIGGER dcodes_a_second AFTER INSERT OR UPDATE ON dcodes FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '5', 'error');
INSERT INTO dcodes VALUES (3, '3333333333333333');
DROP TRIGGER dcodes_a_second ON dcodes;
CREATE TRIGGER dcodes_a_insert_only AFTER INSERT ON dcodes FOR EACH ROW
    EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error');
INSERT INTO dcodes VALUES (3, '3333333333333333');
DROP TRIGGER dcodes_a_insert_only ON dcodes;
CREATE ACCESS METHOD dcodes_heap TYPE TABLE HANDLER heap_tableam_handler;
CREATE TABLE dcodes_am (id integer, fp simhash64) USING dcodes_heap;
SELECT count(*) FROM simhash_create_indexes('dcodes_am', 'fp');
SELECT simhash_add_dedup('dcodes_am', 'fp', 3, 'skip', deferred => true);
INSERT INTO dcodes_am VALUES (1, '0000000000000000');
DROP TABLE dcodes_am;
DROP ACCESS METHOD dcodes_heap;
-- 55000: a row to skip at commit from a table with DELETE triggers, foreign keys that reference
-- it, or rules; a table truncated after the transaction wrote rows to it.
CREATE TRIGGER dcodes_on_delete BEFORE DELETE ON dcodes FOR EACH ROW EXECUTE FUNCTION pg_temp.nothing();
INSERT INTO dcodes VALUES (4, '0000000000000001');
DROP TRIGGER dcodes_on_delete ON dcodes;
CREATE TABLE dcodes_refs (id integer REFERENCES dcodes);
INSERT INTO dcodes VALUES (4, '0000000000000001');
DROP TABLE dcodes_refs;
CREATE RULE dcodes_rule AS ON DELETE TO dcodes DO ALSO NOTHING;
INSERT INTO dcodes VALUES (4, '0000000000000001');
DROP RULE dcodes_rule ON dcodes;
BEGIN;
INSERT INTO dcodes VALUES (5, '5555555555555555');
TRUNCATE dcodes;
COMMIT;
-- 23505: an older row updated onto a near-duplicate cannot be skipped.
UPDATE dcodes SET fp = 'fffffffffffffffe' WHERE id = 1;
\set VERBOSITY default
SELECT id, fp FROM dcodes ORDER BY id;
DROP TABLE dcodes;
