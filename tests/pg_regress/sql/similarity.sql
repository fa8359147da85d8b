-- simhash_similarity and simhash_containment: the exact similarity that verifies candidates.
SELECT getdatabaseencoding() <> 'UTF8' AS skip_test \gset
\if :skip_test
\quit
\endif

-- Jaccard of the folded character n-gram sets: folding (script, width, case, punctuation) is not
-- an edit; one changed character changes n shingles.
SELECT simhash_similarity('海量网页去重是搜索引擎的基础工作。', '海量網頁去重是搜尋引擎的基礎工作！') AS folded,
       simhash_similarity('abcdefgh', 'abcdXfgh') AS one_edit_n3,
       simhash_similarity('abcdefgh', 'abcdXfgh', 2) AS one_edit_n2,
       simhash_similarity('abcdefgh', 'abcdXfgh', 1) AS one_edit_n1,
       simhash_similarity('abcabcabc', 'abcabc') AS repeats_count_once,
       simhash_similarity('The Quick Brown Fox', 'the quick brown fox!') AS case_and_punctuation,
       simhash_similarity('abcd', 'wxyz') AS disjoint;
-- Containment: the share of the smaller set inside the larger one.
SELECT simhash_containment('海量网页去重', '海量网页去重。版权所有，转载请注明出处') AS inside,
       simhash_similarity('海量网页去重', '海量网页去重。版权所有，转载请注明出处') AS jaccard,
       simhash_containment('abcdef', 'abcdef') AS equal;
-- Symmetric; shorter than n: one shingle, the whole text (as minhash64 reads it).
SELECT simhash_similarity('ab', 'ab') AS short_equal, simhash_similarity('ab', 'abc') AS short_vs_one,
       simhash_similarity('甲乙丙丁戊', '丙丁戊己庚') = simhash_similarity('丙丁戊己庚', '甲乙丙丁戊') AS symmetric;

-- NULL in, NULL out; a text with no letter or digit has no shingles (and no fingerprint).
SELECT simhash_similarity(NULL, 'abc') IS NULL AS a, simhash_similarity('abc', NULL) IS NULL AS b,
       simhash_similarity('abc', 'abc', NULL) IS NULL AS c, simhash_similarity('，。！', 'abc') IS NULL AS d,
       simhash_containment('', '') IS NULL AS e, minhash64('，。！') IS NULL AS f;

-- Bad shingle length: 22023.
\set VERBOSITY sqlstate
SELECT simhash_similarity('abc', 'abd', 0);
SELECT simhash_containment('abc', 'abd', 33);
\set VERBOSITY default

-- The distance of minhash64 estimates the similarity: 32 x (1 - J^r) on average.
-- 200 texts of 600 characters and copies with every 23rd character replaced (J about 0.77).
CREATE TABLE sim_pairs AS
SELECT g AS id,
       string_agg(chr(19968 + (g * 7919 + i * 104729) % 3000), '' ORDER BY i) AS a,
       string_agg(CASE WHEN (i + g) % 23 = 0 THEN '字' ELSE chr(19968 + (g * 7919 + i * 104729) % 3000) END, ''
                  ORDER BY i) AS b
FROM generate_series(1, 200) g, generate_series(1, 600) i GROUP BY g;
SELECT round(avg(minhash64(a) <~> minhash64(b))::numeric, 0) AS mean_distance,
       round(avg(32 * (1 - simhash_similarity(a, b)))::numeric, 0) AS expected_r1,
       round(avg(minhash64(a, 4, 2) <~> minhash64(b, 4, 2))::numeric, 0) AS mean_distance_4x2,
       round(avg(32 * (1 - simhash_similarity(a, b, 4) ^ 2))::numeric, 0) AS expected_4x2
FROM sim_pairs;

