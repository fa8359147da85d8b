-- ALTER EXTENSION simhash UPDATE: from the frozen install script of the first release (0.1.0,
-- sql/simhash--0.1.0.sql) through the upgrade scripts to the current version, with stored
-- fingerprints, every index kind and a near-duplicate trigger in place. Afterwards every answer is
-- the same as before, and the catalog objects of the extension are exactly those of a fresh
-- install of the current version (so an upgrade script cannot fall behind sql/simhash.sql).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS simhash CASCADE;
CREATE EXTENSION simhash VERSION '0.1.0';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'simhash';

-- Fingerprints of every mode, the three index kinds, a near-duplicate trigger.
CREATE TABLE up_docs (
    id int PRIMARY KEY,
    body text NOT NULL,
    fp simhash64,
    fp_ngrams simhash64,
    fp_minhash simhash64,
    fp_compact simhash64
);
INSERT INTO up_docs
SELECT g, b, simhash(b), simhash_ngrams(b), minhash64(b), minhash64(b, 4, 2)
FROM (SELECT g, 'document ' || (g % 37) || ' about topic ' || (g % 11) || ': ' || md5((g % 53)::text) AS b
      FROM generate_series(1, 400) g) s;
SELECT count(*) FROM simhash_create_indexes('up_docs', 'fp');
SELECT count(*) FROM simhash_create_indexes('up_docs', 'fp_compact', 'btree_compact');
SELECT count(*) FROM simhash_create_indexes('up_docs', 'fp_minhash', 'gin');
SELECT count(*) FROM simhash_create_indexes('up_docs', 'fp_ngrams');
SELECT simhash_add_dedup('up_docs', 'fp_ngrams', 3, 'skip');
ANALYZE up_docs;

-- The answers: lookups through each index kind and pairs; taken before and after the update.
CREATE TEMP VIEW answers AS
SELECT 'lookup' AS kind, k, q.id AS query, d.id AS found
FROM up_docs q CROSS JOIN generate_series(0, 11, 4) k
JOIN LATERAL (SELECT id FROM up_docs d WHERE d.fp <~> q.fp <= k) d ON true
WHERE q.id <= 20
UNION ALL
SELECT 'compact', k, q.id, d.id
FROM up_docs q CROSS JOIN generate_series(0, 11, 4) k
JOIN LATERAL (SELECT id FROM up_docs d WHERE d.fp_compact <~> q.fp_compact <= k) d ON true
WHERE q.id <= 20
UNION ALL
SELECT 'gin', k, q.id, d.id
FROM up_docs q CROSS JOIN generate_series(0, 11, 4) k
JOIN LATERAL (SELECT id FROM up_docs d WHERE d.fp_minhash <~> q.fp_minhash <= k) d ON true
WHERE q.id <= 20
UNION ALL
SELECT 'pairs', k, p.id_a, p.id_b FROM generate_series(3, 7, 4) k, simhash_pairs('up_docs', 'fp', k) p;
CREATE TEMP TABLE answers_before AS TABLE answers;
SELECT kind, count(*) FROM answers_before GROUP BY kind ORDER BY kind;
CREATE TEMP TABLE fingerprints_before AS SELECT * FROM up_docs;

ALTER EXTENSION simhash UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'simhash') AS current
FROM pg_extension WHERE extname = 'simhash';

-- The same answers, through the same indexes (the update rebuilds only simhash indexes, none here),
-- and the same fingerprints.
CREATE TEMP TABLE answers_after AS TABLE answers;
(TABLE answers_before EXCEPT ALL TABLE answers_after) UNION ALL (TABLE answers_after EXCEPT ALL TABLE answers_before);
SELECT count(*) AS changed_fingerprints FROM up_docs u JOIN fingerprints_before b USING (id)
WHERE (u.fp, u.fp_ngrams, u.fp_minhash, u.fp_compact) IS DISTINCT FROM (b.fp, b.fp_ngrams, b.fp_minhash, b.fp_compact)
   OR simhash(u.body) IS DISTINCT FROM b.fp OR minhash64(u.body) IS DISTINCT FROM b.fp_minhash;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM up_docs WHERE fp_compact <~> '0123456789abcdef' <= 3;
