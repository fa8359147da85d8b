-- The extension in a schema of its own that the querying role may not use: the planner rewrite
-- finds its functions without a permission check, so a view over it works for that role.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS simhash_regress_schema;
DROP ROLE IF EXISTS simhash_regress_reader;
RESET client_min_messages;
SELECT current_database() AS regress_db \gset
CREATE DATABASE simhash_regress_schema;
CREATE ROLE simhash_regress_reader;

\c simhash_regress_schema
CREATE SCHEMA ext;
CREATE EXTENSION simhash SCHEMA ext;
REVOKE ALL ON SCHEMA ext FROM PUBLIC;
CREATE TABLE docs (id int PRIMARY KEY, fp ext.simhash64);
INSERT INTO docs VALUES (1, '0123456789abcdef'), (2, '0123456789abcdee'), (3, 'fedcba9876543210');
CREATE INDEX ON docs (ext.simhash_segment(fp, 0));
CREATE INDEX ON docs (ext.simhash_segment(fp, 1));
CREATE INDEX ON docs (ext.simhash_segment(fp, 2));
CREATE INDEX ON docs (ext.simhash_segment(fp, 3));
CREATE VIEW near AS
    SELECT id FROM docs WHERE fp OPERATOR(ext.<~>) '0123456789abcdef'::ext.simhash64 OPERATOR(ext.<=) 3;
GRANT SELECT ON near TO simhash_regress_reader;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM near;
SET ROLE simhash_regress_reader;
SELECT * FROM near ORDER BY id;
RESET ROLE;
-- Batch pairs work with the extension's schema off the search_path.
SHOW search_path;
SELECT * FROM ext.simhash_pairs('docs', 'fp', 3);
SELECT * FROM ext.simhash_clusters('docs', 'fp', 3) ORDER BY id;
-- Through a simhash index, the pairs are read only for a role that may read the columns, and
-- under row-level security only among the rows the policies let the role see.
CREATE INDEX ON docs USING simhash (fp);
GRANT USAGE ON SCHEMA ext TO simhash_regress_reader;
SET ROLE simhash_regress_reader;
\set VERBOSITY sqlstate
SELECT * FROM ext.simhash_pairs('docs', 'fp', 3);
\set VERBOSITY default
RESET ROLE;
GRANT SELECT (id, fp) ON docs TO simhash_regress_reader;
SET ROLE simhash_regress_reader;
SET client_min_messages = debug1;
SELECT * FROM ext.simhash_pairs('docs', 'fp', 3);
RESET client_min_messages;
RESET ROLE;
ALTER TABLE docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY not_two ON docs TO simhash_regress_reader USING (id <> 2);
INSERT INTO docs VALUES (4, '0123456789abcdef');
SET ROLE simhash_regress_reader;
SELECT * FROM ext.simhash_pairs('docs', 'fp', 3);
SELECT * FROM ext.simhash_clusters('docs', 'fp', 3) ORDER BY id;
RESET ROLE;
SELECT * FROM ext.simhash_pairs('docs', 'fp', 3) ORDER BY 1, 2;
REVOKE ALL ON docs FROM simhash_regress_reader;
DROP POLICY not_two ON docs;

\c :regress_db
DROP DATABASE simhash_regress_schema;
DROP ROLE simhash_regress_reader;
