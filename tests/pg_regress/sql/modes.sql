-- The fingerprint modes besides simhash(text): simhash(text, top_n), simhash_ngrams, minhash64,
-- and simhash_fold. Golden values: the stored format (version 0), like golden.sql.
SELECT getdatabaseencoding() <> 'UTF8' AS skip_test \gset
\if :skip_test
\quit
\endif

CREATE TABLE texts (id int PRIMARY KEY, body text);
INSERT INTO texts VALUES
 (1, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。'),
 (2, '海量網頁去重是搜尋引擎的基礎工作，相似的文章應該只保留一份，以節省儲存和頻寬。'),
 (3, 'The quick brown fox jumps over the lazy dog near the river bank.'),
 (4, 'THE QUICK BROWN FOX — jumps over the lazy dog, near the river bank!'),
 (5, '這個程式讀取檔案，軟體開發'),
 (6, '好'),
 (7, '，。！'),
 (8, '这个程式读取档案，软体开发');

-- Folding: width, case, whitespace, Traditional/Taiwan vocabulary to Simplified.
SELECT id, simhash_fold(body) FROM texts ORDER BY id;
SELECT simhash_fold('  ＰｏｓｔｇｒｅＳＱＬ   １５ ');
-- Mainland words stay whole and Simplified characters stay; folding twice changes nothing.
SELECT simhash_fold('哈萨克斯坦和尼日利亚，这是一位著名作家的著作，什么') AS folded,
       simhash_fold(simhash_fold('這個程式讀取檔案')) = simhash_fold('這個程式讀取檔案') AS idempotent;

-- Golden fingerprints of every mode.
SELECT id, simhash(body, 5) AS top5, simhash_ngrams(body) AS ngrams3, simhash_ngrams(body, 2) AS ngrams2,
       minhash64(body) AS minhash3, minhash64(body, 5) AS minhash5
FROM texts ORDER BY id;
SELECT id, minhash64(body, 4, 2) AS minhash4x2, minhash64(body, 3, 4) AS minhash3x4,
       minhash64(body, 3, 1) = minhash64(body) AS one_per_bit_is_the_default
FROM texts ORDER BY id;

-- Folding makes Simplified/Traditional and case/punctuation variants close for the shingle modes.
SELECT minhash64(a.body) <~> minhash64(b.body) AS minhash,
       minhash64(a.body, 4, 2) <~> minhash64(b.body, 4, 2) AS minhash4x2, simhash_ngrams(a.body) <~> simhash_ngrams(b.body) AS ngrams,
       simhash(a.body) <~> simhash(b.body) AS simhash
FROM texts a JOIN texts b ON (a.id, b.id) IN ((1, 2), (3, 4)) ORDER BY a.id;

-- Bad parameters.
SELECT simhash('text', 0);
SELECT minhash64('text', 0);
SELECT minhash64('text', 3, 0);
SELECT minhash64('text', 3, 5);
SELECT simhash_ngrams('text', 33);

-- The planner rewrite also takes these functions of a parameter.
CREATE TABLE docs (id int PRIMARY KEY, fp simhash64);
SELECT simhash_create_indexes('docs', 'fp') \g /dev/null
INSERT INTO docs SELECT id, minhash64(body) FROM texts WHERE minhash64(body) IS NOT NULL;
INSERT INTO docs SELECT 100 + i, minhash64(md5(i::text)) FROM generate_series(1, 2000) i;
ANALYZE docs;
SET enable_seqscan = off;
PREPARE near(text) AS SELECT id FROM docs WHERE fp <~> minhash64($1) <= 3 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE near('The quick brown fox jumps over the lazy dog near the river bank.');
EXECUTE near('The quick brown fox jumps over the lazy dog near the river bank.');
-- ... the recommended mode included.
PREPARE near_4x2(text) AS SELECT id FROM docs WHERE fp <~> minhash64($1, 4, 2) <= 11;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE near_4x2('The quick brown fox jumps over the lazy dog near the river bank.');
RESET plan_cache_mode;
RESET enable_seqscan;
DROP TABLE docs, texts;

-- Custom weighted features: an array form and an aggregate, which agree.
SELECT simhash(ARRAY['北京', '烤鸭', 'beijing'], ARRAY[2.0, 1.5, 0.5]);
SELECT simhash_agg(f, w) FROM (VALUES ('北京', 2.0), ('烤鸭', 1.5), ('beijing', 0.5), (NULL, 9.0)) v(f, w);
SELECT simhash_agg(f, w) FROM (VALUES ('烤鸭', 1.5), ('beijing', 0.5), ('北京', 2.0)) v(f, w);
SELECT simhash(ARRAY['a'], ARRAY[1.0]) AS one_feature_gives_its_fnv1a64_hash;
SELECT simhash(ARRAY[]::text[], ARRAY[]::float8[]) IS NULL AS empty;
SELECT g, simhash_agg(f, w) FROM (VALUES (1, 'a', 1.0), (1, 'b', 1.0), (2, 'c', 1.0)) v(g, f, w) GROUP BY g ORDER BY g;
SELECT simhash_agg(f, w) IS NULL AS no_rows FROM (VALUES ('a', 1.0)) v(f, w) WHERE false;
SELECT simhash(ARRAY['a', 'b'], ARRAY[1.0]);
SELECT simhash(ARRAY['a', NULL], ARRAY[1.0, 2.0]);
SELECT simhash(ARRAY['a'], ARRAY['NaN'::float8]);
SELECT simhash(ARRAY['a'], ARRAY[1e300]);

-- What went into simhash(text): its features, weights and hashes; voting them gives simhash(text).
SELECT * FROM simhash_features('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份。');
SELECT simhash(array_agg(feature), array_agg(weight)) = simhash('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份。') AS same
FROM simhash_features('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份。');
SELECT count(*) FROM simhash_features('，。！');
