-- The SQLSTATEs docs/reference.md promises for user errors, asserted by code (psql prints only the code
-- with VERBOSITY sqlstate), for the errors no other test asserts by code. The other tests assert
-- 22021 (encodings), 22023 (functions, similarity, pairs, dedup_verify, index_kinds), 22P02
-- (type_io), 23502 and 54000 (pairs, table form), 23505 (dedup_deferred, hostile), 42501
-- (privileges, security), 42P01 (security), 55000 (pairs, dedup_deferred); the concurrency codes
-- are in dedup, through a second session (23505 at COMMIT, for the second of two concurrent writers
-- of near-duplicates to commit; 40001, against an older writer that has begun its check, there a
-- PREPAREd one; 40P01), the deferred check's 0A000 and 55000 in dedup_deferred.
\set VERBOSITY sqlstate

-- Custom features, simhash(text[], float8[]): arrays of different lengths are 2202E, NULL elements
-- 22004, non-finite weights or weights beyond about 2.7e11 22023, and weights that sum beyond
-- about 5.5e11 (here three of one feature) 22003, in the array form and in the aggregate.
SELECT simhash(ARRAY['a', 'b'], ARRAY[1.0]);
SELECT simhash(ARRAY['a', NULL], ARRAY[1.0, 2.0]);
SELECT simhash(ARRAY['a', 'b'], ARRAY[1.0, NULL]);
SELECT simhash(ARRAY['a'], ARRAY['NaN'::float8]);
SELECT simhash(ARRAY['a'], ARRAY['-Infinity'::float8]);
SELECT simhash(ARRAY['a'], ARRAY[3e11]);
SELECT simhash(ARRAY['a', 'a', 'a'], ARRAY[2.6e11, 2.6e11, 2.6e11]);
SELECT simhash_agg(f, w) IS NOT NULL AS within_range FROM (VALUES ('a', 2.6e11), ('a', 2.6e11)) v(f, w);
SELECT simhash_agg(f, w) FROM (VALUES ('a', 2.6e11), ('a', 2.6e11), ('a', 2.6e11)) v(f, w);
SELECT simhash_agg(f, w) FROM (VALUES ('a', 3e11)) v(f, w);

-- Arguments out of range: 22023.
SELECT simhash('text', 0);
SELECT simhash_ngrams('text', 33);
SELECT minhash64('text', 0);
SELECT minhash64('text', 3, 5);
SELECT * FROM simhash_pairs('SELECT 1, ''0000000000000000''::simhash64, ''text''', 3, 1.5);
CREATE TABLE codes_docs (id integer PRIMARY KEY, fp simhash64, body text);
SELECT simhash_dedup_lookup('codes_docs', 'fp', 3, 'body', 0.7, 33);

-- The type: a bad literal (here 65 binary digits) is 22P02, a bit string of another length 22026.
SELECT '00000000000000000000000000000000000000000000000000000000000000001'::simhash64;
SELECT B'1010'::simhash64;
SELECT '1010'::bit(4)::simhash64;

-- Pairs of a query: a NULL id with a fingerprint is 23502, more pairs than maintenance_work_mem
-- holds 54000.
SELECT * FROM simhash_pairs('SELECT NULL::int, ''0000000000000000''::simhash64', 3);
SET maintenance_work_mem = '1MB';
SELECT count(*) FROM simhash_pairs('SELECT i, ''0123456789abcdef''::simhash64 FROM generate_series(1, 1000) i', 0);
RESET maintenance_work_mem;

-- simhash_index_check: 42809 for another kind of index; XX002 for a simhash index that is
-- corrupt, as are the lookups through it. The damage: the index's file cut to its first block,
-- the metapage (rewritten with its own first 8 kB by exporting them as a large object); the
-- metapage now names blocks the file does not have. (A temporary table's index: its pages are
-- this backend's, and go with the table.)
CREATE TEMP TABLE codes_check (id integer, fp simhash64);
INSERT INTO codes_check SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 100) i;
CREATE INDEX codes_check_fp ON codes_check USING simhash (fp);
CREATE INDEX codes_check_id ON codes_check (id);
SELECT simhash_index_check('codes_check_fp') AS rows_before;
SELECT simhash_index_check('codes_check_id');
BEGIN;
SELECT lo_from_bytea(0, substring(pg_read_binary_file(pg_relation_filepath('codes_check_fp')) FROM 1 FOR 8192)) AS first_block \gset
SELECT lo_export(:first_block, pg_relation_filepath('codes_check_fp')) AS exported;
ROLLBACK;
SELECT pg_relation_size('codes_check_fp') AS bytes_left;
SELECT simhash_index_check('codes_check_fp');
SET enable_seqscan = off;
SELECT count(*) FROM codes_check WHERE fp <~> '0123456789abcdef' <= 3;
RESET enable_seqscan;
DROP TABLE codes_check;

-- 42P06: CREATE EXTENSION, and the update from 0.2.0 (the release before the schema
-- simhash_internal), where a schema of that name exists. (In transactions rolled back: the
-- extension and every object of the earlier tests are back.)
BEGIN;
SET LOCAL client_min_messages = warning;
DROP EXTENSION simhash CASCADE;
CREATE SCHEMA simhash_internal;
CREATE EXTENSION simhash;
ROLLBACK;
BEGIN;
SET LOCAL client_min_messages = warning;
DROP EXTENSION simhash CASCADE;
CREATE EXTENSION simhash VERSION '0.2.0';
CREATE SCHEMA simhash_internal;
ALTER EXTENSION simhash UPDATE TO '0.3.0';
ROLLBACK;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'simhash') AS current
FROM pg_extension WHERE extname = 'simhash';

-- 0A000 for the near-duplicate constraint on a Citus table. Without Citus: its catalog table
-- pg_dist_partition, which simhash_add_dedup consults, made here for one rolled-back transaction
-- (tests/citus asserts the message against a real Citus cluster).
BEGIN;
SET LOCAL allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass);
INSERT INTO pg_catalog.pg_dist_partition VALUES ('codes_docs');
SELECT simhash_add_dedup('codes_docs', 'fp');
ROLLBACK;
SELECT to_regclass('pg_catalog.pg_dist_partition') IS NULL AS no_citus_left;

\set VERBOSITY default
DROP TABLE codes_docs;
