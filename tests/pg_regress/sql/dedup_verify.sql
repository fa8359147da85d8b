-- The near-duplicate constraint with verification: a row within k is a near-duplicate only if its
-- text is at least min_similarity similar (simhash_similarity) to the stored row's.
SELECT getdatabaseencoding() <> 'UTF8' AS skip_test \gset
\if :skip_test
\quit
\endif

-- Fingerprints set by hand, so that near fingerprints can carry unrelated texts.
CREATE TABLE vd (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vd', 'fp');
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body');
\d vd
INSERT INTO vd VALUES (1, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份。', '0000000000000000');
-- Within k, unrelated text: stored (without verify it would be refused).
INSERT INTO vd VALUES (2, 'PostgreSQL extensions add types, functions and index support.', '0000000000000001');
-- Within k and similar text: refused, with the similarity in the DETAIL.
INSERT INTO vd VALUES (3, '海量网页去重是搜索引擎的基础工作，相似文章应该只保留一份。', '0000000000000003');
-- Folding counts as equal; distance 4 is beyond the radius whatever the text.
INSERT INTO vd VALUES (4, '海量網頁去重是搜尋引擎的基礎工作，相似的文章應該只保留一份！', '0000000000000002');
INSERT INTO vd VALUES (5, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份。', '000000000000000f');
-- A NULL text is never a near-duplicate.
INSERT INTO vd VALUES (6, NULL, '0000000000000000');
INSERT INTO vd VALUES (7, 'The quick brown fox jumps over the lazy dog.', 'ff00000000000000');
-- The same statement: the second row is checked against the first.
INSERT INTO vd VALUES (14, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit.', '00ff000000000000'),
                      (15, 'Lorem ipsum dolor sit amet, consectetur adipiscing elit!', '00ff000000000001');
SELECT id, fp, body FROM vd ORDER BY id;

-- The threshold is applied exactly: at the pair's own similarity the row is refused, just above it
-- the row is stored.
SELECT simhash_similarity('The quick brown fox jumps over the lazy dog.', 'The quick brown fox jumps over a lazy dog.') AS s \gset
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body', min_similarity => :s);
INSERT INTO vd VALUES (9, 'The quick brown fox jumps over a lazy dog.', 'ff00000000000003');
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body', min_similarity => :s + 1e-12);
INSERT INTO vd VALUES (9, 'The quick brown fox jumps over a lazy dog.', 'ff00000000000003');
-- Another shingle length.
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body', min_similarity => 0.5, n => 5);
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'vd_fp_dedup';
INSERT INTO vd VALUES (10, 'The quick brown fox jumps over the lazy cat.', 'ff00000000000002');

-- skip and report.
SELECT simhash_add_dedup('vd', 'fp', 3, 'skip', verify => 'body');
INSERT INTO vd VALUES (11, 'The quick brown fox jumps over the lazy dog', 'ff00000000000010'),
                      (12, 'An unrelated sentence about databases.', 'ff00000000000010');
SELECT simhash_add_dedup('vd', 'fp', 3, 'report', verify => 'body');
INSERT INTO vd VALUES (13, 'the quick brown fox jumps over the lazy dog!!', 'ff00000000000020');
SELECT new_key, existing_key, distance, new_fingerprint, similarity FROM vd_near_duplicates;
SELECT id FROM vd ORDER BY id;

-- The lookup statement the trigger runs: the radius scan, the similarity last.
SELECT simhash_dedup_lookup('vd', 'fp', 3, 'body');
SELECT simhash_dedup_lookup('vd', 'fp', 3, 'body', 0.9, 4) AS lookup \gset
SET enable_seqscan = off;
PREPARE lookup(simhash64, tid, text) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE lookup('ff00000000000000', '(0,0)', 'The quick brown fox jumps over the lazy dog');
EXECUTE lookup('ff00000000000000', '(0,0)', 'The quick brown fox jumps over the lazy dog');
RESET enable_seqscan;

-- A generated fingerprint and varchar text: the templated table of the issue, small. Texts that
-- share only a template are not near-duplicates; 1 % edits of stored rows are.
CREATE TABLE templated (id bigserial PRIMARY KEY, body varchar NOT NULL,
                        fp simhash64 GENERATED ALWAYS AS (minhash64(body, 4, 2)) STORED);
INSERT INTO templated (body)
SELECT 'document number ' || g || ' about ' || md5(g::text) || ' ' || md5((g + 1)::text) FROM generate_series(1, 3000) g;
SELECT count(*) FROM simhash_create_indexes('templated', 'fp');
SELECT simhash_add_dedup('templated', 'fp', 11, 'skip', verify => 'body');
INSERT INTO templated (body) SELECT 'new document ' || g || ' text ' || md5((-g)::text) FROM generate_series(1, 500) g;
INSERT INTO templated (body)
SELECT 'document number ' || g || ' about ' || overlay(md5(g::text) placing 'x' from 5 for 1) || ' ' || md5((g + 1)::text)
FROM generate_series(1, 3000, 60) g;
SELECT count(*) FILTER (WHERE body LIKE 'new document%') AS new_kept,
       count(*) FILTER (WHERE body LIKE '%x%') AS edited_kept
FROM templated;

-- UPDATE: with verification a new text is checked even when the fingerprint stays the same.
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body');
UPDATE vd SET body = 'The quick brown fox jumps over the lazy dog.' WHERE id = 12;
UPDATE vd SET body = 'Another unrelated sentence about databases.' WHERE id = 12;
UPDATE vd SET fp = fp WHERE id = 12;      -- nothing changed: no check
-- The threshold goes into the trigger arguments with every digit, whatever the session's setting.
SET extra_float_digits = -10;
SELECT simhash_add_dedup('vd', 'fp', 3, 'error', verify => 'body', min_similarity => 0.8571428571428571);
RESET extra_float_digits;
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'vd_fp_dedup';

-- Misuse: 42703, 42804, 22023.
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'nope');
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'id');
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'body', min_similarity => 1.5);
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'body', n => 0);
SELECT simhash_dedup_lookup('vd', 'fp', 12);
SELECT simhash_dedup_lookup('vd', 'fp', 3, 'body', -1);
\set VERBOSITY default
-- The messages: the limits are simhash_core's, checked in one place for every entry point.
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'body', min_similarity => 1e300);
SELECT simhash_add_dedup('vd', 'fp', 3, verify => 'body', n => NULL);
SELECT simhash_dedup_lookup('vd', 'fp', 3, 'body', 0.5, 40);
SELECT simhash_dedup_lookup('vd', 'fp', 3, 'body', 'NaN');
DROP TRIGGER vd_fp_dedup ON vd;
CREATE TRIGGER t BEFORE INSERT ON vd FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error', 'min_similarity=0.5');
INSERT INTO vd VALUES (20, 'x', '0000000000000000');
DROP TRIGGER t ON vd;
CREATE TRIGGER t BEFORE INSERT ON vd FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error', 'verify=body', 'min_similarity=high');
INSERT INTO vd VALUES (20, 'x', '0000000000000000');
DROP TRIGGER t ON vd;
CREATE TRIGGER t BEFORE INSERT ON vd FOR EACH ROW EXECUTE FUNCTION simhash_dedup_trigger('fp', '3', 'error', 'verify=body', 'n=40');
INSERT INTO vd VALUES (20, 'x', '0000000000000000');
DROP TRIGGER t ON vd;

