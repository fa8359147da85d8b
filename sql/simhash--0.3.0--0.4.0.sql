-- simhash 0.3.0 -> 0.4.0 (ALTER EXTENSION simhash UPDATE TO '0.4.0').
-- The simhash index serves ORDER BY fp <-> q (nearest first; <-> is the distance as a plain
-- integer, the form an index can serve): its operator family gains the
-- ordering operator. Its page format is now version 2, which also holds the rows whose fingerprint
-- is NULL (an ordered scan returns every row); the indexes built by 0.3.0 are rebuilt here (they
-- build quickly: about 0.3 s per million rows), except temporary ones, which serve no ORDER BY
-- until a REINDEX.

\echo Use "ALTER EXTENSION simhash UPDATE TO '0.4.0'" to load this file. \quit

-- The same distance as a plain integer, for ORDER BY fp <-> q: the form a simhash index serves
-- (an ORDER BY of <~>'s domain sorts as its base type integer, which hides the operator from
-- the index).
CREATE FUNCTION simhash_internal.simhash_distance_integer(simhash64, simhash64) RETURNS integer
    AS 'MODULE_PATHNAME', 'hamming_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE OPERATOR <-> (
    LEFTARG = simhash64, RIGHTARG = simhash64, FUNCTION = simhash_internal.simhash_distance_integer,
    COMMUTATOR = <->
);

ALTER OPERATOR FAMILY simhash64_ops USING simhash
    ADD OPERATOR 2 <-> (simhash64, simhash64) FOR ORDER BY integer_ops;

DO $$
DECLARE
    simhash_index pg_catalog.regclass;
BEGIN
    FOR simhash_index IN
        -- (every operator and function named in pg_catalog: this runs as a superuser with the
        -- extension's schema on the search_path, where other roles may have created objects)
        SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam
        WHERE a.amname OPERATOR(pg_catalog.=) 'simhash'::pg_catalog.name
          AND c.relkind OPERATOR(pg_catalog.=) 'i'::pg_catalog.char
          AND c.relpersistence OPERATOR(pg_catalog.<>) 't'::pg_catalog.char
        ORDER BY c.oid
    LOOP
        EXECUTE pg_catalog.format('REINDEX INDEX %s', simhash_index);
    END LOOP;
END
$$;

COMMENT ON FUNCTION simhash_internal.simhash_distance_integer(simhash64, simhash64) IS 'implementation of simhash64 <-> simhash64';
COMMENT ON OPERATOR <-> (simhash64, simhash64) IS 'Hamming distance as an integer, for ORDER BY fp <-> q LIMIT n (nearest first, served by a simhash index)';
COMMENT ON ACCESS METHOD simhash IS 'index of simhash64 fingerprints by their 16-bit segments, for radius tests and ORDER BY distance';
COMMENT ON OPERATOR CLASS simhash64_ops USING simhash IS 'radius tests (fp <@ simhash_ball(q, k)) and ORDER BY fp <-> q of simhash64 in a simhash index';
COMMENT ON OPERATOR FAMILY simhash64_ops USING simhash IS 'radius tests and ORDER BY distance of simhash64 in a simhash index';
