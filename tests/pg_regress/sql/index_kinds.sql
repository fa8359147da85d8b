-- Which indexes the rewrite targets: it reads the table's real indexes and emits only what they
-- can use. plan_shape() keeps the plan nodes and drops the long probe arrays.
CREATE FUNCTION plan_shape(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF line !~ '(Cond|Filter):' THEN
            RETURN NEXT line;
        END IF;
    END LOOP;
END $$;

CREATE TABLE kinds (id int PRIMARY KEY, fp simhash64);
INSERT INTO kinds SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
FROM generate_series(1, 20000) i;
SELECT fp AS q FROM kinds WHERE id = 1 \gset
ANALYZE kinds;

-- No index: left as written.
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 3', :'q'));

-- Three of the four segment B-trees are not enough for a BitmapOr: left as written.
SELECT simhash_create_indexes('kinds', 'fp');
DROP INDEX kinds_fp_segment_3;
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 3', :'q'));
-- A partial index does not count either.
CREATE INDEX kinds_fp_segment_3 ON kinds (simhash_segment(fp, 3)) WHERE id > 0;
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 3', :'q'));
DROP INDEX kinds_fp_segment_3;
SELECT simhash_create_indexes('kinds', 'fp');
ANALYZE kinds;
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 7', :'q'));
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 11', :'q'));

-- The GUC switches the rewrite off.
SET simhash.enable_rewrite = off;
SELECT plan_shape(format('SELECT id FROM kinds WHERE fp <~> %L <= 3', :'q'));
RESET simhash.enable_rewrite;

-- A CTE's or subquery's output is not a table: left as written.
SELECT plan_shape(format('WITH c AS MATERIALIZED (SELECT * FROM kinds) SELECT id FROM c WHERE fp <~> %L <= 3', :'q'));

-- The GIN variant: one index on simhash_bands(fp), probed with &&, used when it is the index present.
SELECT simhash_bands('0123456789abcdef');
SELECT cardinality(simhash_band_probes('0123456789abcdef', 0)) AS k3,
       cardinality(simhash_band_probes('0123456789abcdef', 1)) AS k7,
       cardinality(simhash_band_probes('0123456789abcdef', 2)) AS k11;
SELECT simhash_segment_probes('0123456789abcdef', 3, 1);
\set VERBOSITY sqlstate
SELECT simhash_segment_probes('0123456789abcdef', 3, 4);
SELECT simhash_band_probes('0123456789abcdef', -1);
\set VERBOSITY default
CREATE TABLE kinds_gin AS SELECT * FROM kinds;
SELECT simhash_create_indexes('kinds_gin', 'fp', 'gin');
ANALYZE kinds_gin;
EXPLAIN (COSTS OFF) SELECT id FROM kinds_gin WHERE fp <~> :'q' <= 3;
SELECT plan_shape(format('SELECT id FROM kinds_gin WHERE fp <~> %L <= 9', :'q'));
SELECT id FROM kinds_gin WHERE fp <~> :'q' <= 9;
-- A join probes the GIN index of the inner side with the outer row's value.
SELECT plan_shape('SELECT a.id, b.id FROM kinds a JOIN kinds_gin b ON b.fp <~> a.fp <= 5 WHERE a.id < 3');

-- A partitioned table with partitioned segment indexes: each partition is probed.
CREATE TABLE kinds_parted (id int, fp simhash64) PARTITION BY RANGE (id);
CREATE TABLE kinds_parted_1 PARTITION OF kinds_parted FOR VALUES FROM (0) TO (10001);
CREATE TABLE kinds_parted_2 PARTITION OF kinds_parted FOR VALUES FROM (10001) TO (20001);
INSERT INTO kinds_parted SELECT * FROM kinds;
SELECT simhash_create_indexes('kinds_parted', 'fp');
ANALYZE kinds_parted;
SELECT plan_shape(format('SELECT id FROM kinds_parted WHERE fp <~> %L <= 3', :'q'));
SELECT id FROM kinds_parted WHERE fp <~> :'q' <= 3;

-- A domain over simhash64 is indexed and probed the same way.
CREATE DOMAIN fingerprint AS simhash64;
CREATE TABLE kinds_domain (id int PRIMARY KEY, fp fingerprint);
INSERT INTO kinds_domain SELECT id, fp FROM kinds;
SELECT count(*) FROM simhash_create_indexes('kinds_domain', 'fp');
ANALYZE kinds_domain;
SELECT plan_shape(format('SELECT id FROM kinds_domain WHERE fp <~> %L <= 3', :'q'));
SELECT id FROM kinds_domain WHERE fp <~> :'q' <= 3;

-- Long and multibyte names: four distinct index names within 63 bytes.
CREATE TABLE customer_document_fingerprints_archive_2024 (id int, content_fingerprint simhash64);
SELECT count(*) FROM simhash_create_indexes('customer_document_fingerprints_archive_2024', 'content_fingerprint');
SELECT indexrelid::regclass AS index FROM pg_index
WHERE indrelid = 'customer_document_fingerprints_archive_2024'::regclass ORDER BY 1;
CREATE TABLE "客户文档指纹归档表二零二四年第一季度数据" ("内容指纹" simhash64);
SELECT count(*) FROM simhash_create_indexes('"客户文档指纹归档表二零二四年第一季度数据"', '内容指纹');
SELECT octet_length(relname) <= 63 AS fits, relname FROM pg_index JOIN pg_class ON pg_class.oid = indexrelid
WHERE indrelid = '"客户文档指纹归档表二零二四年第一季度数据"'::regclass ORDER BY relname;

-- The index helper: statements for psql's \gexec (CONCURRENTLY), any identifier quoted.
CREATE TABLE "Odd ""Name""" ("Finger Print" simhash64, body text);
SELECT simhash_index_statements('"Odd ""Name"""', 'Finger Print');
SELECT simhash_index_statements('"Odd ""Name"""', 'Finger Print', 'gin', concurrently => true);
\set VERBOSITY sqlstate
SELECT simhash_index_statements('"Odd ""Name"""', 'body');
SELECT simhash_index_statements('"Odd ""Name"""', 'nope');
SELECT simhash_index_statements('"Odd ""Name"""', 'Finger Print', 'hash');
\set VERBOSITY default
SELECT simhash_index_statements('"Odd ""Name"""', 'Finger Print', 'hash');

DROP TABLE kinds, kinds_gin, kinds_parted, kinds_domain, "Odd ""Name""",
    customer_document_fingerprints_archive_2024, "客户文档指纹归档表二零二四年第一季度数据";
DROP DOMAIN fingerprint;
DROP FUNCTION plan_shape(text);