-- Concurrent writers (a second session through dblink): the commit-time recheck verifies too. A row
-- of another transaction in progress counts at this recheck only if that transaction has begun its
-- own check (dedup.sql tells the rule): here the other transaction PREPAREs to be checking.
-- (lock_timeout: a wait where none is expected fails the test instead of hanging it.)
CREATE EXTENSION dblink;
SELECT dblink_connect('other', pg_catalog.format('dbname=%s port=%s host=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
SET lock_timeout = '30s';
SELECT dblink_exec('other', 'SET lock_timeout = ''30s''');
CREATE TABLE vshared (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vshared', 'fp');
SELECT simhash_add_dedup('vshared', 'fp', 3, 'error', verify => 'body');
-- 1. An older transaction that has PREPAREd (it is checking) wrote a row within k with an unrelated
--    text: nothing to wait for, this one commits (without verification it would fail with 40001).
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (1, 'An unrelated sentence about databases.', '1111111111111111')$$);
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (3, 'Near-duplicate detection where the data lives.', '2222222222222222')$$);
SELECT dblink_exec('other', $$PREPARE TRANSACTION 'dedup_verify_older'$$);
BEGIN;
INSERT INTO vshared VALUES (2, 'The quick brown fox jumps over the lazy dog.', '1111111111111113');
COMMIT;
-- 2. ... and with a similar text: 40001, to be retried. The other's rows are then committed.
BEGIN;
INSERT INTO vshared VALUES (4, 'Near-duplicate detection, where the data lives!', '2222222222222223');
COMMIT;
SELECT dblink_exec('other', $$COMMIT PREPARED 'dedup_verify_older'$$);
-- 2b. A similar row of an older transaction in progress that has not begun its check is no
--     conflict yet: this one commits first. The other commits second: its COMMIT finds this row
--     and fails with 23505, the similarity in the DETAIL.
SELECT dblink_exec('other', 'BEGIN');
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (12, 'Every row is checked again at commit.', '6666666666666666')$$);
BEGIN;
INSERT INTO vshared VALUES (13, 'Every row is checked again at commit!', '6666666666666667');
COMMIT;
SELECT dblink_exec('other', 'COMMIT');
-- 3. REPEATABLE READ: a similar row committed after the snapshot is found at commit (23505, with
--    the similarity); an unrelated one within k is not a conflict.
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
-- 4. skip at commit: of two rows of this transaction with the same fingerprint, only the one
--    similar to the concurrent row is deleted.
SELECT simhash_add_dedup('vshared', 'fp', 3, 'skip', verify => 'body');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vshared;
SELECT dblink_exec('other', $$INSERT INTO vshared VALUES (9, 'Loaders must retry a transaction that fails.', '5555555555555555')$$);
INSERT INTO vshared VALUES (10, 'Loaders must retry a transaction that fails!', '5555555555555554'),
                           (11, 'A table of one hundred thousand rows.', '5555555555555554');