-- A verified lookup: the radius scan finds the rows within k; the similarity is evaluated on those
-- rows only (it is the costlier test, so it comes last in the filter).
CREATE TABLE vdocs (id integer PRIMARY KEY, body text NOT NULL, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED);
INSERT INTO vdocs (id, body) SELECT id, a FROM sim_pairs;
-- Near copies of the first 20 at several similarities: the edited copy and halves of it.
INSERT INTO vdocs (id, body) SELECT 1000 + id, b FROM sim_pairs WHERE id <= 20;
INSERT INTO vdocs (id, body) SELECT 2000 + id, left(a, 540) || right(b, 60) FROM sim_pairs WHERE id <= 20;
INSERT INTO vdocs (id, body) SELECT 3000 + id, left(b, 300) || right(a, 300) FROM sim_pairs WHERE id <= 20;
SELECT count(*) FROM simhash_create_indexes('vdocs', 'fp');
ANALYZE vdocs;
PREPARE verified(text, float8) AS
SELECT id, fp <~> minhash64($1) AS distance, round(simhash_similarity(body, $1)::numeric, 3) AS similarity
FROM vdocs WHERE fp <~> minhash64($1) <= 11 AND simhash_similarity(body, $1) >= $2 ORDER BY id;
SELECT a AS q FROM sim_pairs WHERE id = 7 \gset
EXECUTE verified(:'q', 0.8);
-- The threshold is applied exactly: at the similarity itself the row is in, just above it is out.
SELECT simhash_similarity(body, :'q') AS s FROM vdocs WHERE id = 3007 \gset
SELECT id FROM vdocs
WHERE fp <~> minhash64(:'q') <= 11 AND simhash_similarity(body, :'q') >= :s ORDER BY id;
SELECT id FROM vdocs
WHERE fp <~> minhash64(:'q') <= 11 AND simhash_similarity(body, :'q') > :s ORDER BY id;
-- Generic plan: the same route and answer. EXPLAIN ANALYZE shows the candidates (rows within
-- the radius) and how many of them the similarity removed.
SET plan_cache_mode = force_generic_plan;
PREPARE verified_ids(text, float8) AS
SELECT id FROM vdocs WHERE fp <~> minhash64($1) <= 11 AND simhash_similarity(body, $1) >= $2;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) EXECUTE verified_ids(:'q', 0.95);
EXECUTE verified(:'q', 0.8);
RESET plan_cache_mode;
-- Verified lookups at every radius and three thresholds return exactly what a sequential scan
-- of both tests returns.
SET simhash.enable_rewrite = off;
CREATE TEMP TABLE expected AS
SELECT k, t, p.id AS q, d.id FROM generate_series(0, 11) k, unnest('{0.5, 0.8, 0.9}'::float8[]) t, sim_pairs p, vdocs d
WHERE p.id <= 20 AND d.fp <~> minhash64(p.a) <= k AND simhash_similarity(d.body, p.a) >= t;
RESET simhash.enable_rewrite;
CREATE TEMP TABLE got (k int, t float8, q int, id int);
DO $$
DECLARE
    k int;
    t float8;
    p record;
BEGIN
    FOR k IN 0..11 LOOP
        FOREACH t IN ARRAY '{0.5, 0.8, 0.9}'::float8[] LOOP
            FOR p IN SELECT id, a FROM sim_pairs WHERE id <= 20 LOOP
                EXECUTE format('INSERT INTO got SELECT %s, %s, %s, id FROM vdocs
                                WHERE fp <~> minhash64($1) <= %s AND simhash_similarity(body, $1) >= %s', k, t, p.id, k, t)
                USING p.a;
            END LOOP;
        END LOOP;
    END LOOP;
END $$;
SELECT (SELECT count(*) FROM expected) AS expected, (SELECT count(*) FROM got) AS got,
       (SELECT count(*) FROM (SELECT * FROM expected EXCEPT SELECT * FROM got) x) AS missing,
       (SELECT count(*) FROM (SELECT * FROM got EXCEPT SELECT * FROM expected) x) AS extra;
-- The plan of those lookups (a custom plan of EXECUTE ... USING): the radius scan.
EXPLAIN (COSTS OFF) SELECT id FROM vdocs WHERE fp <~> minhash64('甲乙丙丁') <= 9 AND simhash_similarity(body, '甲乙丙丁') >= 0.8;

DROP TABLE sim_pairs, vdocs;
