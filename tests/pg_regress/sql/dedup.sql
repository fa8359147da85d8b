-- The near-duplicate constraint: simhash_dedup_trigger and simhash_add_dedup.
CREATE TABLE docs (id integer PRIMARY KEY, fp simhash64, body text);

-- Without segment indexes the helper warns and names the statements that create them.
SELECT simhash_add_dedup('docs', 'fp');
SELECT simhash_create_indexes('docs', 'fp');
SELECT simhash_indexed('docs', 'fp');

-- action 'error' (k = 3): a unique violation naming the trigger, the existing key and the distance.
SELECT simhash_add_dedup('docs', 'fp', 3, 'error');
INSERT INTO docs VALUES (1, '0000000000000000'), (2, 'ffffffffffffffff');
INSERT INTO docs VALUES (3, '0000000000000007');          -- distance 3 from row 1
INSERT INTO docs VALUES (3, '000000000000000f');          -- distance 4: stored
INSERT INTO docs VALUES (4, NULL);                         -- NULL never matches
-- Rows of the same statement count too.
INSERT INTO docs VALUES (5, 'f0f0f0f0f0f0f0f0'), (6, 'f0f0f0f0f0f0f0f1');
-- UPDATE OF fp: the row itself is left out; a move next to another row is refused.
UPDATE docs SET fp = '0000000000000001' WHERE id = 1;
UPDATE docs SET fp = '000000000000001f' WHERE id = 1;
UPDATE docs SET body = 'fp unchanged' WHERE id = 3;
-- The SQLSTATE, as an ETL job would check it.
DO $$
BEGIN
    INSERT INTO docs VALUES (7, 'fffffffffffffffe');
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'caught %', SQLSTATE;
END $$;
-- COPY goes through the trigger row by row.
COPY docs (id, fp) FROM stdin;
10	1234123412341234
11	1234123412341235
\.
SELECT id, fp FROM docs ORDER BY id;

