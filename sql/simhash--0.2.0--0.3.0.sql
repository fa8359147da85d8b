-- simhash 0.2.0 -> 0.3.0 (ALTER EXTENSION simhash UPDATE TO '0.3.0').
-- The functions that only the extension's own objects call move into the private schema
-- simhash_internal (same objects, same OIDs: indexes, operators, casts, the aggregate and stored
-- views keep working without a REINDEX). simhash_add_dedup checks its limits through
-- simhash_internal.simhash_dedup_check, which holds them once for every entry point. New: the
-- index access method simhash, with the operator simhash64 <@ simhash_ball.

\echo Use "ALTER EXTENSION simhash UPDATE TO '0.3.0'" to load this file. \quit

CREATE SCHEMA simhash_internal;
GRANT USAGE ON SCHEMA simhash_internal TO PUBLIC;
COMMENT ON SCHEMA simhash_internal IS 'internal functions of the simhash extension (not for direct use)';

ALTER FUNCTION @extschema@.simhash64_in(cstring) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_out(simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_recv(internal) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_send(simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_eq(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_ne(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_lt(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_le(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_gt(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_ge(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_cmp(simhash64, simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_hash(simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_hash_extended(simhash64, bigint) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_to_bit(simhash64) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash64_from_bit(bit) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_support(internal) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le(simhash_distance, integer) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt(simhash_distance, integer) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le_commuted(integer, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt_commuted(integer, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le(simhash_distance, bigint) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt(simhash_distance, bigint) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le_commuted(bigint, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt_commuted(bigint, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le(simhash_distance, smallint) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt(simhash_distance, smallint) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le_commuted(smallint, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt_commuted(smallint, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le(simhash_distance, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt(simhash_distance, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_le_commuted(simhash_distance, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_distance_lt_commuted(simhash_distance, simhash_distance) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_agg_transition(bigint[], text, double precision) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_agg_combine(bigint[], bigint[]) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_agg_final(bigint[]) SET SCHEMA simhash_internal;
ALTER FUNCTION @extschema@.simhash_index_name(text, text) SET SCHEMA simhash_internal;

-- The PL/pgSQL functions that call simhash_index_name name it by its new schema.
CREATE OR REPLACE FUNCTION simhash_index_statements(tbl regclass, col name, method text DEFAULT 'btree',
                                         concurrently boolean DEFAULT false)
RETURNS SETOF text LANGUAGE plpgsql STABLE AS $$
DECLARE
    col_type regtype;
    rel_name name;
    how text := CASE WHEN simhash_index_statements.concurrently THEN 'CONCURRENTLY ' ELSE '' END;
BEGIN
    SELECT a.atttypid::regtype, c.relname INTO col_type, rel_name
    FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl USING ERRCODE = 'undefined_column';
    END IF;
    -- simhash64 or a domain over it (@extschema@ is replaced, already quoted, at CREATE EXTENSION)
    IF col_type <> '@extschema@.simhash64'::regtype AND
       (SELECT typbasetype FROM pg_catalog.pg_type WHERE oid = col_type) <> '@extschema@.simhash64'::regtype THEN
        RAISE EXCEPTION 'column "%" of relation % is of type %, not simhash64', col, tbl, col_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF method IN ('btree', 'btree_compact') THEN
        FOR n IN 0..3 LOOP
            RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s (@extschema@.simhash_segment(%I, %s))%s',
                how, simhash_internal.simhash_index_name(rel_name || '_' || col, '_segment_' || n), tbl, col, n,
                CASE WHEN method = 'btree' THEN pg_catalog.format(' INCLUDE (%I)', col) ELSE '' END);
        END LOOP;
    ELSIF method = 'simhash' THEN
        RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s USING simhash (%I)',
            how, simhash_internal.simhash_index_name(rel_name || '_' || col, '_simhash'), tbl, col);
    ELSIF method = 'gin' THEN
        RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s USING gin (@extschema@.simhash_bands(%I))',
            how, simhash_internal.simhash_index_name(rel_name || '_' || col, '_bands'), tbl, col);
    ELSE
        RAISE EXCEPTION 'unknown simhash index method "%"', method USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use ''btree'' (four covering segment indexes), ''btree_compact'' (four smaller ones), ''gin'' (one bands index) or ''simhash'' (the extension''s own index).';
    END IF;
END $$;

CREATE FUNCTION simhash_internal.simhash_dedup_check(function text, k integer, verify name,
                                                      min_similarity double precision, n integer) RETURNS void
IMMUTABLE LANGUAGE c AS 'MODULE_PATHNAME', 'simhash_dedup_check_wrapper';

CREATE OR REPLACE FUNCTION simhash_add_dedup(tbl regclass, col name, k integer DEFAULT 3, action text DEFAULT 'error',
                                  report_table text DEFAULT NULL, verify name DEFAULT NULL,
                                  min_similarity double precision DEFAULT 0.7, n integer DEFAULT 3)
-- (extra_float_digits: min_similarity goes into the trigger arguments as text, every digit kept)
RETURNS name LANGUAGE plpgsql SET extra_float_digits = 3 AS $$
DECLARE
    rel_name name;
    rel_schema name;
    row_trigger name;
    notice_trigger name;
    report_name text;
    statements text;
    update_of text;
    verify_args text;
BEGIN
    -- The radius, and with verify the threshold and the shingle length (22023).
    PERFORM simhash_internal.simhash_dedup_check('simhash_add_dedup', k, verify, min_similarity, n);
    IF action IS NULL OR action NOT IN ('error', 'skip', 'report') THEN
        RAISE EXCEPTION 'invalid action "%" for simhash_add_dedup', action
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The action is ''error'', ''skip'' or ''report''.';
    END IF;
    IF report_table IS NOT NULL AND action <> 'report' THEN
        RAISE EXCEPTION 'only action "report" takes a report table' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF verify IS NOT NULL THEN
        -- The text column, checked as the trigger will check it (42703, 42804).
        PERFORM @extschema@.simhash_dedup_lookup(tbl, col, k, verify, min_similarity, n);
        verify_args := pg_catalog.format(', %L, %L, %L', 'verify=' || verify, 'min_similarity=' || min_similarity,
                                         'n=' || n);
    ELSE
        verify_args := '';
    END IF;
    SELECT c.relname, n.nspname INTO rel_name, rel_schema
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    -- Checks the column and its type (42703, 42804) and lists the indexes the lookups need.
    SELECT pg_catalog.string_agg(s || ';', E'\n') INTO statements FROM @extschema@.simhash_index_statements(tbl, col) s;
    row_trigger := simhash_internal.simhash_index_name(rel_name || '_' || col, '_dedup');
    notice_trigger := simhash_internal.simhash_index_name(rel_name || '_' || col, '_dedup_notice');
    IF action = 'report' THEN
        IF report_table IS NULL THEN
            report_name := pg_catalog.format('%I.%I', rel_schema,
                                             simhash_internal.simhash_index_name(rel_name, '_near_duplicates'));
        ELSE
            -- Schema-qualified (the table's schema by default), so that no search_path decides later.
            SELECT pg_catalog.string_agg(pg_catalog.quote_ident(part), '.') INTO report_name
            FROM pg_catalog.unnest(CASE WHEN pg_catalog.array_length(pg_catalog.parse_ident(report_table), 1) = 1
                                        THEN ARRAY[rel_schema::text] || pg_catalog.parse_ident(report_table)
                                        ELSE pg_catalog.parse_ident(report_table) END) part;
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE TABLE IF NOT EXISTS %s (
                relation regclass NOT NULL,
                trigger_name name NOT NULL,
                new_key text,
                existing_key text,
                distance integer NOT NULL,
                new_fingerprint @extschema@.simhash64 NOT NULL,
                reported_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
                similarity double precision)', report_name);
        IF verify IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                                              WHERE attrelid = report_name::pg_catalog.regclass
                                                AND attname = 'similarity' AND NOT attisdropped) THEN
            -- A report table made before for a trigger without verification gets the column.
            EXECUTE pg_catalog.format('ALTER TABLE %s ADD COLUMN similarity double precision', report_name);
        END IF;
    END IF;
    -- Fire on every UPDATE, not UPDATE OF col: the fingerprint may be set by another BEFORE trigger
    -- or be a generated column; the trigger skips rows whose fingerprint did not change.
    update_of := '';
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE TRIGGER %I BEFORE INSERT OR UPDATE%s ON %s FOR EACH ROW
         EXECUTE FUNCTION @extschema@.simhash_dedup_trigger(%L, %L, %L%s%s)',
        row_trigger, update_of, tbl, col, k, action,
        CASE WHEN report_name IS NULL THEN '' ELSE ', ' || pg_catalog.quote_literal(report_name) END, verify_args);
    IF action = 'skip' THEN
        EXECUTE pg_catalog.format(
            'CREATE OR REPLACE TRIGGER %I AFTER INSERT OR UPDATE%s ON %s FOR EACH STATEMENT
             EXECUTE FUNCTION @extschema@.simhash_dedup_notice()', notice_trigger, update_of, tbl);
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE tgrelid = tbl AND tgname = notice_trigger) THEN
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', notice_trigger, tbl);
    END IF;
    IF NOT @extschema@.simhash_indexed(tbl, col) THEN
        RAISE WARNING 'column "%" of relation "%" has no simhash index: every row is checked with a sequential scan',
            col, rel_name USING HINT = 'Create the indexes:' || E'\n' || statements;
    END IF;
    RETURN row_trigger;
END $$;

COMMENT ON FUNCTION simhash_internal.simhash_dedup_check(text, integer, name, double precision, integer) IS 'argument checks of simhash_add_dedup: radius, threshold and shingle length (22023)';

-- The simhash index access method (src/index/).
-- A radius around a fingerprint: fp <@ simhash_ball(q, k) is fp <~> q <= k, and what the planner
-- rewrite turns that test into where the column has a simhash index.
CREATE TYPE simhash_ball AS (center simhash64, radius integer);
CREATE FUNCTION simhash_ball(center simhash64, radius integer) RETURNS simhash_ball
    AS $$ SELECT ROW(center, radius)::@extschema@.simhash_ball $$ LANGUAGE sql IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION simhash_internal.simhash_within_ball(simhash64, simhash_ball) RETURNS boolean
    AS 'MODULE_PATHNAME', 'simhash_within_ball' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- Estimates: the share of uniform fingerprints within the radius (src/index/selectivity.rs).
CREATE FUNCTION simhash_internal.simhash_ball_sel(internal, oid, internal, integer) RETURNS double precision
    AS 'MODULE_PATHNAME', 'simhash_ball_sel_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_internal.simhash_ball_joinsel(internal, oid, internal, smallint, internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'simhash_ball_joinsel_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <@ (
    LEFTARG = simhash64, RIGHTARG = simhash_ball, FUNCTION = simhash_internal.simhash_within_ball,
    RESTRICT = simhash_internal.simhash_ball_sel, JOIN = simhash_internal.simhash_ball_joinsel
);

CREATE FUNCTION simhash_internal.simhash_amhandler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME', 'simhash_amhandler' LANGUAGE C;
CREATE ACCESS METHOD simhash TYPE INDEX HANDLER simhash_internal.simhash_amhandler;
CREATE OPERATOR CLASS simhash64_ops DEFAULT FOR TYPE simhash64 USING simhash AS
    OPERATOR 1 <@ (simhash64, simhash_ball);
-- The structure of a simhash index, checked (as amcheck checks a B-tree); the number of rows in it.
CREATE FUNCTION simhash_index_check(index regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'simhash_index_check_wrapper' LANGUAGE C STRICT;
-- (like amcheck's functions: it locks the index against writers while it runs)
REVOKE EXECUTE ON FUNCTION simhash_index_check(regclass) FROM PUBLIC;

COMMENT ON TYPE simhash_ball IS 'a radius around a fingerprint: fp <@ simhash_ball(q, k) is fp <~> q <= k';
COMMENT ON FUNCTION simhash_ball(simhash64, integer) IS 'the ball of fingerprints within radius bits of center';
COMMENT ON FUNCTION simhash_internal.simhash_within_ball(simhash64, simhash_ball) IS 'implementation of simhash64 <@ simhash_ball';
COMMENT ON OPERATOR <@ (simhash64, simhash_ball) IS 'within the ball: at most radius bits from its center (answered by a simhash index)';
COMMENT ON FUNCTION simhash_internal.simhash_ball_sel(internal, oid, internal, integer) IS 'selectivity of simhash64 <@ simhash_ball (uniform fingerprints)';
COMMENT ON FUNCTION simhash_internal.simhash_ball_joinsel(internal, oid, internal, smallint, internal) IS 'join selectivity of simhash64 <@ simhash_ball (uniform fingerprints)';
COMMENT ON FUNCTION simhash_internal.simhash_amhandler(internal) IS 'handler of the simhash index access method';
COMMENT ON FUNCTION simhash_index_check(regclass) IS 'checks the structure of a simhash index (XX002 if corrupt); returns the number of rows in it';
COMMENT ON ACCESS METHOD simhash IS 'index of simhash64 fingerprints by their 16-bit segments, for radius tests';
COMMENT ON FUNCTION simhash_index_statements(regclass, name, text, boolean) IS 'CREATE INDEX statements for radius lookups on a simhash64 column (btree, btree_compact, gin or simhash)';
-- Comments on the operator classes and casts too.
COMMENT ON OPERATOR CLASS simhash64_ops USING btree IS 'B-tree order of simhash64: unsigned, as the hex text sorts';
COMMENT ON OPERATOR FAMILY simhash64_ops USING btree IS 'B-tree order of simhash64: unsigned, as the hex text sorts';
COMMENT ON OPERATOR CLASS simhash64_hash_ops USING hash IS 'hashing of simhash64 (as int8 hashes the same 64 bits)';
COMMENT ON OPERATOR FAMILY simhash64_hash_ops USING hash IS 'hashing of simhash64 (as int8 hashes the same 64 bits)';
COMMENT ON OPERATOR CLASS simhash64_ops USING simhash IS 'radius tests of simhash64 (fp <@ simhash_ball(q, k)) in a simhash index';
COMMENT ON OPERATOR FAMILY simhash64_ops USING simhash IS 'radius tests of simhash64 in a simhash index';
COMMENT ON CAST (simhash64 AS bigint) IS 'the same 64 bits as a two''s complement bigint';
COMMENT ON CAST (bigint AS simhash64) IS 'the same 64 bits as a fingerprint';
COMMENT ON CAST (simhash64 AS bit) IS 'the 64 bits, most significant first (write fp::bit(64))';
COMMENT ON CAST (bit AS simhash64) IS 'a bit(64), most significant first (other lengths: 22026)';
