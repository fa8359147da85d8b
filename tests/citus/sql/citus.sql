-- The extension on a Citus cluster (a coordinator and two workers, tests/citus/run.sh): every answer
-- on a distributed table equals the answer of the same query on a plain copy of the table on one
-- node, and the shards' indexes serve the lookups.
SELECT extname FROM pg_extension WHERE extname IN ('citus', 'simhash') ORDER BY 1;
SELECT count(*) AS workers FROM citus_get_active_worker_nodes();

-- 20,000 uniform fingerprints, near-duplicates of rows 1..40 at distances 1..11, a NULL; the same
-- rows in docs_local, a plain table on the coordinator.
-- Four shards, so that each is large enough for its indexes to pay (a session's SET reaches the
-- coordinator's planner, not the shards').
SET citus.shard_count = 4;
CREATE TABLE docs (id bigint PRIMARY KEY, fp simhash64, body text);
SELECT create_distributed_table('docs', 'id');
INSERT INTO docs SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64, 'text ' || (i % 97)
FROM generate_series(1, 20000) i;
CREATE TABLE docs_local (id bigint PRIMARY KEY, fp simhash64, body text);
INSERT INTO docs_local SELECT * FROM docs;
INSERT INTO docs_local
SELECT 100000 + s.id * 100 + d,
       (s.fp::bigint # (SELECT bit_or(1::bigint << ((s.id * 7 + t * 13) % 64)::int) FROM generate_series(0, d - 1) t))::simhash64,
       s.body
FROM docs_local s, generate_series(1, 11) d WHERE s.id <= 40;
INSERT INTO docs_local VALUES (999999, NULL, 'no fingerprint');
INSERT INTO docs SELECT * FROM docs_local WHERE id > 20000;
SELECT (SELECT count(*) FROM docs) AS distributed, (SELECT count(*) FROM docs_local) AS local;

-- The covering segment B-trees, on every shard (Citus creates them there) and on the copy.
SELECT count(*) FROM simhash_create_indexes('docs', 'fp');
SELECT count(*) FROM simhash_create_indexes('docs_local', 'fp');
-- simhash_indexed on the coordinator answers for the shards' indexes, which Citus made from the
-- definitions on the distributed table.
SELECT simhash_indexed('docs', 'fp') AS fp_indexed, simhash_indexed('docs', 'body') AS body_indexed;
ANALYZE docs;
ANALYZE docs_local;

-- Each lookup of 60 query points at k = 0..11 finds the same rows on the cluster as on one node.
CREATE FUNCTION lookup_differences(k int, OUT rows_found bigint, OUT differences bigint) LANGUAGE plpgsql AS $$
DECLARE
    q record;
    on_cluster bigint[];
    on_one_node bigint[];
BEGIN
    rows_found := 0;
    differences := 0;
    FOR q IN SELECT id, fp FROM docs_local WHERE id <= 30 OR id BETWEEN 100100 AND 100300 ORDER BY id LIMIT 60 LOOP
        SELECT array_agg(id ORDER BY id) INTO on_cluster FROM docs WHERE fp <~> q.fp <= k;
        SELECT array_agg(id ORDER BY id) INTO on_one_node FROM docs_local WHERE fp <~> q.fp <= k;
        rows_found := rows_found + coalesce(cardinality(on_cluster), 0);
        IF on_cluster IS DISTINCT FROM on_one_node THEN
            differences := differences + 1;
        END IF;
    END LOOP;
END $$;
SELECT k, l.* FROM generate_series(0, 11) k, lookup_differences(k) l;

-- The coordinator leaves the radius test as written (the task's query), and each shard's planner
-- rewrites it for its own indexes: the SimHash Radius Scan over the shard's covering B-trees.
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM docs WHERE fp <~> '0123456789abcdef' <= 3;
-- A lookup of one row's near-duplicates, as a subquery or a join with it.
SELECT id FROM docs WHERE fp <~> (SELECT fp FROM docs WHERE id = 7) <= 11 ORDER BY id;
SELECT d.id FROM docs d, (SELECT fp FROM docs WHERE id = 7) q WHERE d.fp <~> q.fp <= 11 ORDER BY d.id;
-- Prepared, as an application runs it (custom plans: Citus plans each execution).
SELECT fp AS fp8 FROM docs WHERE id = 8 \gset
PREPARE near(simhash64, int) AS SELECT id FROM docs WHERE fp <~> $1 <= $2 ORDER BY id;
EXECUTE near(:'fp8', 7);
EXECUTE near(:'fp8', 7);
EXECUTE near(:'fp8', 7);
EXECUTE near(:'fp8', 7);
EXECUTE near(:'fp8', 7);
EXECUTE near(:'fp8', 7);
DEALLOCATE near;

-- With a simhash index: the shards' index serves radius tests and ORDER BY fp <-> q LIMIT n.
CREATE INDEX docs_fp_simhash ON docs USING simhash (fp);
CREATE INDEX docs_local_fp_simhash ON docs_local USING simhash (fp);
SELECT k, l.* FROM generate_series(0, 11, 3) k, lookup_differences(k) l;
EXPLAIN (COSTS OFF) SELECT id FROM docs WHERE fp <~> '0123456789abcdef' <= 11;
EXPLAIN (COSTS OFF) SELECT id FROM docs ORDER BY fp <-> '0123456789abcdef' LIMIT 3;
SELECT count(*) AS differences FROM (
    (SELECT id, fp <-> '0123456789abcdef' FROM docs ORDER BY fp <-> '0123456789abcdef', id LIMIT 10)
    EXCEPT ALL
    (SELECT id, fp <-> '0123456789abcdef' FROM docs_local ORDER BY fp <-> '0123456789abcdef', id LIMIT 10)) d;

-- All pairs and clusters: the same on the cluster (found on the workers: each row is sent to a
-- work table distributed by key under each of its keys, and each shard pairs its keys; never
-- through the coordinator's empty indexes) as on one node (where they are read from the simhash
-- index), at every radius the workers serve.
SELECT k,
       (SELECT count(*) FROM simhash_pairs('docs', 'fp', k)) AS pairs,
       (SELECT count(*) FROM ((SELECT * FROM simhash_pairs('docs', 'fp', k) EXCEPT ALL SELECT * FROM simhash_pairs('docs_local', 'fp', k))
                              UNION ALL
                              (SELECT * FROM simhash_pairs('docs_local', 'fp', k) EXCEPT ALL SELECT * FROM simhash_pairs('docs', 'fp', k))) d) AS differences,
       (SELECT count(*) FROM ((SELECT * FROM simhash_clusters('docs', 'fp', k) EXCEPT ALL SELECT * FROM simhash_clusters('docs_local', 'fp', k))
                              UNION ALL
                              (SELECT * FROM simhash_clusters('docs_local', 'fp', k) EXCEPT ALL SELECT * FROM simhash_clusters('docs', 'fp', k))) d) AS cluster_differences
FROM generate_series(0, 11) k;
-- Verified pairs and clusters too (texts compared on the workers: the table is distributed by id).
SELECT count(*) AS differences FROM (
    (SELECT * FROM simhash_pairs('docs', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('docs_local', 'fp', 9, 'body', 0.5))
    UNION ALL
    (SELECT * FROM simhash_pairs('docs_local', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('docs', 'fp', 9, 'body', 0.5))) d;
SELECT count(*) AS differences FROM (
    (SELECT * FROM simhash_clusters('docs', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_clusters('docs_local', 'fp', 9, 'body', 0.5))
    UNION ALL
    (SELECT * FROM simhash_clusters('docs_local', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_clusters('docs', 'fp', 9, 'body', 0.5))) d;
-- The work tables are gone, here and on the workers.
SELECT count(*) AS work_tables FROM pg_class WHERE relname LIKE 'simhash\_pairs\_%' OR relname LIKE 'simhash\_verify\_%';
SELECT result AS worker_work_tables FROM run_command_on_workers($$SELECT count(*) FROM pg_class WHERE relname LIKE 'simhash\_pairs\_%' OR relname LIKE 'simhash\_verify\_%'$$);
-- Where the workers cannot (a radius above 11, a read-only transaction, a user who may not create
-- the work table in the table's schema), the coordinator finds the same pairs in memory, and says so.
SELECT count(*) AS pairs FROM simhash_pairs('docs', 'fp', 12);
BEGIN READ ONLY;
SELECT count(*) AS pairs FROM simhash_pairs('docs', 'fp', 3);
SELECT count(*) AS pairs FROM simhash_pairs('docs', 'fp', 3, 'body', 0.5);
COMMIT;
CREATE ROLE simhash_citus_reader LOGIN;
GRANT SELECT ON docs TO simhash_citus_reader;
SET ROLE simhash_citus_reader;
SELECT count(*) AS pairs FROM simhash_clusters('docs', 'fp', 3);
RESET ROLE;
DROP OWNED BY simhash_citus_reader;
DROP ROLE simhash_citus_reader;
-- On a worker (which has Citus' metadata too), the pairs are found on that node, as they are
-- where the work table cannot be made.
SELECT success, result AS pairs FROM run_command_on_workers($$SELECT count(*) FROM public.simhash_pairs('public.docs', 'fp', 3)$$);
SELECT success, result AS pairs FROM run_command_on_workers($$SELECT count(*) FROM public.simhash_pairs('public.docs', 'fp', 3, 'body', 0.5)$$);

-- Names that need quoting, in a schema named with quotes; copies of one fingerprint (one group,
-- linked in linear time for clusters); a NULL id is the query form's error.
CREATE SCHEMA "o'brien ""x""";
CREATE TABLE "o'brien ""x"""."Docs" ("Id" int PRIMARY KEY, "Fp" simhash64, "Body" text);
SELECT create_distributed_table('"o''brien ""x"""."Docs"', 'Id');
INSERT INTO "o'brien ""x"""."Docs" SELECT id, fp, body FROM docs_local WHERE id <= 2000 OR id > 100000;
CREATE TABLE quoted_local AS SELECT * FROM "o'brien ""x"""."Docs";
SELECT count(*) AS differences FROM (
    (SELECT * FROM simhash_pairs('"o''brien ""x"""."Docs"', 'Fp', 7, 'Id') EXCEPT ALL SELECT * FROM simhash_pairs('quoted_local', 'Fp', 7, 'Id'))
    UNION ALL
    (SELECT * FROM simhash_pairs('quoted_local', 'Fp', 7, 'Id') EXCEPT ALL SELECT * FROM simhash_pairs('"o''brien ""x"""."Docs"', 'Fp', 7, 'Id'))) d;
SELECT count(*) AS differences FROM (
    (SELECT * FROM simhash_clusters('"o''brien ""x"""."Docs"', 'Fp', 7, 'Id') EXCEPT ALL SELECT * FROM simhash_clusters('quoted_local', 'Fp', 7, 'Id'))
    UNION ALL
    (SELECT * FROM simhash_clusters('quoted_local', 'Fp', 7, 'Id') EXCEPT ALL SELECT * FROM simhash_clusters('"o''brien ""x"""."Docs"', 'Fp', 7, 'Id'))) d;
SELECT count(*) AS differences FROM (
    (SELECT * FROM simhash_pairs('"o''brien ""x"""."Docs"', 'Fp', 9, 'Body', 0.5, 'Id') EXCEPT ALL SELECT * FROM simhash_pairs('quoted_local', 'Fp', 9, 'Body', 0.5, 'Id'))
    UNION ALL
    (SELECT * FROM simhash_pairs('quoted_local', 'Fp', 9, 'Body', 0.5, 'Id') EXCEPT ALL SELECT * FROM simhash_pairs('"o''brien ""x"""."Docs"', 'Fp', 9, 'Body', 0.5, 'Id'))) d;
DELETE FROM "o'brien ""x"""."Docs";
INSERT INTO "o'brien ""x"""."Docs" SELECT i, '00000000000000ff', 'copy' FROM generate_series(1, 20000) i;
SELECT count(*) AS rows, count(DISTINCT representative) AS groups FROM simhash_clusters('"o''brien ""x"""."Docs"', 'Fp', 0, 'Id');
CREATE TABLE null_ids (id bigint, fp simhash64);
SELECT create_distributed_table('null_ids', 'fp');
INSERT INTO null_ids VALUES (1, '0000000000000000'), (NULL, '0000000000000001');
SELECT * FROM simhash_pairs('null_ids', 'fp', 3);
DROP TABLE null_ids, quoted_local;
DROP SCHEMA "o'brien ""x""" CASCADE;

-- The near-duplicate constraint is refused on a distributed table (0A000), with the recipe.
\set VERBOSITY default
SELECT simhash_add_dedup('docs', 'fp', 3);
-- The recipe: load, then keep one row per group of near-duplicates.
DELETE FROM docs d USING simhash_clusters('docs', 'fp', 3) c WHERE d.id = c.id AND c.id <> c.representative;
SELECT count(*) AS pairs_left FROM simhash_pairs('docs', 'fp', 3);

-- A table that had rows before it was distributed: Citus leaves them on disk in the coordinator's
-- relation, and its indexes there; the pairs are still those of the shards.
CREATE TABLE docs_before (id bigint PRIMARY KEY, fp simhash64);
INSERT INTO docs_before SELECT id, fp FROM docs_local WHERE id <= 200 OR id > 100000;
CREATE INDEX ON docs_before USING simhash (fp);
SET client_min_messages = warning;
SELECT create_distributed_table('docs_before', 'id');
RESET client_min_messages;
DELETE FROM docs_before WHERE id > 100000;
SELECT count(*) AS pairs FROM simhash_pairs('docs_before', 'fp', 11);

-- A table named none (which create_distributed_table's colocate_with must not read as 'none'),
-- verified on the workers; a table in a distributed (tenant) schema, whose pairs are found on the
-- coordinator.
CREATE TABLE "none" (id bigint PRIMARY KEY, fp simhash64, body text);
SELECT create_distributed_table('"none"', 'id');
INSERT INTO "none" SELECT id, fp, body FROM docs_local WHERE id <= 500 OR id > 100000;
CREATE TABLE none_local AS SELECT * FROM "none";
SELECT count(*) AS pairs, (SELECT count(*) FROM (
    (SELECT * FROM simhash_pairs('"none"', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('none_local', 'fp', 9, 'body', 0.5))
    UNION ALL
    (SELECT * FROM simhash_pairs('none_local', 'fp', 9, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('"none"', 'fp', 9, 'body', 0.5))) d) AS differences
FROM simhash_pairs('"none"', 'fp', 9, 'body', 0.5);
DROP TABLE "none", none_local;
SET citus.enable_schema_based_sharding = on;
CREATE SCHEMA tenant_a;
RESET citus.enable_schema_based_sharding;
CREATE TABLE tenant_a.docs (id bigint PRIMARY KEY, fp simhash64);
INSERT INTO tenant_a.docs SELECT id, fp FROM docs_local WHERE id <= 500 OR id > 100000;
SELECT count(*) AS pairs FROM simhash_pairs('tenant_a.docs', 'fp', 7);
SET client_min_messages = warning;
DROP SCHEMA tenant_a CASCADE;
RESET client_min_messages;

DROP FUNCTION lookup_differences(int);
DROP TABLE docs, docs_local, docs_before;

-- ALTER EXTENSION simhash UPDATE on a cluster: from 0.5.0 (created on the coordinator, which
-- Citus propagates), the pairs are found on the coordinator, with a NOTICE, until the update
-- reaches every node; then on the workers.
SET client_min_messages = warning;
DROP EXTENSION simhash CASCADE;
CREATE EXTENSION simhash VERSION '0.5.0';
RESET client_min_messages;
SELECT result AS worker_version FROM run_command_on_workers($$SELECT extversion FROM pg_extension WHERE extname = 'simhash'$$);
CREATE TABLE up (id bigint PRIMARY KEY, fp simhash64, body text DEFAULT 'the same text');
SELECT create_distributed_table('up', 'id');
INSERT INTO up SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 2000) i;
INSERT INTO up SELECT 100000 + id, (fp::bigint # 7)::simhash64 FROM up WHERE id <= 50;
SELECT count(*) AS pairs FROM simhash_pairs('up', 'fp', 3);
ALTER EXTENSION simhash UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'simhash') AS current
FROM pg_extension WHERE extname = 'simhash';
SELECT result = (SELECT default_version FROM pg_available_extensions WHERE name = 'simhash') AS worker_current
FROM run_command_on_workers($$SELECT extversion FROM pg_extension WHERE extname = 'simhash'$$);
SELECT count(*) AS pairs FROM simhash_pairs('up', 'fp', 3);
SELECT count(*) AS pairs FROM simhash_pairs('up', 'fp', 3, 'body', 0.9);
DROP TABLE up;

-- Codes of any length (bit(256)) with a simhash index on every shard: radius tests and nearest
-- rows as on one node; pairs and clusters found on the workers (each row sent to a work table under
-- its k + 1 keys, simhash_code_pair_keys; each shard pairs its keys, simhash_code_key_pairs), the
-- same as on one node (a self-join through the index). 1,000 groups of 4 rows, each a base code
-- with its first i % 20 bits, shifted, flipped.
CREATE TABLE codes (id bigint PRIMARY KEY, code bit(256), body text);
SELECT create_distributed_table('codes', 'id', shard_count => 4);
CREATE TABLE codes_local (id bigint PRIMARY KEY, code bit(256), body text);
INSERT INTO codes_local
SELECT i, ('x' || md5((i / 4)::text) || md5((i / 4)::text || 'b'))::bit(256)
          # (repeat('1', i % 20)::bit(256) >> (i % 230)),
       CASE WHEN i % 3 = 0 THEN md5('other' || i) || md5('x' || i) ELSE md5((i / 4)::text) || md5('y' || (i / 4)) END
FROM generate_series(1, 4000) i;
INSERT INTO codes SELECT * FROM codes_local;
CREATE INDEX codes_code ON codes USING simhash (code);
CREATE INDEX codes_local_code ON codes_local USING simhash (code);
SET client_min_messages = error;  -- (Citus' WARNING that a function in pg_temp stays local)
CREATE FUNCTION pg_temp.code_differences(OUT radius int, OUT nearest int) LANGUAGE plpgsql AS $$
DECLARE q bit(256);
BEGIN
    radius := 0; nearest := 0;
    FOR q IN SELECT code FROM codes_local WHERE id <= 40 ORDER BY id LOOP
        IF (SELECT array_agg(id ORDER BY id) FROM codes WHERE simhash_hamming(code, q) <= 12)
           IS DISTINCT FROM (SELECT array_agg(id ORDER BY id) FROM codes_local WHERE simhash_hamming(code, q) <= 12) THEN
            radius := radius + 1;
        END IF;
        IF (SELECT array_agg(id) FROM (SELECT id FROM codes ORDER BY simhash_hamming(code, q), id LIMIT 5) x)
           IS DISTINCT FROM (SELECT array_agg(id) FROM (SELECT id FROM codes_local ORDER BY simhash_hamming(code, q), id LIMIT 5) x) THEN
            nearest := nearest + 1;
        END IF;
    END LOOP;
END $$;
RESET client_min_messages;
SELECT * FROM pg_temp.code_differences();
SELECT k, (SELECT count(*) FROM simhash_pairs('codes', 'code', k)) AS pairs,
       (SELECT count(*) FROM ((SELECT * FROM simhash_pairs('codes', 'code', k) EXCEPT ALL SELECT * FROM simhash_pairs('codes_local', 'code', k))
                              UNION ALL
                              (SELECT * FROM simhash_pairs('codes_local', 'code', k) EXCEPT ALL SELECT * FROM simhash_pairs('codes', 'code', k))) d) AS differences,
       (SELECT count(*) FROM ((SELECT * FROM simhash_clusters('codes', 'code', k) EXCEPT SELECT * FROM simhash_clusters('codes_local', 'code', k))
                              UNION ALL
                              (SELECT * FROM simhash_clusters('codes_local', 'code', k) EXCEPT SELECT * FROM simhash_clusters('codes', 'code', k))) d) AS cluster_differences
FROM (VALUES (2), (8), (24)) v(k);
-- Verified pairs and clusters of codes: the pairs found on the workers, the texts compared there
-- (the table is distributed by id), as on one node.
SELECT (SELECT count(*) FROM simhash_pairs('codes', 'code', 16, 'body', 0.5)) AS verified,
       (SELECT count(*) FROM ((SELECT * FROM simhash_pairs('codes', 'code', 16, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('codes_local', 'code', 16, 'body', 0.5))
                              UNION ALL
                              (SELECT * FROM simhash_pairs('codes_local', 'code', 16, 'body', 0.5) EXCEPT ALL SELECT * FROM simhash_pairs('codes', 'code', 16, 'body', 0.5))) d) AS differences,
       (SELECT count(*) FROM ((SELECT * FROM simhash_clusters('codes', 'code', 16, 'body', 0.5) EXCEPT SELECT * FROM simhash_clusters('codes_local', 'code', 16, 'body', 0.5))
                              UNION ALL
                              (SELECT * FROM simhash_clusters('codes_local', 'code', 16, 'body', 0.5) EXCEPT SELECT * FROM simhash_clusters('codes', 'code', 16, 'body', 0.5))) d) AS cluster_differences;
SELECT count(*) AS work_tables FROM pg_class WHERE relname LIKE 'simhash\_pairs\_%' OR relname LIKE 'simhash\_verify\_%';
SELECT result AS worker_work_tables FROM run_command_on_workers($$SELECT count(*) FROM pg_class WHERE relname LIKE 'simhash\_pairs\_%' OR relname LIKE 'simhash\_verify\_%'$$);
-- Where the workers cannot find them (a radius above 64, a read-only transaction), 0A000: on one
-- node the pairs of codes are a self-join, which Citus does not run on a distributed table.
\set VERBOSITY sqlstate
SELECT count(*) FROM simhash_pairs('codes', 'code', 65);
BEGIN READ ONLY;
SELECT count(*) FROM simhash_clusters('codes', 'code', 8);
ROLLBACK;
\set VERBOSITY default
DROP TABLE codes, codes_local;

-- A role that may create objects in public plants look-alike operators over the types the
-- extension's Citus paths compare and concatenate (the class of CVE-2018-1058); the superuser's
-- pairs, verified pairs and clusters of a distributed table, through the workers, run none of them.
CREATE ROLE simhash_citus_hostile LOGIN;
GRANT CREATE ON SCHEMA public TO simhash_citus_hostile;
SET ROLE simhash_citus_hostile;
CREATE FUNCTION public.planted_cmp(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE WARNING 'planted % ran as %', what, current_user; RETURN NULL; END $$;
CREATE FUNCTION public.planted_eq_oid_regclass(oid, regclass) RETURNS boolean LANGUAGE sql AS $$ SELECT public.planted_cmp('=(oid, regclass)') $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.planted_eq_oid_regclass);
CREATE FUNCTION public.planted_ge_float_int(double precision, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT public.planted_cmp('>=(float8, int4)') $$;
CREATE OPERATOR public.>= (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = public.planted_ge_float_int);
CREATE FUNCTION public.planted_le_float_int(double precision, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT public.planted_cmp('<=(float8, int4)') $$;
CREATE OPERATOR public.<= (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = public.planted_le_float_int);
CREATE FUNCTION public.planted_gt_int_int8(integer, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT public.planted_cmp('>(int4, int8)') $$;
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = bigint, FUNCTION = public.planted_gt_int_int8);
CREATE FUNCTION public.planted_cat_text_int(text, integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN RAISE WARNING 'planted ||(text, int4) ran as %', current_user; RETURN NULL; END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = public.planted_cat_text_int);
CREATE FUNCTION public.planted_eq_name_text(name, text) RETURNS boolean LANGUAGE sql AS $$ SELECT public.planted_cmp('=(name, text)') $$;
RESET ROLE;
-- (the superuser's own statements here avoid the planted operators: `'the text ' || i` would run one)
CREATE TABLE hostile_docs (id bigint PRIMARY KEY, fp simhash64, body text);
SELECT create_distributed_table('hostile_docs', 'id');
INSERT INTO hostile_docs SELECT i, ('x' || substr(md5((i % 500)::text), 1, 16))::bit(64)::bigint::simhash64,
                                pg_catalog.format('the text %s', i % 500) FROM generate_series(1, 2000) i;
SELECT count(*) FROM simhash_create_indexes('hostile_docs', 'fp');
SELECT count(*) AS pairs FROM simhash_pairs('hostile_docs', 'fp', 3);
SELECT count(*) AS verified_pairs FROM simhash_pairs('hostile_docs', 'fp', 3, 'body', 0.9);
SELECT count(*) AS clustered FROM simhash_clusters('hostile_docs', 'fp', 3, 'body', 0.9);
CREATE TABLE hostile_codes (id bigint PRIMARY KEY, code bit(64));
SELECT create_distributed_table('hostile_codes', 'id');
INSERT INTO hostile_codes SELECT i, ('x' || substr(md5((i % 500)::text), 1, 16))::bit(64) FROM generate_series(1, 2000) i;
SELECT count(*) AS code_pairs FROM simhash_pairs('hostile_codes', 'code', 3);
SELECT count(*) AS code_clustered FROM simhash_clusters('hostile_codes', 'code', 3);
DROP TABLE hostile_docs, hostile_codes;
SET client_min_messages = warning;
DROP OWNED BY simhash_citus_hostile;
DROP ROLE simhash_citus_hostile;
RESET client_min_messages;
