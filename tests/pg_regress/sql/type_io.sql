-- simhash64: literals, binary I/O, comparison, indexes, casts.

-- Text input: 16 hex digits (optional 0x, either case, surrounding blanks) or 64 binary digits.
SELECT '0123456789abcdef'::simhash64 AS plain,
       '0x0123456789ABCDEF'::simhash64 AS prefixed,
       '  fedcba9876543210  '::simhash64 AS padded,
       '0000000000000000000000000000000000000000000000000000000000000001'::simhash64 AS binary;

-- Bad literals are 22P02 and name the value.
\set VERBOSITY default
SELECT 'zz'::simhash64;
SELECT ''::simhash64;
SELECT '0123456789abcde'::simhash64;
SELECT '0123456789abcdef0'::simhash64;
SELECT '0x0123456789abcdeg'::simhash64;
SELECT '-123456789abcdef'::simhash64;
SELECT '00000000000000000000000000000000000000000000000000000000000000012'::simhash64;
\set VERBOSITY sqlstate
SELECT 'zz'::simhash64;
\set VERBOSITY default

-- COPY goes through the same input function.
CREATE TABLE literals (fp simhash64);
COPY literals FROM stdin;
ffffffffffffffff
0000000000000000
\N
\.
SELECT fp FROM literals ORDER BY fp NULLS FIRST;

-- Binary send/recv: 8 bytes, most significant first, and a binary COPY round trip.
SELECT simhash_internal.simhash64_send('0123456789abcdef');
CREATE TABLE binary_copy (fp simhash64);
INSERT INTO binary_copy VALUES ('0123456789abcdef'), ('ffffffffffffffff'), (NULL);
COPY binary_copy TO '/tmp/simhash_regress_binary_copy' (FORMAT binary);
CREATE TABLE binary_copy_back (fp simhash64);
COPY binary_copy_back FROM '/tmp/simhash_regress_binary_copy' (FORMAT binary);
SELECT fp FROM binary_copy_back ORDER BY fp;

-- Order is unsigned, like the hex text: 8000... sorts after 7fff....
SELECT fp FROM (VALUES ('8000000000000000'::simhash64), ('7fffffffffffffff'), ('0000000000000001'),
                       ('ffffffffffffffff')) v(fp) ORDER BY fp;
SELECT '8000000000000000'::simhash64 > '7fffffffffffffff'::simhash64 AS gt,
       '8000000000000000'::simhash64 >= '8000000000000000'::simhash64 AS ge,
       '0000000000000001'::simhash64 < 'ffffffffffffffff'::simhash64 AS lt,
       '0000000000000001'::simhash64 <= '0000000000000001'::simhash64 AS le,
       '0000000000000001'::simhash64 = '0000000000000001'::simhash64 AS eq,
       '0000000000000001'::simhash64 <> '0000000000000002'::simhash64 AS ne;

-- Default btree and hash operator classes: UNIQUE (the duplicate is refused), ORDER BY, GROUP BY,
-- DISTINCT, hash join, hash index, hash partitioning.
CREATE TABLE fps (id int PRIMARY KEY, fp simhash64 UNIQUE);
INSERT INTO fps SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 1000) i;
INSERT INTO fps VALUES (1001, (SELECT fp FROM fps WHERE id = 1));
SELECT count(DISTINCT fp) FROM fps;
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT fp, count(*) FROM fps GROUP BY fp;
SELECT count(*) FROM (SELECT fp, count(*) FROM fps GROUP BY fp) g;
RESET enable_sort;
SET enable_mergejoin = off;
SET enable_nestloop = off;
-- (Two tables: PostgreSQL 18 may remove a join of a table with itself.)
CREATE TABLE fps_copy AS SELECT * FROM fps;
EXPLAIN (COSTS OFF) SELECT count(*) FROM fps a JOIN fps_copy b ON a.fp = b.fp;
SELECT count(*) FROM fps a JOIN fps_copy b ON a.fp = b.fp;
RESET enable_mergejoin;
RESET enable_nestloop;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM fps WHERE fp = '0123456789abcdef';
SELECT id FROM fps ORDER BY fp LIMIT 3;
RESET enable_seqscan;
CREATE TABLE fps_hash (fp simhash64);
CREATE INDEX ON fps_hash USING hash (fp);
INSERT INTO fps_hash SELECT fp FROM fps;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM fps_hash WHERE fp = (SELECT fp FROM fps WHERE id = 7);
SELECT count(*) FROM fps_hash WHERE fp = (SELECT fp FROM fps WHERE id = 7);
RESET enable_seqscan;
CREATE TABLE fps_parted (fp simhash64) PARTITION BY HASH (fp);
CREATE TABLE fps_parted_0 PARTITION OF fps_parted FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE fps_parted_1 PARTITION OF fps_parted FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO fps_parted SELECT fp FROM fps;
SELECT (SELECT count(*) FROM fps_parted_0) + (SELECT count(*) FROM fps_parted_1) AS total;

-- Casts: bigint is the same 64 bits; bit(64) lists them most significant first.
SELECT 'ffffffffffffffff'::simhash64::bigint AS minus_one,
       (-1)::bigint::simhash64 AS all_ones,
       '8000000000000000'::simhash64::bigint AS most_negative,
       1::bigint::simhash64 AS one;
SELECT '0123456789abcdef'::simhash64::bit(64);
SELECT B'0000000100100011010001010110011110001001101010111100110111101111'::simhash64;
SELECT '0123456789abcdef'::simhash64::bit(64)::simhash64 AS round_trip;
SELECT B'0101'::simhash64;
SELECT NULL::simhash64::bigint, NULL::bigint::simhash64, NULL::simhash64::bit(64);

DROP TABLE literals, binary_copy, binary_copy_back, fps, fps_hash, fps_parted;
