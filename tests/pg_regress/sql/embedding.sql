-- Random-hyperplane SimHash of embeddings: simhash(real[], seed), simhash_bits(real[], bits, seed),
-- simhash_cosine_radius. Golden codes are the stored format: the same values on 15 and 18, and the
-- same as crates/core/src/hyperplanes.rs (golden_codes) and an independent implementation of the
-- definition (bench/embed_reference.py). (pgvector's types: embedding_pgvector.)

-- Golden codes (the core's golden_codes; the first and third differ in every bit).
SELECT simhash('{1,2,3}'::real[]) AS seed_0,
       simhash('{1,2,3}'::real[], 42) AS seed_42,
       simhash('{-1,-2,-3}'::real[]) AS opposite,
       simhash('{1,2,3}'::real[], -1) AS seed_minus_1;
CREATE TEMP TABLE ramp AS
SELECT array_agg(((j % 17) - 8) / 8.0 ORDER BY j)::real[] AS v FROM generate_series(0, 383) j;
SELECT simhash(v) AS b64, simhash_bits(v, 12) AS b12, simhash_bits('{0.5}', 8) AS one_dimension FROM ramp;
-- Longer codes of a 1,536-dimension vector (bits from hashint8, the same on every platform).
CREATE TEMP TABLE big AS
SELECT array_agg(hashint8(j)::float8 / 2147483648 ORDER BY j)::real[] AS v FROM generate_series(1, 1536) j;
SELECT bits, md5(simhash_bits(v, bits)::text), length(simhash_bits(v, bits)) FROM big, (VALUES (64), (256), (1024), (4096)) b(bits);
-- The first 64 bits of any code are simhash(v); a shorter code is a prefix of a longer one.
SELECT simhash_bits(v, 64)::simhash64 = simhash(v) AS bits_64,
       substring(simhash_bits(v, 4096) FROM 1 FOR 1000) = simhash_bits(v, 1000) AS prefix,
       simhash_bits(v, 64, 9)::simhash64 = simhash(v, 9) AS seeded
FROM big;
-- Zeros appended, a factor of 2: the same code; the zero vector has none.
SELECT simhash(v || '{0,0,-0}'::real[]) = simhash(v) AS padded,
       simhash((SELECT array_agg(x * 2::real) FROM unnest(v) x)) = simhash(v) AS doubled
FROM big;
SELECT simhash('{0,-0,0}'::real[]) IS NULL AS zero, simhash_bits('{0}', 100) IS NULL AS zero_bits;

-- Overloads: a text literal, a text column and simhash(text, integer) still mean the text functions.
SELECT simhash('near-duplicate detection keeps one copy of each article') AS literal, simhash('near-duplicate detection keeps one copy of each article', 5) AS top_5;
CREATE TEMP TABLE texts (body text);
INSERT INTO texts VALUES ('near-duplicate detection keeps one copy of each article');
SELECT simhash(body) = simhash('near-duplicate detection keeps one copy of each article'::text) AS text_column,
       simhash(NULL) IS NULL AS untyped_null, pg_typeof(simhash_bits('{1}', 3)) AS bits_type
FROM texts;
-- A float8[] or numeric[] array needs the cast (no implicit cast to real[]); an integer literal
-- seed is a bigint.
SELECT simhash(ARRAY[1, 2, 3]::real[], 42) = simhash('{1,2,3}'::real[], 42::bigint) AS seed_literal;
-- An array literal without a cast is a text too (here one without words: NULL): write '{...}'::real[].
SELECT simhash('{1,2,3}') IS NOT DISTINCT FROM simhash('{1,2,3}'::text) AS literal_is_text;

-- The cosine -> radius map: the binomial quantile.
SELECT c, simhash_cosine_radius(c) AS b64, simhash_cosine_radius(c, 256) AS b256,
       simhash_cosine_radius(c, 1024, 0.99) AS b1024_r99
FROM (VALUES (1.0), (0.99), (0.95), (0.9), (0.8), (0.0), (-1.0)) t(c);
-- Recalls near 1 (2273, 1616, 3684: computed with 60 digits; summed from below, the radius came
-- out as 4096, 4096 and 3654) and near 0 (363).
SELECT simhash_cosine_radius(0.0, 4096, 0.999999999999) AS c0, simhash_cosine_radius(0.5, 4096, 0.9999999999999999) AS c05,
       simhash_cosine_radius(-0.9, 4096, 0.9999999999999999) AS c_09, simhash_cosine_radius(0.5, 4096, 1e-300) AS low;

-- Errors, by SQLSTATE.
\set VERBOSITY sqlstate
SELECT simhash('{1,NULL,3}'::real[]);
SELECT simhash_bits('{NULL}'::real[], 8);
SELECT simhash('{1,NaN}'::real[]);
SELECT simhash('{Infinity,1}'::real[]);
SELECT simhash_bits('{-Infinity}'::real[], 64);
SELECT simhash('{{1,2},{3,4}}'::real[]);
SELECT simhash('{}'::real[]);
SELECT simhash_bits('{}'::real[], 64);
SELECT simhash_bits('{1}', 0);
SELECT simhash_bits('{1}', 4097);
SELECT simhash_bits('{1}', -5);
SELECT simhash(array_fill(1::real, ARRAY[65537]));
SELECT simhash_cosine_radius(1.01);
SELECT simhash_cosine_radius('NaN');
SELECT simhash_cosine_radius(0.9, 0);
SELECT simhash_cosine_radius(0.9, 64, 1);
SELECT simhash_cosine_radius(0.9, 64, 0);
\set VERBOSITY default
-- The largest accepted dimension works (its matrix is cached: 64 x 65,536 entries = 16 MiB).
SELECT simhash(array_fill(1::real, ARRAY[65536])) IS NOT NULL AS max_dimensions;
-- Beyond the cache's 64 MiB (4,096 planes of 4,100 dimensions) the planes are generated block by
-- block for each vector: the same bits.
SELECT simhash_bits(v, 4096) = (SELECT simhash_bits(v, 4096) FROM big) AS uncached_equals_cached
FROM (SELECT v || array_fill(0::real, ARRAY[4100 - 1536]) AS v FROM big) padded;

-- Semantic near-duplicates through a simhash index: 40 clusters of 25 vectors (d = 64), each
-- member its centre plus noise; entries from hashint8, so the same rows everywhere.
CREATE TABLE emb (id int PRIMARY KEY, cluster int, v real[], fp simhash64);
INSERT INTO emb (id, cluster, v)
SELECT c * 100 + m, c,
       (SELECT array_agg(hashint8(c * 1000 + j)::float8 / 2147483648
                         + CASE WHEN m = 0 THEN 0 ELSE 0.15 * hashint8(c * 100000 + m * 1000 + j)::float8 / 2147483648 END
                         ORDER BY j)::real[]
        FROM generate_series(1, 64) j)
FROM generate_series(1, 40) c, generate_series(0, 24) m;
UPDATE emb SET fp = simhash(v);
CREATE INDEX emb_fp ON emb USING simhash (fp);
ANALYZE emb;
CREATE FUNCTION pg_temp.cosine(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT sum(x::float8 * y) / sqrt(sum(x::float8 * x) * sum(y::float8 * y)) FROM unnest(a, b) u(x, y) $$;
-- The radius for cosine 0.95 at 64 bits, recall 0.99:
SELECT simhash_cosine_radius(0.95, 64, 0.99) AS k \gset
SELECT :k AS k;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM emb WHERE fp <~> '0123456789abcdef' <= 11;
-- A generic plan fingerprints the query vector once, into the index's ball.
PREPARE near_vector(real[]) AS SELECT count(*) FROM emb WHERE fp <~> simhash($1) <= 13;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE near_vector('{1,2,3}');
SELECT v AS v500 FROM emb WHERE id = 500 \gset
EXECUTE near_vector(:'v500');
RESET plan_cache_mode;
SELECT count(*) AS by_a_scan FROM emb WHERE (fp <~> simhash(:'v500'::real[]))::integer <= 13;
CREATE TEMP TABLE found AS
SELECT q.id AS q, e.id FROM emb q CROSS JOIN LATERAL (SELECT id FROM emb WHERE fp <~> q.fp <= :k) e WHERE q.id % 100 = 0;
RESET enable_seqscan;
-- Every pair of cosine >= 0.95 is found within k. 64 bits are a noisy estimate of the angle:
-- two pairs of cosine 0.28 and 0.30 (centre 5 and two members of cluster 12) fall within 13 bits
-- too (at 1,024 bits they are 388 and 404 apart, as expected); verify with the exact cosine.
SELECT count(*) FILTER (WHERE c >= 0.95) AS near_pairs,
       count(*) FILTER (WHERE c >= 0.95 AND f.id IS NOT NULL) AS near_found,
       count(*) FILTER (WHERE c < 0.95 AND f.id IS NOT NULL) AS found_below_0_95,
       count(*) FILTER (WHERE f.id IS NOT NULL AND q.cluster <> e.cluster) AS found_other_cluster
FROM emb q JOIN emb e ON true
LEFT JOIN found f ON f.q = q.id AND f.id = e.id
CROSS JOIN LATERAL (SELECT pg_temp.cosine(q.v, e.v)) s(c)
WHERE q.id % 100 = 0;
-- The index returns exactly what a sequential scan returns.
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS seqscan_pairs,
       count(*) FILTER (WHERE (q.id, e.id) IN (SELECT * FROM found)) AS also_through_the_index,
       (SELECT count(*) FROM found) AS through_the_index
FROM emb q JOIN emb e ON e.fp <~> q.fp <= :k WHERE q.id % 100 = 0;
RESET enable_indexscan;
RESET enable_bitmapscan;
DROP TABLE emb;
