-- Batch near-duplicate pairs and clusters: exactly the pairs a self-join finds, for several radii.
CREATE TABLE pair_docs (id int PRIMARY KEY, fp simhash64);
INSERT INTO pair_docs SELECT i, ('x' || substr(md5('p' || i), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 3000) i;
-- Near-duplicates of rows 1..30 at distances 0..12 (bits spread over the segments), and a NULL.
INSERT INTO pair_docs
SELECT 100000 + s.id * 100 + d,
       (s.fp::bigint # coalesce((SELECT bit_or(1::bigint << ((s.id * 7 + t * 13) % 64))
                                 FROM generate_series(0, d - 1) t), 0))::simhash64
FROM pair_docs s, generate_series(0, 12) d WHERE s.id <= 30;
INSERT INTO pair_docs VALUES (999999, NULL);

-- Reference: every pair within 12, by a self-join with PostgreSQL's own bit_count().
CREATE TABLE pair_reference AS
SELECT a.id::bigint AS id_a, b.id::bigint AS id_b, bit_count((a.fp::bigint # b.fp::bigint)::bit(64))::int AS distance
FROM pair_docs a JOIN pair_docs b ON a.id < b.id
WHERE bit_count((a.fp::bigint # b.fp::bigint)::bit(64)) <= 12;

CREATE FUNCTION pairs_check(k int, OUT radius int, OUT pairs bigint, OUT differences bigint)
LANGUAGE plpgsql AS $$
BEGIN
    radius := k;
    CREATE TEMP TABLE found AS SELECT * FROM simhash_pairs('pair_docs', 'fp', k);
    CREATE TEMP TABLE expected AS SELECT * FROM pair_reference WHERE distance <= k;
    SELECT count(*) INTO pairs FROM found;
    SELECT count(*) INTO differences FROM (
        (SELECT * FROM found EXCEPT ALL SELECT * FROM expected)
        UNION ALL (SELECT * FROM expected EXCEPT ALL SELECT * FROM found)) x;
    DROP TABLE found, expected;
END $$;
SELECT (pairs_check(k)).* FROM unnest('{0,1,3,5,7,9,11,12}'::int[]) k;

-- Through a simhash index on the column (up to k = 11; k = 12 is searched in memory): the same
-- pairs and clusters. Entries of rows the statement does not see drop out: rows of an aborted
-- update, delete and insert; versions left by updates, HOT or not, of a fingerprint changed and
-- changed back.
ALTER TABLE pair_docs ADD COLUMN note text, SET (fillfactor = 50);
VACUUM FULL pair_docs;
CREATE INDEX pair_docs_simhash ON pair_docs USING simhash (fp);
BEGIN;
UPDATE pair_docs SET fp = (fp::bigint # 255)::simhash64 WHERE id % 3 = 0;
DELETE FROM pair_docs WHERE id % 5 = 0;
INSERT INTO pair_docs SELECT id + 500000, fp FROM pair_docs WHERE id > 100000;
ROLLBACK;
BEGIN;
UPDATE pair_docs SET note = 'hot' WHERE id % 7 = 0;
SELECT pg_stat_get_xact_tuples_hot_updated('pair_docs'::regclass) > 0 AS hot_updates;
COMMIT;
UPDATE pair_docs SET fp = (fp::bigint # 1)::simhash64 WHERE id % 11 = 0;
UPDATE pair_docs SET fp = (fp::bigint # 1)::simhash64 WHERE id % 11 = 0;
SET client_min_messages = debug1;
SELECT count(*) FROM simhash_pairs('pair_docs', 'fp', 3);
SELECT count(*) FROM simhash_clusters('pair_docs', 'fp', 3);
RESET client_min_messages;
SELECT (pairs_check(k)).* FROM unnest('{0,1,3,5,7,9,11,12}'::int[]) k;
SELECT k, count(*) AS differences FROM generate_series(0, 12, 3) k, LATERAL (
    (SELECT * FROM simhash_clusters('pair_docs', 'fp', k) EXCEPT ALL SELECT * FROM simhash_clusters('SELECT id, fp FROM pair_docs', k))
    UNION ALL
    (SELECT * FROM simhash_clusters('SELECT id, fp FROM pair_docs', k) EXCEPT ALL SELECT * FROM simhash_clusters('pair_docs', 'fp', k))) d
GROUP BY k ORDER BY k;
-- Ids of every integer type, and the same errors as without the index.
CREATE TABLE pair_small (id smallint, fp simhash64);
INSERT INTO pair_small VALUES (1, '0000000000000000'), (2, '0000000000000001'), (-3, '0000000000000000'), (4, NULL);
CREATE INDEX ON pair_small USING simhash (fp);
SELECT * FROM simhash_pairs('pair_small', 'fp', 1) ORDER BY 1, 2;
INSERT INTO pair_small VALUES (NULL, '0000000000000003');
\set VERBOSITY sqlstate
SELECT * FROM simhash_pairs('pair_small', 'fp', 1);
SELECT * FROM simhash_pairs('pair_small', 'nope', 1);
\set VERBOSITY default
DROP TABLE pair_small;
-- Many copies of one fingerprint are one group: compared once, not pairwise.
CREATE TABLE pair_same AS SELECT i AS id, '0123456789abcdef'::simhash64 AS fp FROM generate_series(1, 50000) i;
CREATE INDEX ON pair_same USING simhash (fp);
SELECT count(*), min(representative), max(representative) FROM simhash_clusters('pair_same', 'fp', 3);
SET maintenance_work_mem = '1MB';
\set VERBOSITY sqlstate
SELECT count(*) FROM simhash_pairs('pair_same', 'fp', 0);
\set VERBOSITY default
RESET maintenance_work_mem;
DROP TABLE pair_same;
-- Where the index does not hold every row the query reads, the search is in memory: a parent
-- table's index and its child's rows; a materialized view not yet populated (55000, as before).
CREATE TABLE pair_parent (id int, fp simhash64);
CREATE TABLE pair_child () INHERITS (pair_parent);
CREATE INDEX ON pair_parent USING simhash (fp);
INSERT INTO pair_parent VALUES (1, '0000000000000000');
INSERT INTO pair_child VALUES (2, '0000000000000001');
SET client_min_messages = debug1;
SELECT * FROM simhash_pairs('pair_parent', 'fp', 1);
RESET client_min_messages;
CREATE MATERIALIZED VIEW pair_view AS SELECT * FROM pair_parent WITH NO DATA;
CREATE INDEX ON pair_view USING simhash (fp);
\set VERBOSITY sqlstate
SELECT * FROM simhash_pairs('pair_view', 'fp', 1);
\set VERBOSITY default
REFRESH MATERIALIZED VIEW pair_view;
SELECT * FROM simhash_pairs('pair_view', 'fp', 1);
DROP TABLE pair_parent CASCADE;
DROP INDEX pair_docs_simhash;
ALTER TABLE pair_docs DROP COLUMN note, RESET (fillfactor);

-- The query form takes any (integer id, fingerprint) query; a trailing ';' or comment is fine.
SELECT * FROM simhash_pairs('SELECT id::bigint, fp FROM pair_docs WHERE id IN (1, 100100, 100101, 100104) -- four rows', 3)
ORDER BY id_a, id_b;
SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM pair_docs WHERE id IN (1, 100100);  ', 3);
-- id_a < id_b whatever the row order; identical fingerprints pair at distance 0.
SELECT * FROM simhash_pairs('VALUES (5, ''0000000000000000''::simhash64), (1, ''0000000000000001''), (3, ''0000000000000000''), (4, ''0000000000000000'')', 1)
ORDER BY id_a, id_b;
SELECT * FROM simhash_clusters('VALUES (5, ''0000000000000000''::simhash64), (1, ''0000000000000001''), (3, ''0000000000000000''), (9, ''ffffffffffffffff'')', 1)
ORDER BY id;
-- Many identical fingerprints: one group, found without comparing them pairwise.
SELECT count(*), min(representative), max(representative)
FROM simhash_clusters('SELECT i, ''0123456789abcdef''::simhash64 FROM generate_series(1, 50000) i', 0);
-- The pairs are bounded by maintenance_work_mem.
SET maintenance_work_mem = '1MB';
SELECT count(*) FROM simhash_pairs('SELECT i, ''0123456789abcdef''::simhash64 FROM generate_series(1, 1000) i', 0);
RESET maintenance_work_mem;

-- Clusters: every row with a near-duplicate, and the smallest id of its group.
SELECT * FROM simhash_clusters('SELECT id, fp FROM pair_docs WHERE id IN (2, 100200, 100201, 100202, 100212, 5)', 3)
ORDER BY id;
-- Keep one row per group: delete the others.
CREATE TABLE dedup AS SELECT * FROM pair_docs WHERE id <= 3 OR id BETWEEN 100100 AND 100399;
DELETE FROM dedup d USING simhash_clusters('dedup', 'fp', 3) c WHERE d.id = c.id AND c.id <> c.representative;
SELECT count(*) AS left_over, (SELECT count(*) FROM simhash_pairs('dedup', 'fp', 3)) AS pairs_left FROM dedup;

-- Errors.
\set VERBOSITY default
SELECT * FROM simhash_pairs('pair_docs', 'fp', 17);
SELECT * FROM simhash_pairs('SELECT 1, 2', 3);
SELECT * FROM simhash_pairs('SELECT 1.5, ''0000000000000000''::simhash64', 3);
SELECT * FROM simhash_pairs('SELECT NULL::int, ''0000000000000000''::simhash64', 3);
\set VERBOSITY terse
SELECT * FROM simhash_pairs('pair_docs', 'nope', 3);
\set VERBOSITY sqlstate
SELECT * FROM simhash_pairs('pair_docs', 'fp', -1);
SELECT * FROM simhash_pairs('SELECT 1, 2', 3);
\set VERBOSITY default

-- A long run stops at statement_timeout (interrupts are checked while reading and searching).
SET statement_timeout = '200ms';
\set VERBOSITY terse
SELECT count(*) FROM simhash_pairs(
    'SELECT i, (''x'' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 3000000) i', 16);
\set VERBOSITY default
RESET statement_timeout;

DROP FUNCTION pairs_check(int);
DROP TABLE pair_docs, pair_reference, dedup;

-- Verified pairs and clusters: a pair within k counts only if its texts are similar enough, so
-- groups do not chain through fingerprints that are near by chance.
CREATE TABLE vtexts (id integer PRIMARY KEY, body text, fp simhash64);
INSERT INTO vtexts VALUES
 (1, 'The quick brown fox jumps over the lazy dog.', '0000000000000000'),
 (2, 'The quick brown fox jumps over the lazy dog!', '0000000000000001'),
 (3, 'An unrelated sentence about databases.', '0000000000000003'),
 (4, 'An unrelated sentence about the databases.', '0000000000000007'),
 (5, 'The quick brown fox jumped over the lazy dog.', 'f000000000000000'),
 (6, NULL, '0000000000000000');
SELECT * FROM simhash_pairs('vtexts', 'fp', 3) ORDER BY 1, 2;
SELECT id_a, id_b, distance, round(similarity::numeric, 3) AS similarity
FROM simhash_pairs('vtexts', 'fp', 3, 'body', 0.8) ORDER BY 1, 2;
SELECT id_a, id_b, distance, round(similarity::numeric, 3) AS similarity
FROM simhash_pairs('SELECT id, fp, body FROM vtexts WHERE id <> 2;', 3, 0.5) ORDER BY 1, 2;
SELECT * FROM simhash_clusters('vtexts', 'fp', 3) ORDER BY 1;
SELECT * FROM simhash_clusters('vtexts', 'fp', 3, 'body', 0.8) ORDER BY 1;
SELECT * FROM simhash_clusters('SELECT id, fp, body FROM vtexts', 3, 0.8, 4) ORDER BY 1;
SELECT * FROM simhash_clusters_from_pairs('SELECT a, b FROM (VALUES (5, 7), (7, 9), (1, 2), (2, NULL)) v(a, b)') ORDER BY 1;
-- The threshold is applied exactly.
SELECT simhash_similarity('An unrelated sentence about databases.', 'An unrelated sentence about the databases.') AS s \gset
SELECT count(*) FROM simhash_pairs('vtexts', 'fp', 3, 'body', :s) WHERE id_a = 3;
SELECT count(*) FROM simhash_pairs('vtexts', 'fp', 3, 'body', :s + 1e-12) WHERE id_a = 3;
-- Misuse: 22023, 42804.
\set VERBOSITY sqlstate
SELECT * FROM simhash_pairs('vtexts', 'fp', 3, 'body', 1.5);
SELECT * FROM simhash_pairs('vtexts', 'fp', 3, 'body', 0.8, n => 0);
SELECT * FROM simhash_pairs('vtexts', 'fp', 17, 'body', 0.8);
SELECT * FROM simhash_clusters('SELECT id, fp, body FROM vtexts', 3, 'NaN');
SELECT * FROM simhash_clusters_from_pairs('SELECT body, id FROM vtexts');
\set VERBOSITY default
DROP TABLE vtexts;

-- Pairs by key (what the workers of a Citus table run, src/pairs/spread.rs): every fingerprint has
-- 4 (k / 4 + 1) keys, and the pairs of each key's rows, together, are exactly the pairs within k,
-- each once.
CREATE TABLE kdocs (id bigint PRIMARY KEY, fp simhash64);
INSERT INTO kdocs SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 3000) i;
INSERT INTO kdocs
SELECT 100000 + s.id * 100 + d,
       (s.fp::bigint # (SELECT coalesce(bit_or(1::bigint << ((s.id * 7 + t * 13) % 64)::int), 0)
                        FROM generate_series(0, d - 1) t))::simhash64
FROM kdocs s, generate_series(0, 12) d WHERE s.id <= 30;
INSERT INTO kdocs VALUES (900001, NULL);
SELECT k, min(cardinality(simhash_pair_keys(fp, k))) AS keys, max(cardinality(simhash_pair_keys(fp, k))) AS keys_max
FROM kdocs, generate_series(0, 11, 4) k WHERE fp IS NOT NULL GROUP BY k ORDER BY k;
CREATE FUNCTION keyed_pairs(k int) RETURNS TABLE (id_a bigint, id_b bigint, distance int) LANGUAGE sql AS $$
    SELECT (p.pair).* FROM (
        SELECT simhash_key_pairs(key, array_agg(id), array_agg(fp), k) AS pair
        FROM (SELECT unnest(simhash_pair_keys(fp, k)) AS key, id, fp FROM kdocs) w GROUP BY key) p
$$;
SELECT k,
       (SELECT count(*) FROM keyed_pairs(k)) AS pairs,
       (SELECT count(*) FROM ((SELECT * FROM keyed_pairs(k) EXCEPT ALL SELECT * FROM simhash_pairs('SELECT id, fp FROM kdocs', k))
                              UNION ALL
                              (SELECT * FROM simhash_pairs('SELECT id, fp FROM kdocs', k) EXCEPT ALL SELECT * FROM keyed_pairs(k))) d) AS differences
FROM generate_series(0, 11) k;
-- Rows with a NULL fingerprint are left out, and rows without the key; copies of a fingerprint
-- pair with each other under its first key only; links_only keeps enough pairs for the groups.
SELECT * FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[1],
                                '{1, 2, 3, 4, 5, 6}', '{0000000000000000, 0000000000000007, 0000000000000000, NULL, ffff000000000000, 0000000000000000}', 3);
SELECT * FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[1],
                                '{1, 2, 3, 4, 5, 6}', '{0000000000000000, 0000000000000007, 0000000000000000, NULL, ffff000000000000, 0000000000000000}', 3, true);
SELECT count(*) FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[2],
                                '{1, 3}', '{0000000000000000, 0000000000000000}', 3);
-- links_only keeps one link per row however many pairs there are: 50,000 copies within 1MB.
SET maintenance_work_mem = '1MB';
SELECT count(*) AS links, count(DISTINCT id_a) AS firsts FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[1],
    array(SELECT generate_series(1, 50000)::bigint), array_fill('0000000000000000'::simhash64, '{50000}'), 3, true);
RESET maintenance_work_mem;
-- Misuse: 23502 (a NULL id with a fingerprint), 22023, 54000 (more pairs than maintenance_work_mem).
\set VERBOSITY sqlstate
SELECT * FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[1], '{1, NULL}', '{0000000000000000, 0000000000000000}', 3);
SET maintenance_work_mem = '1MB';
SELECT count(*) FROM simhash_key_pairs((simhash_pair_keys('0000000000000000', 3))[1],
                                       array(SELECT generate_series(1, 1000)::bigint), array_fill('0000000000000000'::simhash64, '{1000}'), 3);
RESET maintenance_work_mem;
SELECT simhash_pair_keys('0000000000000000', 12);
SELECT simhash_pair_keys('0000000000000000', -1);
SELECT * FROM simhash_key_pairs(0, '{1, 2}', '{0000000000000000}', 3);
SELECT * FROM simhash_key_pairs(4 << 16, '{1}', '{0000000000000000}', 3);
SELECT * FROM simhash_key_pairs(-1, '{1}', '{0000000000000000}', 3);
SELECT * FROM simhash_key_pairs(0, '{1}', '{0000000000000000}', 12);
\set VERBOSITY default
DROP FUNCTION keyed_pairs(int);
DROP TABLE kdocs;
