-- simhash 0.4.1 -> 0.5.0 (ALTER EXTENSION simhash UPDATE TO '0.5.0').
-- The forms of simhash_pairs and simhash_clusters that name a table and its columns become C
-- functions: where the fingerprint column has a simhash index (and k <= 11) they read the pairs
-- from the index, a bucket or two in memory at a time; otherwise they run as before, on the
-- query SELECT id_column, fp_column FROM tbl. Same signatures, defaults and results.

\echo Use "ALTER EXTENSION simhash UPDATE TO '0.5.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION simhash_pairs(tbl regclass, fp_column name, k integer, id_column name DEFAULT 'id')
RETURNS TABLE (id_a bigint, id_b bigint, distance integer)
    AS 'MODULE_PATHNAME', 'simhash_pairs_of_table_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION simhash_clusters(tbl regclass, fp_column name, k integer, id_column name DEFAULT 'id')
RETURNS TABLE (id bigint, representative bigint)
    AS 'MODULE_PATHNAME', 'simhash_clusters_of_table_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION simhash_pairs(regclass, name, integer, name) IS 'all pairs within Hamming distance k in a table column, read through its simhash index where it has one';
COMMENT ON FUNCTION simhash_clusters(regclass, name, integer, name) IS 'each row of a table that has a near-duplicate, with the smallest id of its group, read through its simhash index where it has one';
