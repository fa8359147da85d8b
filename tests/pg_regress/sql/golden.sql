-- Golden fingerprints: the stored format (version 0). A change here is a format break and must
-- come with a CHANGELOG entry and new golden values in the same commit.
-- Needs a UTF8 database (the Chinese texts); elsewhere the whole test is skipped (golden_1.out).
SELECT getdatabaseencoding() <> 'UTF8' AS skip_test \gset
\if :skip_test
\quit
\endif

CREATE TABLE golden (id int PRIMARY KEY, body text);
INSERT INTO golden VALUES
 (1, '数据库扩展让应用在数据所在的地方直接查找近似重复的文本，无需把数据导出到别的系统。'),
 (2, '海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。'),
 (3, '海量网页去重是搜索引擎的基础工作，相似的文章只应该保留一份，以节省存储与带宽。'),
 (4, '資料庫擴充套件讓應用程式在資料所在之處直接找到近似重複的文字。'),
 (5, 'The quick brown fox jumps over the lazy dog near the river bank.'),
 (6, 'PostgreSQL extensions let applications find near-duplicate documents where the data already lives.'),
 (7, 'simhash 扩展支持中文 and English 混合文本, version 0.1'),
 (8, '北京烤鸭'),
 (9, '好');

SELECT id, simhash(body) FROM golden ORDER BY id;
SELECT a.id AS a, b.id AS b, simhash(a.body) <~> simhash(b.body) AS distance
FROM golden a JOIN golden b ON a.id < b.id
WHERE a.id IN (1, 2) AND b.id IN (3, 4)
ORDER BY a.id, b.id;

DROP TABLE golden;