RESET enable_seqscan;
-- The trigger still drops a near-duplicate (here an exact copy of row 1's fingerprint).
INSERT INTO up_docs SELECT 1000, body, fp, fp_ngrams, fp_minhash, fp_compact FROM up_docs WHERE id = 1;
SELECT count(*) FROM up_docs WHERE id = 1000;

-- The catalog objects of the updated extension: each member with its definition and comment.
CREATE FUNCTION pg_temp.extension_objects()
RETURNS TABLE (object text, definition text, description text) LANGUAGE sql AS $$
    SELECT pg_describe_object(d.classid, d.objid, d.objsubid),
           CASE d.classid
               WHEN 'pg_proc'::regclass THEN (
                   SELECT concat_ws(' ', p.prorettype::regtype, p.prokind, p.provolatile, p.proisstrict,
                                    p.proparallel, p.procost, p.prorows, p.prosupport, p.prosrc, p.proconfig)
                   FROM pg_proc p WHERE p.oid = d.objid)
               WHEN 'pg_operator'::regclass THEN (
                   SELECT concat_ws(' ', o.oprcode, o.oprcom::regoperator, o.oprnegate::regoperator, o.oprrest, o.oprjoin,
                                    o.oprcanmerge, o.oprcanhash)
                   FROM pg_operator o WHERE o.oid = d.objid)
               WHEN 'pg_type'::regclass THEN (
                   SELECT concat_ws(' ', t.typlen, t.typbyval, t.typalign, t.typstorage, t.typinput, t.typoutput,
                                    t.typreceive, t.typsend, t.typbasetype::regtype, t.typnotnull)
                   FROM pg_type t WHERE t.oid = d.objid)
               WHEN 'pg_cast'::regclass THEN (
                   SELECT concat_ws(' ', c.castfunc::regprocedure, c.castcontext, c.castmethod)
                   FROM pg_cast c WHERE c.oid = d.objid)
               WHEN 'pg_opclass'::regclass THEN (
                   SELECT concat_ws(' ', c.opcdefault, c.opcintype::regtype, c.opckeytype::regtype,
                                    (SELECT string_agg(pg_describe_object('pg_amop'::regclass, a.oid, 0), '; ' ORDER BY a.amopstrategy)
                                     FROM pg_amop a WHERE a.amopfamily = c.opcfamily),
                                    (SELECT string_agg(pg_describe_object('pg_amproc'::regclass, a.oid, 0), '; ' ORDER BY a.amprocnum)
                                     FROM pg_amproc a WHERE a.amprocfamily = c.opcfamily))
                   FROM pg_opclass c WHERE c.oid = d.objid)
           END,
           obj_description(d.objid, d.classid::regclass::text)
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'simhash')
$$;
CREATE TEMP TABLE objects_updated AS SELECT * FROM pg_temp.extension_objects();
-- (not counting array types, which PostgreSQL 18 also records as members)
SELECT count(*) AS objects, count(description) AS commented FROM objects_updated WHERE object NOT LIKE '%[]';

-- A fresh install of the current version has the same objects, definitions and comments.
SET client_min_messages = warning;
DROP EXTENSION simhash CASCADE;
CREATE EXTENSION simhash;
RESET client_min_messages;
CREATE TEMP TABLE objects_fresh AS SELECT * FROM pg_temp.extension_objects();
SELECT 'only after the update' AS side, * FROM (TABLE objects_updated EXCEPT TABLE objects_fresh) u
UNION ALL
SELECT 'only in a fresh install', * FROM (TABLE objects_fresh EXCEPT TABLE objects_updated) f
ORDER BY 1, 2;

-- From 0.3.0 with a simhash index: the update adds ORDER BY fp <-> q and rebuilds the index (a
-- 0.3.0 library's index holds no NULL rows; here the 0.4.0 library built it, so the REINDEX is
-- seen only in its result), after which an ordered scan returns every row, NULL ones last.
SET client_min_messages = warning;
DROP EXTENSION simhash CASCADE;
CREATE EXTENSION simhash VERSION '0.3.0';
RESET client_min_messages;
CREATE TABLE up_ordered (id int, fp simhash64);
INSERT INTO up_ordered
SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE ('x' || substr(md5('u' || i), 1, 16))::bit(64)::bigint::simhash64 END
FROM generate_series(1, 1000) i;
CREATE INDEX up_ordered_fp ON up_ordered USING simhash (fp);
-- (radius lookups through it work before the update)
SET enable_seqscan = off;
SELECT count(*) FROM up_ordered WHERE fp <~> '0123456789abcdef' <= 20;
RESET enable_seqscan;
SELECT simhash_index_check('up_ordered_fp') AS rows_in_the_0_3_0_index;
ALTER EXTENSION simhash UPDATE;
SELECT simhash_index_check('up_ordered_fp') AS rows_after_the_update;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM up_ordered ORDER BY fp <-> '0123456789abcdef';
CREATE TEMP TABLE up_out AS
SELECT row_number() OVER () AS ord, fp FROM (SELECT fp FROM up_ordered ORDER BY fp <-> '0123456789abcdef') o;
SELECT count(*) AS rows, count(fp) AS not_null,
       count(*) FILTER (WHERE fp IS NOT NULL AND ord > (SELECT min(ord) FROM up_out WHERE fp IS NULL)) AS not_null_after_null
FROM up_out;
RESET enable_seqscan;
DROP TABLE up_ordered, up_out;