COMMIT;
SELECT id, body FROM vshared ORDER BY id;
SELECT dblink_disconnect('other');
-- 5. skip at commit: 30 rows of this transaction with one fingerprint and texts not similar to each
--    other (under 0.85) but each similar to the concurrent row: all 30 are deleted. (Each refusal
--    holds its own copy of the other row: a copy freed once per row crashed a new session.)
\c -
SELECT dblink_connect('other', pg_catalog.format('dbname=%s port=%s host=%s', current_database(),
    current_setting('port'), split_part(current_setting('unix_socket_directories'), ',', 1)));
CREATE TABLE vsame (id integer PRIMARY KEY, body text, fp simhash64);
SELECT count(*) FROM simhash_create_indexes('vsame', 'fp');
SELECT simhash_add_dedup('vsame', 'fp', 3, 'skip', verify => 'body', min_similarity => 0.85);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM vsame;
SELECT dblink_exec('other', $$INSERT INTO vsame VALUES (1, 'alpha beta gamma delta epsilon zeta eta theta', '6666666666666666')$$);
INSERT INTO vsame SELECT 100 + g, 'alpha beta gamma delta epsilon zeta eta theta ' || substr(md5(g::text), 1, 6), '6666666666666664'
FROM generate_series(1, 30) g;
SELECT count(*) FROM vsame;
COMMIT;
SELECT id, body FROM vsame ORDER BY id;
SELECT dblink_disconnect('other');
DROP EXTENSION dblink;

DROP TABLE vd, vd_near_duplicates, templated, vshared, vsame;