-- The lookup the trigger runs uses the segment indexes.
SET enable_seqscan = off;
SELECT simhash_dedup_lookup('docs', 'fp', 3) AS lookup \gset
PREPARE lookup3(simhash64, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup3('0000000000000003', '(0,0)');
EXECUTE lookup3('0000000000000003', '(0,0)');
RESET enable_seqscan;

-- action 'skip': rows are dropped, one NOTICE per statement.
SELECT simhash_add_dedup('docs', 'fp', 3, 'skip');
INSERT INTO docs VALUES (20, '0000000000000003'), (21, '8000000000000000'), (22, '8000000000000001'), (23, 'ffffffffffffff00');
COPY docs (id, fp) FROM stdin;
24	1234123412341236
25	4321432143214321
26	4321432143214320
\.
UPDATE docs SET fp = 'fffffffffffffffe' WHERE id = 23;   -- skipped: the row keeps its old value
SELECT id, fp FROM docs ORDER BY id;

-- action 'report': rows are kept and recorded.
SELECT simhash_add_dedup('docs', 'fp', 3, 'report');
INSERT INTO docs VALUES (30, '0000000000000002');
SELECT relation, trigger_name, new_key, existing_key, distance, new_fingerprint FROM docs_near_duplicates;
\d docs_near_duplicates
-- A report table of one's own name; keys of a table without a primary key are ctids.
CREATE TABLE loose (fp simhash64);
SELECT simhash_create_indexes('loose', 'fp') \g /dev/null
SELECT simhash_add_dedup('loose', 'fp', 0, 'report', 'public."Loose report"');
INSERT INTO loose VALUES ('00000000000000aa'), ('00000000000000aa'), ('00000000000000ab');
SELECT new_key, existing_key, distance FROM "Loose report";
-- Composite keys.
CREATE TABLE pairs (a integer, b text, fp simhash64, PRIMARY KEY (a, b));
SELECT simhash_create_indexes('pairs', 'fp') \g /dev/null
CREATE TRIGGER pairs_dedup BEFORE INSERT ON pairs FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp');
INSERT INTO pairs VALUES (1, 'x y', '00000000000000aa');
INSERT INTO pairs VALUES (2, 'z', '00000000000000ab');

-- Radii 0, 7 and 11, exact at the boundary.
CREATE TABLE radii (id integer PRIMARY KEY, fp simhash64);
SELECT simhash_create_indexes('radii', 'fp') \g /dev/null
INSERT INTO radii VALUES (1, '0000000000000000');
SELECT simhash_add_dedup('radii', 'fp', 0, 'skip');
INSERT INTO radii VALUES (2, '0000000000000000'), (3, '0000000000000001');
SELECT simhash_add_dedup('radii', 'fp', 7, 'skip');
-- 7 bits from row 1 (8 from row 3), then 8 bits spread over all four segments.
INSERT INTO radii VALUES (4, '00000000000000fe'), (5, '0303030300000000');
SELECT simhash_add_dedup('radii', 'fp', 11, 'skip');
-- 11 bits (3 + 3 + 3 + 2) from row 1, then 12 bits from every stored row.
INSERT INTO radii VALUES (6, '0700070007000300'), (7, 'e000e000e000e000');
SELECT id, fp FROM radii ORDER BY id;

-- Misuse.
CREATE TABLE misuse (id integer, fp simhash64, n bigint);
SELECT simhash_add_dedup('misuse', 'nope');
SELECT simhash_add_dedup('misuse', 'n');
SELECT simhash_add_dedup('misuse', 'fp', 12);
SELECT simhash_add_dedup('misuse', 'fp', 3, 'merge');
SELECT simhash_add_dedup('misuse', 'fp', 3, 'skip', 'misuse_report');
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('nope');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('n');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', 'three');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'merge');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'report');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger();
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
-- (Fired AFTER the row is written, it is the deferred check, dedup_deferred.sql: no error here.)
CREATE TRIGGER t AFTER INSERT OR UPDATE ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp');
BEGIN;
INSERT INTO misuse VALUES (1, '0000000000000000');
ROLLBACK;
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH STATEMENT EXECUTE FUNCTION simhash_dedup_trigger('fp');
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
INSERT INTO misuse VALUES (0, NULL);
CREATE TRIGGER t BEFORE DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp');
DELETE FROM misuse;
DROP TRIGGER t ON misuse;
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_notice();
INSERT INTO misuse VALUES (1, '0000000000000000');
DROP TRIGGER t ON misuse;
-- A trigger on a table without indexes warns once per session, then works by scanning.
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp');
INSERT INTO misuse VALUES (1, '0000000000000000');
INSERT INTO misuse VALUES (2, '0000000000000001');

-- An inserting role needs no SELECT right on the table: the lookup runs as its owner.
CREATE ROLE simhash_loader;
GRANT INSERT ON docs TO simhash_loader;
GRANT INSERT ON docs_near_duplicates TO simhash_loader;
SET ROLE simhash_loader;
INSERT INTO docs VALUES (40, '0000000000000004');
RESET ROLE;
SELECT new_key, existing_key, distance FROM docs_near_duplicates WHERE new_key = '40';
REVOKE ALL ON docs, docs_near_duplicates FROM simhash_loader;
DROP ROLE simhash_loader;

-- Savepoints: a rolled-back subtransaction leaves the transaction able to go on.
BEGIN;
SELECT simhash_add_dedup('radii', 'fp', 3, 'error');
SAVEPOINT s;
INSERT INTO radii VALUES (100, 'aaaaaaaaaaaaaaaa');
ROLLBACK TO s;
INSERT INTO radii VALUES (101, 'aaaaaaaaaaaaaaab');
INSERT INTO radii VALUES (102, 'aaaaaaaaaaaaaaaa');
ROLLBACK;

-- Concurrent writers (a second session through dblink). The row trigger cannot see rows of
-- transactions in progress; every row it lets through is rechecked at commit. There a row of
-- another transaction still in progress counts only if that transaction has begun its own
-- commit-time check (it is committing, or it has PREPAREd: PREPARE TRANSACTION runs the check, and
-- the transaction stays checking until COMMIT PREPARED or ROLLBACK PREPARED). A writer that has not
-- begun its check will find this transaction's rows itself when it does. So of two writers of
-- near-duplicates that are merely in progress, the first to COMMIT wins and the second gets 23505
-- (or its row skipped); only the row of a writer that is checking makes a COMMIT fail with 40001
-- (an older writer) or wait (a younger one). (A row that a transaction in progress is deleting or
-- updating away is another matter: the COMMIT waits for that transaction if it is younger, or fails
-- with 40001 if it is older, whether it is checking or not; see the 40P01 case. So is any row of a
-- transaction in progress under 'skip' checked at each row, case 5a: the isolation spec dedup_skip
-- says why.) Here a transaction
-- PREPAREs to be caught checking. (lock_timeout, in both sessions: a wait where none is expected
-- fails the test instead of hanging it.)
CREATE EXTENSION dblink;
SELECT dblink_connect('other', pg_catalog.format('dbname=%s port=%s host=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT pid AS other_pid FROM dblink('other', 'SELECT pg_backend_pid()') AS t(pid integer) \gset
SET lock_timeout = '30s';
SELECT dblink_exec('other', 'SET lock_timeout = ''30s''');
-- Waits until backend `pid` waits for a lock that `blocker` holds (a process id, or 0 for a
-- prepared transaction), for up to 30 seconds; says whether it does.
CREATE FUNCTION pg_temp.blocked_by(pid integer, blocker integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. 3000 LOOP
        IF pg_catalog.pg_blocking_pids(pid) @> ARRAY[blocker] THEN
            RETURN true;
        END IF;
        PERFORM pg_catalog.pg_sleep(0.01);
    END LOOP;
    RETURN false;
END $$;
CREATE TABLE shared (id integer PRIMARY KEY, fp simhash64);
SELECT simhash_create_indexes('shared', 'fp') \g /dev/null
SELECT simhash_add_dedup('shared', 'fp', 3, 'error');
-- 1. The other, older transaction has written a near-duplicate and is still open, but has not
--    begun its check: its row is no conflict yet, and this younger one commits. The other commits
--    second: its COMMIT finds this row, now committed, and fails with 23505.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (1, '1111111111111111')$$);
BEGIN;
INSERT INTO shared VALUES (2, '1111111111111113');   -- distance 1; the other row is invisible
COMMIT;
SELECT dblink_exec('other', 'COMMIT');
-- 2. The other, older transaction has written a near-duplicate and PREPAREd: it is checking. This
--    younger one fails at COMMIT with 40001 at once, to be retried (it does not wait: a transaction
--    waits only for younger ones, so the check cannot deadlock with itself). The other's row is
--    then committed.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (12, '1212121212121212')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_older_prepared'$$);
BEGIN;
INSERT INTO shared VALUES (13, '1212121212121213');
COMMIT;
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_older_prepared'$$);
-- 3. Under REPEATABLE READ the row trigger cannot see a row committed after the snapshot was
--    taken; the recheck finds it at commit: 23505.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (3, '2222222222222222')$$);
INSERT INTO shared VALUES (4, '2222222222222223');
COMMIT;
-- 4. The same with 'skip': the row is deleted at commit, with a NOTICE; the others stay.
SELECT simhash_add_dedup('shared', 'fp', 3, 'skip');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (5, '3333333333333333')$$);
INSERT INTO shared VALUES (6, '3333333333333330'), (7, '4444444444444444');
-- (with 40 more rows the recheck compares the table with them all in one pass)
INSERT INTO shared SELECT 100 + i, ('x' || md5(i::text))::bit(64)::bigint::simhash64 FROM generate_series(1, 40) i;
COMMIT;
SELECT id, fp FROM shared WHERE id < 100 ORDER BY id;
SELECT count(*) FROM shared WHERE id > 100;
-- 4b. A table that foreign keys reference cannot lose a row quietly at commit: 40001 instead
--     (a retry then skips the row up front).
CREATE TABLE refs (shared_id integer REFERENCES shared);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (20, '8888888888888888')$$);
INSERT INTO shared VALUES (21, '8888888888888889');
INSERT INTO refs VALUES (21);
COMMIT;
INSERT INTO shared VALUES (21, '8888888888888889');
DROP TABLE refs;
-- 5. This transaction is the older one (still 'skip').
--    a. While this one is in progress and not yet checking, the younger other writes a
--       near-duplicate and commits: with 'skip' checked at each row, a writer in progress counts
--       whether or not it has begun its check, so its COMMIT fails with 40001 (reported here as a
--       NOTICE: fail_on_error is false). This one commits and keeps its row.
BEGIN;
INSERT INTO shared VALUES (14, '9999999999999999');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (15, '9999999999999998')$$, false);
SELECT dblink_error_message('other');
COMMIT;
SELECT id, fp FROM shared WHERE id IN (14, 15);
--    b. This one has PREPAREd, so it is checking: the younger other's COMMIT fails with 40001
--       (reported here as a NOTICE: fail_on_error is false). This one's row is then committed.
BEGIN;
INSERT INTO shared VALUES (8, '5555555555555555');
PREPARE TRANSACTION 'dedup_younger_other';
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (9, '5555555555555554')$$, false);
SELECT dblink_error_message('other');
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_younger_other'$$);
-- 6. 'error' in READ COMMITTED: with no concurrent writer left, the row trigger sees them all.
SELECT simhash_add_dedup('shared', 'fp', 3, 'error');
INSERT INTO shared VALUES (9, '5555555555555554');
-- 7. This older transaction commits first while the younger other has written a near-duplicate and
--    is in progress, not yet checking: this COMMIT neither waits for the other nor fails. The other
--    commits second and fails with 23505.
BEGIN;
INSERT INTO shared VALUES (16, 'fedcba9876543210');
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (17, 'fedcba9876543211')$$);
COMMIT;
SELECT dblink_exec('other', 'COMMIT');
-- 8. A younger writer that is checking is waited for. The other, older transaction writes a row;
--    this younger one writes a near-duplicate and PREPAREs (its check passes: the other has not
--    begun its own). The other's COMMIT, sent without waiting for its result, finds this prepared
--    row and waits for this transaction (pg_blocking_pids shows a prepared transaction as 0).
--    COMMIT PREPARED ends the wait: the other looks again, finds the row committed and fails with
--    23505.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (18, '0123456789abcdef')$$);
BEGIN;
INSERT INTO shared VALUES (19, '0123456789abcdee');
PREPARE TRANSACTION 'dedup_waited_for';
SELECT dblink_send_query('other', 'COMMIT');
SELECT pg_temp.blocked_by(:other_pid, 0) AS other_waits_for_the_prepared_one;
COMMIT PREPARED 'dedup_waited_for';
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM dblink_get_result('other') AS t(status text);
-- 9. A rolled-back savepoint takes its row out of the recheck.
BEGIN;
SAVEPOINT s;
INSERT INTO shared VALUES (10, '6666666666666666');
ROLLBACK TO s;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (11, '6666666666666667')$$);
COMMIT;
SELECT id, fp FROM shared WHERE id < 100 ORDER BY id;
-- 10. A table dropped after its rows were written has nothing left to check.
BEGIN;
CREATE TABLE dropped (id integer PRIMARY KEY, fp simhash64);
SELECT simhash_add_dedup('dropped', 'fp', 3, 'error') \g /dev/null
INSERT INTO dropped VALUES (1, '7777777777777777');
DROP TABLE dropped;
COMMIT;
-- 11. The SQLSTATEs a loader acts on (40001 and 40P01: retry; 23505: a near-duplicate), the
--     outcomes above once more with only their codes, for the row check, the deferred check and
--     codes.
\set VERBOSITY sqlstate
-- A near-duplicate of a committed row: 23505 from the row trigger.
INSERT INTO shared VALUES (39, '1111111111111110');
-- A writer of a near-duplicate in progress that has not begun its check is no conflict yet: this
-- COMMIT (the INSERT's implicit one) succeeds, and the other's, second, fails with 23505.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (30, 'a0a0a0a0a0a0a0a0')$$);
INSERT INTO shared VALUES (31, 'a0a0a0a0a0a0a0a1');
SELECT dblink_exec('other', 'COMMIT');
-- An older writer that is checking (PREPAREd): 40001 at COMMIT. Once it has rolled back, the retry
-- stores the row.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (42, 'a5a5a5a5a5a5a5a5')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_sqlstate_row'$$);
INSERT INTO shared VALUES (43, 'a5a5a5a5a5a5a5a4');
SELECT dblink_exec('other', $$ROLLBACK PREPARED 'dedup_sqlstate_row'$$);
INSERT INTO shared VALUES (43, 'a5a5a5a5a5a5a5a4');
-- The same with the deferred check: 23505 for the second to commit, 40001 against an older writer
-- that is checking.
SELECT simhash_add_dedup('shared', 'fp', 3, 'error', deferred => true);
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (37, 'a7a7a7a7a7a7a7a7')$$);
INSERT INTO shared VALUES (38, 'a7a7a7a7a7a7a7a6');
SELECT dblink_exec('other', 'COMMIT');
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (44, 'a9a9a9a9a9a9a9a9')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_sqlstate_deferred'$$);
INSERT INTO shared VALUES (45, 'a9a9a9a9a9a9a9a8');
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_sqlstate_deferred'$$);
SELECT simhash_add_dedup('shared', 'fp', 3, 'error');
-- Codes (a bit(64) column with a simhash index), with the row check and the deferred check: the
-- same four outcomes.
CREATE TABLE shared_codes (id integer PRIMARY KEY, code bit(64));
CREATE INDEX shared_codes_code ON shared_codes USING simhash (code);
SELECT simhash_add_dedup('shared_codes', 'code', 3, 'error');
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared_codes VALUES (1, x'a0a0a0a0a0a0a0a0')$$);
INSERT INTO shared_codes VALUES (2, x'a0a0a0a0a0a0a0a1');
SELECT dblink_exec('other', 'COMMIT');
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared_codes VALUES (3, x'a5a5a5a5a5a5a5a5')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_codes_row'$$);
INSERT INTO shared_codes VALUES (4, x'a5a5a5a5a5a5a5a4');
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_codes_row'$$);
SELECT simhash_add_dedup('shared_codes', 'code', 3, 'error', deferred => true);
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared_codes VALUES (5, x'a7a7a7a7a7a7a7a7')$$);
INSERT INTO shared_codes VALUES (6, x'a7a7a7a7a7a7a7a6');
SELECT dblink_exec('other', 'COMMIT');
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO shared_codes VALUES (7, x'a9a9a9a9a9a9a9a9')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_codes_deferred'$$);
INSERT INTO shared_codes VALUES (8, x'a9a9a9a9a9a9a9a8');
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_codes_deferred'$$);
\set VERBOSITY default
SELECT id, code FROM shared_codes ORDER BY id;
DROP TABLE shared_codes;
\set VERBOSITY sqlstate
-- A near-duplicate committed after the row was checked: 23505 at COMMIT.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) > 0 AS snapshot_taken FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (32, 'b1b1b1b1b1b1b1b1')$$);
INSERT INTO shared VALUES (33, 'b1b1b1b1b1b1b1b0');
COMMIT;
-- 'skip' where foreign keys reference the table: 40001 at COMMIT; an older row updated onto a
-- near-duplicate: 23505 at COMMIT.
SELECT simhash_add_dedup('shared', 'fp', 3, 'skip');
CREATE TABLE refs (shared_id integer REFERENCES shared);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) > 0 AS snapshot_taken FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (34, 'c2c2c2c2c2c2c2c2')$$);
INSERT INTO shared VALUES (35, 'c2c2c2c2c2c2c2c3');
COMMIT;
DROP TABLE refs;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) > 0 AS snapshot_taken FROM shared;
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (36, 'd3d3d3d3d3d3d3d3')$$);
UPDATE shared SET fp = 'd3d3d3d3d3d3d3d2' WHERE id = 31;
COMMIT;
SELECT simhash_add_dedup('shared', 'fp', 3, 'error');
-- A deadlock between the recheck's wait and another wait: 40P01. The recheck waits for a younger
-- transaction that is deleting (or updating) a near-duplicate, checking or not: if that transaction
-- rolls back, the row stays. This older transaction writes row 40; the other commits a
-- near-duplicate, row 41 (this one has not begun its check: no conflict yet), then, younger,
-- deletes row 41 and waits on the primary key for this one's row 40; this one's COMMIT waits for
-- the deleter. This session's deadlock_timeout is the short one: it is the one PostgreSQL cancels;
-- the other then stores its row 40.
SELECT dblink_exec('other', 'SET deadlock_timeout = ''10min''');
SET deadlock_timeout = '10ms';
BEGIN;
INSERT INTO shared VALUES (40, 'e4e4e4e4e4e4e4e4');
SELECT dblink_exec('other', $$INSERT INTO shared VALUES (41, 'e4e4e4e4e4e4e4e5')$$);
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', 'DELETE FROM shared WHERE id = 41');
SELECT dblink_send_query('other', $$INSERT INTO shared VALUES (40, 'f5f5f5f5f5f5f5f5')$$);
SELECT pg_temp.blocked_by(:other_pid, pg_backend_pid()) AS other_waits_for_this_one;
COMMIT;
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT * FROM dblink_get_result('other') AS t(status text);
SELECT dblink_exec('other', 'COMMIT');
RESET deadlock_timeout;
SELECT dblink_exec('other', 'RESET deadlock_timeout');
\set VERBOSITY default
SELECT id, fp FROM shared WHERE id BETWEEN 30 AND 99 ORDER BY id;
-- Nothing was left prepared.
SELECT gid FROM pg_prepared_xacts WHERE database = current_database();
RESET lock_timeout;
SELECT dblink_disconnect('other');
DROP TABLE shared;
DROP EXTENSION dblink;

DROP TABLE docs, docs_near_duplicates, loose, "Loose report", pairs, radii, misuse;

-- A generated fingerprint column: the trigger computes it (BEFORE triggers run before PostgreSQL does).
CREATE TABLE texts (id integer PRIMARY KEY, body text, fp simhash64 GENERATED ALWAYS AS (simhash(body)) STORED);
SELECT simhash_create_indexes('texts', 'fp') \g /dev/null
SELECT simhash_add_dedup('texts', 'fp', 3, 'error');
\d texts
INSERT INTO texts (id, body) VALUES (1, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。');
INSERT INTO texts (id, body) VALUES (2, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。');
INSERT INTO texts (id, body) VALUES (3, 'PostgreSQL extensions add types, functions and index support to the database server.');
UPDATE texts SET body = '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。' WHERE id = 3;
UPDATE texts SET body = body WHERE id = 1;     -- unchanged fingerprint: no check
SELECT id, fp FROM texts ORDER BY id;
DROP TABLE texts;
