-- Binary codes of any length as bit(n) (src/codes/): simhash_hamming, simhash_code(bytea), the ball
-- and the operators of the simhash_bit_ops operator class, checked against bit_count(a # b).
-- (The index itself: bit_index. pgvector beside it: pgvector_codes.)
\set VERBOSITY sqlstate

SELECT simhash_hamming(B'1010', B'0110') AS d4, simhash_hamming(B'1', B'1') AS d0,
       simhash_hamming(B'101'::bit(3), B'010') AS d3;
-- The result is the distance domain, so radius tests get the planner's support.
SELECT pg_typeof(simhash_hamming(B'1', B'0'));
-- Equal to bit_count(a # b) on random codes of many lengths (padding bits do not count).
CREATE TEMP TABLE pairs AS
SELECT n, (SELECT string_agg(CASE WHEN hashint8(n * 100000 + j) & 1 = 0 THEN '0' ELSE '1' END, '' ORDER BY j)
           FROM generate_series(1, len) j)::varbit AS a,
          (SELECT string_agg(CASE WHEN hashint8(n * 100000 + j + 50000) & 1 = 0 THEN '0' ELSE '1' END, '' ORDER BY j)
           FROM generate_series(1, len) j)::varbit AS b,
       len
FROM generate_series(1, 60) n, LATERAL (SELECT (n * 37) % 300 + 1 AS len) l;
SELECT count(*) AS checked, count(*) FILTER (WHERE simhash_hamming(a, b) <> bit_count(a # b)) AS wrong,
       count(DISTINCT len) AS lengths
FROM pairs;
-- Unequal lengths: 22026, as bit's own # (even when the byte counts agree).
SELECT simhash_hamming(B'1010', B'10100');
SELECT simhash_hamming(B'1010101', B'10101010');
SELECT B'1010' <@ simhash_code_ball(B'101', 1);
SELECT B'1010' <-> simhash_code_ball(B'101', 1);
SELECT B'1010' <~> simhash_code_ball(B'101', 1);
-- NULLs: strict functions; a ball with a NULL center or radius contains nothing.
SELECT simhash_hamming(NULL, B'1') IS NULL AS null_a,
       (B'1' <@ simhash_code_ball(NULL, 3)) IS NULL AS null_center,
       (B'1' <@ simhash_code_ball(B'1', NULL)) IS NULL AS null_radius,
       (B'1' <-> simhash_code_ball(NULL, 3)) IS NULL AS null_distance,
       (B'1' <~> simhash_code_ball(NULL, 3)) IS NULL AS null_distance_float;
-- The ball: within k bits, boundary included; a negative radius holds nothing.
SELECT k, B'11110000' <@ simhash_code_ball(B'11000000', k) AS within,
       B'11110000' <-> simhash_code_ball(B'11000000', k) AS distance,
       B'11110000' <~> simhash_code_ball(B'11000000', k) AS distance_float
FROM generate_series(-1, 3) k;
SELECT simhash_code_ball(B'1011', 2);
-- simhash_code: bytes in order, first bit = the most significant bit of the first byte.
SELECT simhash_code('\x80ff01'::bytea) AS code, length(simhash_code('\x0102'::bytea)) AS bits,
       simhash_code(''::bytea) AS empty,
       simhash_hamming(simhash_code('\x00ff'::bytea), simhash_code('\x0f0f'::bytea)) AS d8;
SELECT simhash_code(decode(repeat('00', 513), 'hex'));
-- Without a simhash index, a radius test is a filter; the operators are exact on a table.
CREATE TEMP TABLE codes AS
SELECT i, (SELECT string_agg(CASE WHEN hashint8(i * 1000 + j) & 1 = 0 THEN '0' ELSE '1' END, '' ORDER BY j)
           FROM generate_series(1, 40) j)::bit(40) AS code
FROM generate_series(1, 400) i;
SELECT k, count(*) FILTER (WHERE code <@ simhash_code_ball(q, k)) = count(*) FILTER (WHERE bit_count(code # q) <= k) AS same,
       count(*) FILTER (WHERE simhash_hamming(code, q) <= k) = count(*) FILTER (WHERE bit_count(code # q) <= k) AS same_hamming
FROM codes, (SELECT code AS q FROM codes WHERE i = 1) q, generate_series(0, 40, 5) k GROUP BY k ORDER BY k;
SELECT array_agg(i ORDER BY code <-> simhash_code_ball(q, 0), i) = array_agg(i ORDER BY bit_count(code # q), i) AS same_order
FROM codes, (SELECT code AS q FROM codes WHERE i = 7) q;
-- Pairs and clusters of a bit column equal a brute-force self-join (groups planted at 0-6 bits).
CREATE TEMP TABLE near AS SELECT i AS id, code FROM codes;
INSERT INTO near SELECT 1000 + i * 10 + d, code # (repeat('1', d) || repeat('0', 40 - d))::bit(40)
FROM codes, generate_series(0, 6) d WHERE i <= 20;
INSERT INTO near VALUES (5000, NULL);
SELECT k, (SELECT count(*) FROM simhash_pairs('near', 'code', k)) AS pairs,
       (SELECT count(*) FROM (SELECT id_a, id_b, distance FROM simhash_pairs('near', 'code', k)
                              EXCEPT SELECT a.id, b.id, bit_count(a.code # b.code)::int FROM near a JOIN near b
                                     ON a.id < b.id AND bit_count(a.code # b.code) <= k) x) AS not_brute_force,
       (SELECT count(*) FROM near a JOIN near b ON a.id < b.id AND bit_count(a.code # b.code) <= k) AS brute_force
FROM generate_series(0, 12, 4) k;
WITH c AS (SELECT * FROM simhash_clusters('near', 'code', 6)),
     b AS (SELECT * FROM simhash_clusters_from_pairs('SELECT a.id, b.id FROM near a JOIN near b ON a.id < b.id AND bit_count(a.code # b.code) <= 6'))
SELECT (SELECT count(*) FROM c) AS rows, (SELECT count(DISTINCT representative) FROM c) AS groups,
       (SELECT count(*) FROM (TABLE c EXCEPT TABLE b) x) + (SELECT count(*) FROM (TABLE b EXCEPT TABLE c) x) AS not_brute_force;
-- The id column is an integer (42804: another type was cast to bigint, a float rounded into ids
-- the table does not have), not NULL where there is a code (23502, even for a row without a pair:
-- a NULL id was left out), as for simhash64; the verified forms too.
CREATE TEMP TABLE near_ids (id bigint, fid float8, sid text, code bit(4), body text);
INSERT INTO near_ids VALUES (1, 1.5, 'a', B'1010', 'same text'), (2, 2.5, 'b', B'1010', 'same text');
SELECT * FROM simhash_pairs('near_ids', 'code', 0, 'fid');
SELECT * FROM simhash_clusters('near_ids', 'code', 0, 'sid');
SELECT * FROM simhash_pairs('near_ids', 'code', 0, 'body', 0.5, 'fid');
SELECT * FROM simhash_clusters('near_ids', 'code', 0, 'body', 0.5, 'fid');
INSERT INTO near_ids VALUES (NULL, NULL, NULL, B'0000', 'other');
SELECT * FROM simhash_pairs('near_ids', 'code', 0);
SELECT * FROM simhash_clusters('near_ids', 'code', 0);
SELECT * FROM simhash_pairs('near_ids', 'code', 0, 'body', 0.5);
UPDATE near_ids SET code = NULL WHERE id IS NULL;
SELECT * FROM simhash_pairs('near_ids', 'code', 0);
DROP TABLE near_ids;
-- A `bit varying` column (which the index and the constraint take too), without and with its
-- simhash index: the same pairs and clusters as of the bit column.
CREATE TEMP TABLE near_varying AS SELECT id, code::varbit AS code FROM near;
CREATE TEMP TABLE pairs_near AS SELECT * FROM simhash_pairs('near', 'code', 6);
CREATE TEMP TABLE clusters_near AS SELECT * FROM simhash_clusters('near', 'code', 6);
CREATE FUNCTION pg_temp.varying_differences() RETURNS TABLE (pairs bigint, differences bigint) LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM pairs_near),
           (SELECT count(*) FROM ((TABLE pairs_near EXCEPT SELECT * FROM simhash_pairs('near_varying', 'code', 6))
                                  UNION ALL (SELECT * FROM simhash_pairs('near_varying', 'code', 6) EXCEPT TABLE pairs_near)
                                  UNION ALL (SELECT id, representative, 0 FROM ((TABLE clusters_near EXCEPT SELECT * FROM simhash_clusters('near_varying', 'code', 6))
                                             UNION ALL (SELECT * FROM simhash_clusters('near_varying', 'code', 6) EXCEPT TABLE clusters_near)) c)) x)
$$;
SELECT * FROM pg_temp.varying_differences();
CREATE INDEX near_varying_code ON near_varying USING simhash (code);
SET enable_seqscan = off;
SELECT * FROM pg_temp.varying_differences();
RESET enable_seqscan;
SELECT * FROM simhash_pairs('near', 'code', 4097);
SELECT * FROM simhash_pairs('near', 'nope', 3);
-- The index of bit codes (tests/pg_regress/sql/bit_index.sql has its tests).
CREATE INDEX codes_simhash ON codes USING simhash (code);
SELECT simhash_index_check('codes_simhash');
-- A CHECK constraint of an inheritance child is simplified with the query's range table while its
-- columns still carry varno 1, which may be another table without such a column: the radius tests
-- of codes and of simhash64 there must leave it alone, not fail (once: XX000 "cache lookup failed
-- for type 0").
CREATE TABLE check_one (x int);
CREATE TABLE check_parent (id int, code bit(8), fp simhash64);
CREATE TABLE check_child (CHECK (simhash_hamming(code, B'00000000') <= 8),
                          CHECK (hamming(fp, 0::bigint::simhash64) <= 64)) INHERITS (check_parent);
INSERT INTO check_child VALUES (1, B'00000001', 1::bigint::simhash64);
SELECT x, id, code FROM check_one, check_parent WHERE check_parent.id = 1;
INSERT INTO check_one VALUES (7);
SELECT x, id, code FROM check_one, check_parent WHERE check_parent.id = 1;
DROP TABLE check_one, check_parent, check_child;
-- The keys by which the workers of a Citus table find the pairs of a column of codes
-- (simhash_code_pair_keys, simhash_code_key_pairs), here on one node: over all keys, the pairs of
-- a self-join, each once; k + 1 keys a code. 200 groups of 4 codes, each a base with its first
-- i % 20 bits, shifted, flipped.
CREATE TABLE kc AS SELECT i AS id, ('x' || md5((i / 4)::text) || md5((i / 4)::text || 'b'))::bit(256)
                                   # (repeat('1', i % 20)::bit(256) >> (i % 230)) AS code
FROM generate_series(1, 800) i;
SELECT k, (SELECT count(*) FROM kc a JOIN kc b ON a.id < b.id AND simhash_hamming(a.code, b.code) <= k) AS self_join,
       (SELECT count(*) FROM (SELECT (simhash_code_key_pairs(key, array_agg(id), array_agg(code), k)).*
                              FROM (SELECT unnest(simhash_code_pair_keys(code, k)) AS key, id, code FROM kc) w GROUP BY key) p) AS keyed,
       (SELECT count(*) FROM ((SELECT (simhash_code_key_pairs(key, array_agg(id), array_agg(code), k)).*
                               FROM (SELECT unnest(simhash_code_pair_keys(code, k)) AS key, id, code FROM kc) w GROUP BY key)
                              EXCEPT ALL
                              SELECT a.id, b.id, simhash_hamming(a.code, b.code) FROM kc a JOIN kc b
                              ON a.id < b.id AND simhash_hamming(a.code, b.code) <= k) x) AS not_in_self_join,
       (SELECT array_length(simhash_code_pair_keys(code, k), 1) FROM kc LIMIT 1) AS keys
FROM (VALUES (2), (6), (16)) v(k);
-- Verified pairs and clusters of codes (simhash_pairs / simhash_clusters(tbl, code, k, text,
-- min_similarity)): the pairs of the codes, with texts similar enough, equal to brute force; the
-- clusters those of the verified pairs. A third of the texts unrelated to their group's.
ALTER TABLE kc ADD COLUMN body text;
UPDATE kc SET body = CASE WHEN id % 3 = 0 THEN md5('other' || id) || md5('x' || id)
                          ELSE md5((id / 4)::text) || md5('y' || (id / 4)) || substr(md5(id::text), 1, 2) END;
SELECT (SELECT count(*) FROM simhash_pairs('kc', 'code', 10, 'body', 0.5)) AS verified,
       (SELECT count(*) FROM kc a JOIN kc b ON a.id < b.id AND simhash_hamming(a.code, b.code) <= 10) AS within_k,
       (SELECT count(*) FROM ((SELECT * FROM simhash_pairs('kc', 'code', 10, 'body', 0.5)
                               EXCEPT ALL
                               SELECT a.id, b.id, simhash_hamming(a.code, b.code), simhash_similarity(a.body, b.body)
                               FROM kc a JOIN kc b ON a.id < b.id AND simhash_hamming(a.code, b.code) <= 10
                               WHERE simhash_similarity(a.body, b.body) >= 0.5)
                              UNION ALL
                              (SELECT a.id, b.id, simhash_hamming(a.code, b.code), simhash_similarity(a.body, b.body)
                               FROM kc a JOIN kc b ON a.id < b.id AND simhash_hamming(a.code, b.code) <= 10
                               WHERE simhash_similarity(a.body, b.body) >= 0.5
                               EXCEPT ALL
                               SELECT * FROM simhash_pairs('kc', 'code', 10, 'body', 0.5))) d) AS differences,
       (SELECT count(*) FROM ((SELECT * FROM simhash_clusters('kc', 'code', 10, 'body', 0.5)
                               EXCEPT SELECT * FROM simhash_clusters_from_pairs(
                                   'SELECT id_a, id_b FROM simhash_pairs(''kc'', ''code'', 10, ''body'', 0.5)'))
                              UNION ALL
                              (SELECT * FROM simhash_clusters_from_pairs(
                                   'SELECT id_a, id_b FROM simhash_pairs(''kc'', ''code'', 10, ''body'', 0.5)')
                               EXCEPT SELECT * FROM simhash_clusters('kc', 'code', 10, 'body', 0.5))) d) AS cluster_differences;
SELECT * FROM simhash_pairs('kc', 'code', 10, 'body', 1.5);
SELECT * FROM simhash_pairs('kc', 'code', 10, 'body', 0.5, n => 0);
SELECT * FROM simhash_clusters('kc', 'code', 10, 'body', 1.5);
-- The arguments: k from 0 to 64 (22023), one id per code (22023), a NULL id (23502), codes of
-- one length (22026), a key no code has (22023).
SELECT simhash_code_pair_keys(B'1010', 65);
SELECT * FROM simhash_code_key_pairs(1, ARRAY[1, 2]::bigint[], ARRAY[B'10']::varbit[], 3);
SELECT * FROM simhash_code_key_pairs(0, ARRAY[1, NULL]::bigint[], ARRAY[B'10', B'11']::varbit[], 3);
SELECT * FROM simhash_code_key_pairs(0, ARRAY[1, 2]::bigint[], ARRAY[B'10', B'110']::varbit[], 3);
SELECT * FROM simhash_code_key_pairs(-1, ARRAY[1]::bigint[], ARRAY[B'10']::varbit[], 3);
DROP TABLE kc;
