-- The quick-start demo run by scripts/setup.sh (psql -f scripts/demo.sql from the repository root).
\set ON_ERROR_STOP on
\pset footer off

\echo '== 1. A table whose fingerprint column fills itself from the text'
CREATE TABLE docs (
    id   bigserial PRIMARY KEY,
    body text NOT NULL,
    fp   simhash64 GENERATED ALWAYS AS (simhash(body)) STORED
);
\copy docs (body) FROM 'data/sample_zh.txt'

\echo '== 2. The four segment indexes that turn radius lookups (k up to 11) into index scans'
CREATE INDEX docs_fp_segment_0 ON docs (simhash_segment(fp, 0));
CREATE INDEX docs_fp_segment_1 ON docs (simhash_segment(fp, 1));
CREATE INDEX docs_fp_segment_2 ON docs (simhash_segment(fp, 2));
CREATE INDEX docs_fp_segment_3 ON docs (simhash_segment(fp, 3));
ANALYZE docs;

\echo '== 3. Every pair of near-duplicates (at most 3 differing bits)'
SELECT a.id AS a, b.id AS b, a.fp <~> b.fp AS distance, left(a.body, 24) AS a_starts, left(b.body, 24) AS b_starts
FROM docs a JOIN docs b ON a.fp <~> b.fp <= 3 AND a.id < b.id
ORDER BY a.id, b.id;

\echo '== 4. Is an incoming text a near-duplicate of a stored one?'
SELECT id, fp <~> simhash('博物馆推出夜间开放活动，观众可以在讲解员的带领下参观青铜器特展，了解古代铸造工艺和礼仪制度，活动期间每周五和周六晚上开放到九点。') AS distance,
       left(body, 30) AS stored
FROM docs
WHERE fp <~> simhash('博物馆推出夜间开放活动，观众可以在讲解员的带领下参观青铜器特展，了解古代铸造工艺和礼仪制度，活动期间每周五和周六晚上开放到九点。') <= 3;

\echo '== 5. The plan: the planner turned "fp <~> q <= 3" into a BitmapOr over the four indexes.'
\echo '   (On 20 rows a sequential scan is cheaper, so the demo switches it off to show the plan a large table gets.)'
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT id FROM docs WHERE fp <~> simhash('博物馆推出夜间开放活动，观众可以参观青铜器特展。') <= 3;
RESET enable_seqscan;
