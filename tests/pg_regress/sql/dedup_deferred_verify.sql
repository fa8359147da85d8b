-- The deferred near-duplicate check with verification: simhash_add_dedup(..., verify => 'body',
-- deferred => true). The rows a transaction writes are stored at once and checked when it commits;
-- a row within k is a near-duplicate only if its text is at least min_similarity similar
-- (simhash_similarity) to the other row's, as with the verified check at each row. Texts are ASCII
-- (no encoding guard needed).
CREATE TABLE vdd (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vdd', 'fp');
SELECT simhash_add_dedup('vdd', 'fp', 3, 'error', verify => 'body', deferred => true);
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'vdd_fp_dedup';
INSERT INTO vdd VALUES (1, 'The quick brown fox jumps over the lazy dog.', '0000000000000000');
-- Within k, unrelated text: stored (without verify it would be refused).
INSERT INTO vdd VALUES (2, 'An unrelated sentence about databases.', '0000000000000001');
-- Within k of a committed row, similar text: the COMMIT fails with 23505, the similarity in the
-- DETAIL.
BEGIN;
INSERT INTO vdd VALUES (3, 'The quick brown fox jumps over the lazy dog!', '0000000000000003');
SELECT count(*) FROM vdd;                                  -- stored until commit
COMMIT;
-- Within the transaction: a row similar to an earlier one of it is refused (naming it); one within
-- k with an unrelated text is not.
BEGIN;
INSERT INTO vdd VALUES (4, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit.', '00ff000000000000');
INSERT INTO vdd VALUES (5, 'Something else entirely, about cats.', '00ff000000000001');
INSERT INTO vdd VALUES (6, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit!', '00ff000000000003');
COMMIT;
INSERT INTO vdd VALUES (4, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit.', '00ff000000000000'),
                       (5, 'Something else entirely, about cats.', '00ff000000000001');
-- A NULL text is never a near-duplicate; distance 4 is beyond the radius whatever the text.
INSERT INTO vdd VALUES (7, NULL, '0000000000000000'),
                       (8, 'The quick brown fox jumps over the lazy dog.', '000000000000000f');
SELECT id, fp, body FROM vdd ORDER BY id;

-- The threshold is applied exactly at commit: at the pair's own similarity the row is refused,
-- just above it the row is stored.
SELECT simhash_similarity('The quick brown fox jumps over the lazy dog.', 'The quick brown fox jumps over a lazy dog.') AS s \gset
SELECT simhash_add_dedup('vdd', 'fp', 3, 'error', verify => 'body', min_similarity => :s, deferred => true);
INSERT INTO vdd VALUES (9, 'The quick brown fox jumps over a lazy dog.', '0000000000000002');
SELECT simhash_add_dedup('vdd', 'fp', 3, 'error', verify => 'body', min_similarity => :s + 1e-12, deferred => true);
INSERT INTO vdd VALUES (9, 'The quick brown fox jumps over a lazy dog.', '0000000000000002');

-- skip: the refused rows are deleted at commit, one NOTICE; rows within k of each other but with
-- unrelated texts are all kept.
SELECT simhash_add_dedup('vdd', 'fp', 3, 'skip', verify => 'body', deferred => true);
BEGIN;
INSERT INTO vdd VALUES (10, 'Pack my box with five dozen liquor jugs.', 'ff00000000000000'),     -- kept
                       (11, 'pack my box with five dozen liquor jugs!!', 'ff00000000000001'),    -- like 10: skipped
                       (12, 'An unrelated sentence about databases, again.', 'ff00000000000001'), -- same fp, unrelated: kept
                       (13, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit', '00ff000000000002'); -- like 4: skipped
COMMIT;
SELECT id, fp, body FROM vdd WHERE id >= 10 ORDER BY id;

-- UPDATE: with verification a new text is checked even when the fingerprint stays the same; an
-- UPDATE that changes neither is not checked (row 14 was written while the trigger was disabled).
-- An older row updated onto a near-duplicate cannot be skipped (deleting it would lose the row):
-- 23505.
ALTER TABLE vdd DISABLE TRIGGER vdd_fp_dedup;
INSERT INTO vdd VALUES (14, 'Pack my box with five dozen liquor jugs', 'ff00000000000002');
ALTER TABLE vdd ENABLE TRIGGER vdd_fp_dedup;
UPDATE vdd SET fp = fp WHERE id = 14;
UPDATE vdd SET body = 'Pack my box with five dozen liquor jugs.' WHERE id = 14;
UPDATE vdd SET body = 'A sentence that is new here.' WHERE id = 14;
-- A row of the transaction updated: an UPDATE that keeps fingerprint and text leaves it in its
-- place in the order (row 16 is refused by row 15, written before it); one that changes the text
-- moves it to the UPDATE's place (row 18 is then the earlier one, and row 17 is deleted whole).
BEGIN;
INSERT INTO vdd VALUES (15, 'Sphinx of black quartz, judge my vow.', '0f0f000000000000');
INSERT INTO vdd VALUES (16, 'Sphinx of black quartz, judge my vow!', '0f0f000000000001');
UPDATE vdd SET fp = fp WHERE id = 15;
INSERT INTO vdd VALUES (17, 'How vexingly quick daft zebras jump.', 'f0f0000000000000');
INSERT INTO vdd VALUES (18, 'How vexingly quick daft zebras jump!', 'f0f0000000000001');
UPDATE vdd SET body = 'How vexingly quick daft zebras jump?' WHERE id = 17;
COMMIT;
SELECT id, fp, body FROM vdd WHERE id >= 14 ORDER BY id;
-- Switching the threshold after writing rows in the transaction is refused (55000): the rows
-- written under each setting would judge each other in no defined order.
BEGIN;
INSERT INTO vdd VALUES (19, 'The five boxing wizards jump quickly.', '3333333333333333');
SELECT simhash_add_dedup('vdd', 'fp', 3, 'skip', verify => 'body', min_similarity => 0.5, deferred => true);
INSERT INTO vdd VALUES (20, 'The five boxing wizards jump quickly!', '3333333333333330');
ROLLBACK;

-- Many rows at k = 7: the same rows kept as by the verified check at each row. 100 seeds; new
-- rows are variants of a seed (within 3 bits of it, its text with one character replaced:
-- similarity about 0.85 to each other), decoys (within 3 bits of a seed, an unrelated text) and
-- random rows; 500 are stored first, 1,000 inserted in one statement. The deferred table reads a
-- simhash index, the other its segment B-trees.
CREATE TABLE vbig (id integer PRIMARY KEY, body text NOT NULL, fp simhash64 NOT NULL);
CREATE TABLE vbig_row (LIKE vbig INCLUDING ALL);
SELECT count(*) FROM simhash_create_indexes('vbig', 'fp', 'simhash');
SELECT count(*) FROM simhash_create_indexes('vbig_row', 'fp');
CREATE TEMP TABLE vnew AS
SELECT g AS id,
       CASE g % 4 WHEN 2 THEN 'decoy ' || g || ' ' || md5('decoy' || g) || md5('other' || g)
                  WHEN 3 THEN 'row ' || g || ' ' || md5('row' || g) || md5('text' || g)
                  ELSE overlay('seed ' || g % 100 || ' ' || md5('t' || g % 100) || md5('u' || g % 100)
                               PLACING 'Z' FROM 1 + g % 70 FOR 1) END AS body,
       (CASE WHEN g % 4 = 3 THEN ('x' || md5('row' || g))::bit(64)::bigint
             ELSE ('x' || md5('seed' || g % 100))::bit(64)::bigint
                  # CASE WHEN g % 7 = 0 THEN 0 ELSE 1::bigint << (g % 61) END
                  # CASE WHEN g % 3 = 0 THEN 0 ELSE 6::bigint << (g % 53) END END)::simhash64 AS fp
FROM generate_series(1, 1500) g;
INSERT INTO vbig SELECT * FROM vnew WHERE id <= 500 ORDER BY id;
INSERT INTO vbig_row SELECT * FROM vbig;
SELECT simhash_add_dedup('vbig', 'fp', 7, 'skip', verify => 'body', deferred => true);
SELECT simhash_add_dedup('vbig_row', 'fp', 7, 'skip', verify => 'body');
SET client_min_messages = warning;
INSERT INTO vbig SELECT * FROM vnew WHERE id > 500 ORDER BY id;
INSERT INTO vbig_row SELECT * FROM vnew WHERE id > 500 ORDER BY id;
RESET client_min_messages;
SELECT (SELECT count(*) FROM vbig) AS deferred_rows, (SELECT count(*) FROM vbig_row) AS row_rows,
       (SELECT count(*) FROM (TABLE vbig EXCEPT TABLE vbig_row) d) AS only_deferred,
       (SELECT count(*) FROM (TABLE vbig_row EXCEPT TABLE vbig) d) AS only_row;
-- Pairs within k of a new row and another kept row: all with texts below the threshold (the
-- decoys), none at or above it.
SELECT count(*) AS near_pairs, count(*) FILTER (WHERE simhash_similarity(a.body, b.body) >= 0.7) AS similar_pairs
FROM vbig a JOIN vbig b ON a.id < b.id AND b.id > 500 AND a.fp <~> b.fp <= 7;

-- Texts stored out of line (TOAST, not compressed) are read at commit, the transaction's own ones
-- too.
CREATE TABLE vlong (id integer PRIMARY KEY, body text, fp simhash64);
ALTER TABLE vlong ALTER body SET STORAGE EXTERNAL;
SELECT count(*) FROM simhash_create_indexes('vlong', 'fp');
SELECT simhash_add_dedup('vlong', 'fp', 3, 'skip', verify => 'body', deferred => true);
INSERT INTO vlong VALUES (1, repeat('Near-duplicate detection where the data lives. ', 60), '1111111111111111');
BEGIN;
INSERT INTO vlong VALUES (2, repeat('Near-duplicate detection where the data lives. ', 60) || '!', '1111111111111110');
INSERT INTO vlong VALUES (3, repeat('An unrelated sentence about databases. ', 60), '1111111111111113');
INSERT INTO vlong VALUES (4, repeat('An unrelated sentence about databases. ', 60) || '?', '1111111111111112');
COMMIT;
SELECT id, fp, length(body) FROM vlong ORDER BY id;
SELECT pg_relation_size(reltoastrelid) > 0 AS toasted FROM pg_class WHERE oid = 'vlong'::regclass;
-- A text too long for simhash.max_text_memory fails the COMMIT with 54000, as at each row.
SET simhash.max_text_memory = '1MB';
INSERT INTO vlong VALUES (5, repeat('Near-duplicate detection where the data lives. ', 1200), '1111111111111115');
RESET simhash.max_text_memory;

-- Concurrent writers (a second session through dblink): the rows of other transactions are
-- compared by their texts too. A row of another transaction in progress counts at commit only if
-- that transaction has begun its own check (dedup.sql tells the rule): here the other transaction
-- PREPAREs to be checking. (lock_timeout: a wait where none is expected fails the test instead of
-- hanging it.)
CREATE EXTENSION dblink;
SELECT dblink_connect('other', pg_catalog.format('dbname=%s port=%s host=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
SET lock_timeout = '30s';
SELECT dblink_exec('other', 'SET lock_timeout = ''30s''');
CREATE TABLE vshared (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vshared', 'fp');
SELECT simhash_add_dedup('vshared', 'fp', 3, 'error', verify => 'body', deferred => true);
-- 1. An older transaction that has PREPAREd (it is checking) wrote a row within k with an unrelated
--    text: nothing to wait for, this one commits.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (1, 'An unrelated sentence about databases.', '1111111111111111')$$);
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (3, 'Near-duplicate detection where the data lives.', '2222222222222222')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_deferred_verify_older'$$);
BEGIN;
INSERT INTO vshared VALUES (2, 'The quick brown fox jumps over the lazy dog.', '1111111111111113');
COMMIT;
-- 2. ... and with a similar text: 40001, to be retried. The other's rows are then committed.
BEGIN;
INSERT INTO vshared VALUES (4, 'Near-duplicate detection, where the data lives!', '2222222222222223');
COMMIT;
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_deferred_verify_older'$$);
-- 2b. A similar row of an older transaction in progress that has not begun its check is no
--     conflict yet: this one commits first. The other commits second: its COMMIT finds this row
--     and fails with 23505, the similarity in the DETAIL.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (12, 'Every row is checked again at commit.', '6666666666666666')$$);
BEGIN;
INSERT INTO vshared VALUES (13, 'Every row is checked again at commit!', '6666666666666667');
COMMIT;
SELECT dblink_exec('other', 'COMMIT');
-- 3. A similar row committed after this transaction took its snapshot (REPEATABLE READ): 23505 at
--    COMMIT; an unrelated one within k is no conflict.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vshared;
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (5, 'Fingerprints find candidates; the text decides.', '3333333333333333')$$);
INSERT INTO vshared VALUES (6, 'Something else entirely, about cats.', '3333333333333330');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vshared;
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (7, 'Fingerprints find candidates, and the text decides.', '4444444444444444')$$);
INSERT INTO vshared VALUES (8, 'Fingerprints find candidates; the text decides!', '4444444444444445');
COMMIT;
-- 4. skip: of two rows of this transaction with the same fingerprint, only the one similar to the
--    concurrent row is deleted.
SELECT simhash_add_dedup('vshared', 'fp', 3, 'skip', verify => 'body', deferred => true);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vshared;
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (9, 'Loaders must retry a transaction that fails.', '5555555555555555')$$);
INSERT INTO vshared VALUES (10, 'Loaders must retry a transaction that fails!', '5555555555555554'),
                           (11, 'A table of one hundred thousand rows.', '5555555555555554');
COMMIT;
SELECT id, body FROM vshared ORDER BY id;
SELECT dblink_disconnect('other');
-- 5. Many rows of a transaction with one fingerprint, all similar to one concurrent row: each is
--    deleted. (Each refusal holds its own copy of the other row: a copy freed twice crashed the
--    second of these transactions of a new session.)
\c -
SELECT dblink_connect('other', pg_catalog.format('dbname=%s port=%s host=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
CREATE TABLE vmany (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vmany', 'fp');
SELECT simhash_add_dedup('vmany', 'fp', 3, 'skip', verify => 'body', deferred => true);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vmany;
SELECT dblink_exec('other', $$INSERT INTO vmany VALUES (1, 'Loaders must retry a transaction that fails.', '5555555555555555')$$);
INSERT INTO vmany SELECT 100 + g, 'Loaders must retry a transaction that fails' || repeat('!', g), '5555555555555554'
FROM generate_series(1, 50) g;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vmany;
SELECT dblink_exec('other', $$INSERT INTO vmany VALUES (2, 'Loaders must retry a transaction that fails?', 'aaaaaaaaaaaaaaaa')$$);
INSERT INTO vmany SELECT 200 + g, 'Loaders must retry a transaction that fails' || repeat('?', g), 'aaaaaaaaaaaaaaa8'
FROM generate_series(1, 50) g;
COMMIT;
SELECT id, body FROM vmany ORDER BY id;
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;

DROP TABLE vdd, vbig, vbig_row, vlong, vshared, vmany;
