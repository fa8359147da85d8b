-- needs: vector
-- pgvector beside simhash in one schema, created in both orders (each in a database of its own,
-- then dropped), with the same answers either way (tests/pg_regress/sql/pgvector_checks.psql):
-- each query resolves to the operator of its own extension, and a pgvector user's bit(64) column
-- gets exact radius search and nearest rows through a simhash index on `code::simhash64`
-- (docs/binary-codes.md). scripts/regress.sh leaves this test out, saying SKIPPED, where the server
-- has no pgvector (scripts/test.sh then lists it as skipped). (pg_regress feeds psql the file on
-- stdin: \i reads the checks relative to the repository root, where scripts/regress.sh runs.)
\set regress_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS simhash_pgvector_first;
DROP DATABASE IF EXISTS simhash_pgvector_last;
CREATE DATABASE simhash_pgvector_first;
CREATE DATABASE simhash_pgvector_last;
RESET client_min_messages;

-- simhash first, then pgvector.
\c simhash_pgvector_first
CREATE EXTENSION simhash;
CREATE EXTENSION vector;
\i tests/pg_regress/sql/pgvector_checks.psql

-- pgvector first, then simhash.
\c simhash_pgvector_last
CREATE EXTENSION vector;
CREATE EXTENSION simhash;
\i tests/pg_regress/sql/pgvector_checks.psql

\c :regress_db
DROP DATABASE simhash_pgvector_first;
DROP DATABASE simhash_pgvector_last;
