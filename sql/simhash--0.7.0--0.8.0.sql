-- simhash 0.7.0 -> 0.8.0 (ALTER EXTENSION simhash UPDATE TO '0.8.0').
-- Safe in a database that many roles share: the SQL and PL/pgSQL functions name every operator,
-- function and type they use with its schema (pg_catalog or the extension's), and those that do
-- not run a caller's query set search_path = pg_catalog, pg_temp, so that no object another role
-- created on the caller's search_path is chosen instead. simhash_add_dedup needs ownership of the
-- table and a report table of the table's owner. Same signatures, defaults and results.
-- New: simhash(real[], bigint), simhash_bits and simhash_cosine_radius, the random-hyperplane
-- SimHash of embeddings, and binary codes of any length as bit(n) with the simhash_bit_ops
-- operator class of the simhash index (at the end).

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION simhash UPDATE TO '0.8.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION simhash_pairs(query text, k integer, min_similarity double precision, n integer DEFAULT 3)
RETURNS TABLE (id_a bigint, id_b bigint, distance integer, similarity double precision)
-- (no SET search_path: the caller's query is parsed with the caller's search_path; every operator
-- and function of this body is named with its schema instead)
LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    -- On its own lines, without a trailing semicolon, as simhash_pairs(query, k) reads it.
    q pg_catalog.text := pg_catalog.rtrim(query, E' \t\r\n;');
BEGIN
    IF NOT (min_similarity OPERATOR(pg_catalog.>=) 0::pg_catalog.float8
            AND min_similarity OPERATOR(pg_catalog.<=) 1::pg_catalog.float8) THEN
        RAISE EXCEPTION 'min_similarity % is out of range for near-duplicate pairs', min_similarity
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The threshold is a number from 0 to 1.';
    END IF;
    IF n OPERATOR(pg_catalog.<) 1 OR n OPERATOR(pg_catalog.>) 32 THEN
        RAISE EXCEPTION 'shingle length % is out of range for near-duplicate pairs', n
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The shingle length n is an integer from 1 to 32.';
    END IF;
    RETURN QUERY EXECUTE pg_catalog.format(
        'WITH t AS MATERIALIZED (SELECT q.id::pg_catalog.int8 AS id, q.body::pg_catalog.text AS body FROM (
%s
         ) q(id, fp, body))
         SELECT p.id_a, p.id_b, p.distance, s.similarity
         FROM @extschema@.simhash_pairs(%L::pg_catalog.text, $1) p
         JOIN t a ON a.id OPERATOR(pg_catalog.=) p.id_a
         JOIN t b ON b.id OPERATOR(pg_catalog.=) p.id_b
         CROSS JOIN LATERAL (SELECT @extschema@.simhash_similarity(a.body, b.body, $3)) s(similarity)
         WHERE s.similarity OPERATOR(pg_catalog.>=) $2',
        q, pg_catalog.format(E'SELECT q.id, q.fp FROM (\n%s\n) q(id, fp, body)', q))
        USING k, min_similarity, n;
END $$;

CREATE OR REPLACE FUNCTION simhash_pairs(tbl regclass, fp_column name, k integer, text_column name,
                              min_similarity double precision, id_column name DEFAULT 'id', n integer DEFAULT 3)
RETURNS TABLE (id_a bigint, id_b bigint, distance integer, similarity double precision)
LANGUAGE plpgsql VOLATILE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    by_id pg_catalog.bool := false;
    schema pg_catalog.name;
    rel pg_catalog.name;
    id_type pg_catalog.text;
    work pg_catalog.text;
    pairs pg_catalog.text;
    texts pg_catalog.text;
    code_column pg_catalog.bool;
BEGIN
    SELECT ns.nspname, c.relname INTO schema, rel
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE c.oid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::pg_catalog.oid USING ERRCODE = 'undefined_table';
    END IF;
    -- A column of bit codes: its pairs are the table form's (a self-join through its simhash index,
    -- on the workers for a Citus table, k up to 64); the query form takes simhash64 only.
    code_column := EXISTS (
        SELECT FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
        WHERE a.attrelid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid AND a.attname OPERATOR(pg_catalog.=) fp_column
          AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
          AND t.typcategory OPERATOR(pg_catalog.=) 'V'::pg_catalog.char);
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL
       AND min_similarity OPERATOR(pg_catalog.>=) 0::pg_catalog.float8 AND min_similarity OPERATOR(pg_catalog.<=) 1::pg_catalog.float8
       AND n OPERATOR(pg_catalog.>=) 1 AND n OPERATOR(pg_catalog.<=) 32 THEN
        -- (pg_dist_partition, column_to_column_name and citus_is_coordinator are Citus'; named
        -- only where it is installed; the arguments' errors are the query form's)
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1
                                AND partmethod OPERATOR(pg_catalog.=) ''h''
                                AND pg_catalog.column_to_column_name(logicalrelid, partkey) OPERATOR(pg_catalog.=) $2)'
            INTO by_id USING tbl, id_column::pg_catalog.text;
    END IF;
    IF by_id AND (k OPERATOR(pg_catalog.>) CASE WHEN code_column THEN 64 ELSE 11 END
                  OR pg_catalog.current_setting('transaction_read_only')::pg_catalog.bool
                  OR NOT pg_catalog.has_schema_privilege(schema, 'CREATE')) THEN
        RAISE NOTICE 'simhash: the verified pairs of Citus table % are found on the coordinator, with all its texts in memory', tbl
            USING DETAIL = pg_catalog.format('The workers verify pairs within at most %s, in a transaction that may write, '
                                             'with CREATE on the table''s schema for two work tables.',
                                             CASE WHEN code_column THEN 64 ELSE 11 END);
        by_id := false;
    ELSIF by_id THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO by_id;
        IF NOT by_id THEN
            RAISE NOTICE 'simhash: the verified pairs of Citus table % are found on this node, with all its texts in memory', tbl
                USING DETAIL = 'The workers verify pairs where the query runs on the coordinator.';
        END IF;
    END IF;
    IF NOT by_id AND code_column THEN
        -- The threshold and the shingle length (22023; the radius is the table form's).
        PERFORM simhash_internal.simhash_dedup_check('simhash_pairs', 0, text_column, min_similarity, n);
        -- The pairs of the codes, then the texts of their rows, as the caller reads them.
        RETURN QUERY EXECUTE pg_catalog.format(
            'WITH p AS MATERIALIZED (SELECT * FROM @extschema@.simhash_pairs($1, $2, $3, $4))
             SELECT p.id_a, p.id_b, p.distance, s.similarity FROM p
             JOIN %1$s a ON a.%2$I::pg_catalog.int8 OPERATOR(pg_catalog.=) p.id_a
             JOIN %1$s b ON b.%2$I::pg_catalog.int8 OPERATOR(pg_catalog.=) p.id_b
             CROSS JOIN LATERAL (SELECT @extschema@.simhash_similarity(a.%3$I::pg_catalog.text, b.%3$I::pg_catalog.text, $5)) s(similarity)
             WHERE s.similarity OPERATOR(pg_catalog.>=) $6', tbl, id_column, text_column)
            USING tbl, fp_column, k, id_column, n, min_similarity;
        RETURN;
    ELSIF NOT by_id THEN
        RETURN QUERY SELECT * FROM @extschema@.simhash_pairs(
            pg_catalog.format('SELECT %I, %I, %I FROM %s', id_column, fp_column, text_column, tbl), k, min_similarity, n);
        RETURN;
    END IF;
    SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO id_type
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid AND a.attname OPERATOR(pg_catalog.=) id_column;
    -- Work tables of new names (CREATE TABLE fails rather than reuse a table someone else made).
    work := pg_catalog.format('simhash_verify_%s_%s', pg_catalog.pg_backend_pid(),
                              (pg_catalog.random() OPERATOR(pg_catalog.*) 1e9::pg_catalog.float8)::pg_catalog.int8);
    pairs := pg_catalog.format('%I.%I', schema, work OPERATOR(pg_catalog.||) '_a');
    texts := pg_catalog.format('%I.%I', schema, work OPERATOR(pg_catalog.||) '_b');
    -- The pairs, with the shard of their first row ...
    EXECUTE pg_catalog.format('CREATE UNLOGGED TABLE %s (id_a %s NOT NULL, id_b %s NOT NULL, distance pg_catalog.int4 NOT NULL)',
                              pairs, id_type, id_type);
    PERFORM pg_catalog.create_distributed_table(pairs, 'id_a', colocate_with => pg_catalog.format('%I.%I', schema, rel));
    EXECUTE pg_catalog.format('INSERT INTO %s SELECT p.id_a, p.id_b, p.distance FROM @extschema@.simhash_pairs(%L::pg_catalog.regclass, %L::pg_catalog.name, %L::pg_catalog.int4, %L::pg_catalog.name) p',
                              pairs, tbl, fp_column, k, id_column);
    -- ... with the first row's text, moved to the shard of the second ...
    EXECUTE pg_catalog.format('CREATE UNLOGGED TABLE %s (id_b %s NOT NULL, id_a %s NOT NULL, distance pg_catalog.int4 NOT NULL, body_a pg_catalog.text)',
                              texts, id_type, id_type);
    PERFORM pg_catalog.create_distributed_table(texts, 'id_b', colocate_with => pg_catalog.format('%I.%I', schema, rel));
    EXECUTE pg_catalog.format('INSERT INTO %s SELECT p.id_b, p.id_a, p.distance, t.%I::pg_catalog.text FROM %s p JOIN %s t ON t.%I OPERATOR(pg_catalog.=) p.id_a',
                              texts, text_column, pairs, tbl, id_column);
    -- ... compared there with the second's.
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT s.id_a::pg_catalog.int8, s.id_b::pg_catalog.int8, s.distance, s.similarity FROM (
             SELECT p.id_a, p.id_b, p.distance, @extschema@.simhash_similarity(p.body_a, t.%I::pg_catalog.text, $2) AS similarity
             FROM %s p JOIN %s t ON t.%I OPERATOR(pg_catalog.=) p.id_b) s
         WHERE s.similarity OPERATOR(pg_catalog.>=) $1',
        text_column, texts, tbl, id_column) USING min_similarity, n;
    EXECUTE pg_catalog.format('DROP TABLE %s, %s', pairs, texts);
END $$;

CREATE OR REPLACE FUNCTION simhash_clusters(query text, k integer, min_similarity double precision, n integer DEFAULT 3)
RETURNS TABLE (id bigint, representative bigint)
    AS 'MODULE_PATHNAME', 'simhash_verified_clusters_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION simhash_clusters(tbl regclass, fp_column name, k integer, text_column name,
                                 min_similarity double precision, id_column name DEFAULT 'id', n integer DEFAULT 3)
RETURNS TABLE (id bigint, representative bigint)
    AS 'MODULE_PATHNAME', 'simhash_verified_clusters_of_table_wrapper' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION simhash_internal.simhash_index_name(prefix text, suffix text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WHILE pg_catalog.octet_length(prefix OPERATOR(pg_catalog.||) suffix) OPERATOR(pg_catalog.>) 63 LOOP
        prefix := pg_catalog.left(prefix, -1);
    END LOOP;
    RETURN prefix OPERATOR(pg_catalog.||) suffix;
END $$;

CREATE OR REPLACE FUNCTION simhash_index_statements(tbl regclass, col name, method text DEFAULT 'btree',
                                         concurrently boolean DEFAULT false)
RETURNS SETOF text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    col_type pg_catalog.oid;
    base_type pg_catalog.oid;
    rel_name pg_catalog.name;
    rel pg_catalog.text;
    cast_ pg_catalog.text := '';
    prefix pg_catalog.text;
    how pg_catalog.text := CASE WHEN simhash_index_statements.concurrently THEN 'CONCURRENTLY ' ELSE '' END;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'the table must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT c.relname, CASE WHEN c.relpersistence OPERATOR(pg_catalog.=) 't'::pg_catalog.char
                           THEN pg_catalog.format('pg_temp.%I', c.relname) ELSE tbl::pg_catalog.text END
    INTO rel_name, rel
    FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::pg_catalog.oid USING ERRCODE = 'undefined_table';
    END IF;
    SELECT a.atttypid, t.typbasetype INTO col_type, base_type
    FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
    WHERE a.attrelid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid AND a.attname OPERATOR(pg_catalog.=) col
      AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl USING ERRCODE = 'undefined_column';
    END IF;
    -- simhash64 or a domain over it (@extschema@ is replaced, already quoted, at CREATE EXTENSION)
    IF col_type OPERATOR(pg_catalog.<>) '@extschema@.simhash64'::pg_catalog.regtype::pg_catalog.oid AND
       base_type OPERATOR(pg_catalog.<>) '@extschema@.simhash64'::pg_catalog.regtype::pg_catalog.oid THEN
        RAISE EXCEPTION 'column "%" of relation % is of type %, not simhash64', col, tbl, pg_catalog.format_type(col_type, NULL)
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    -- A domain's column is cast to simhash64 itself, which the extension's functions take: a
    -- function declared for the domain would otherwise match it more exactly.
    IF base_type OPERATOR(pg_catalog.<>) 0::pg_catalog.oid THEN
        cast_ := '::@extschema@.simhash64';
    END IF;
    prefix := pg_catalog.format('%s_%s', rel_name, col);
    IF method OPERATOR(pg_catalog.=) 'btree' OR method OPERATOR(pg_catalog.=) 'btree_compact' THEN
        FOR n IN 0..3 LOOP
            RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s (@extschema@.simhash_segment(%I%s, %s))%s',
                how, simhash_internal.simhash_index_name(prefix, pg_catalog.format('_segment_%s', n)), rel, col, cast_, n,
                CASE WHEN method OPERATOR(pg_catalog.=) 'btree' THEN pg_catalog.format(' INCLUDE (%I)', col) ELSE '' END);
        END LOOP;
    ELSIF method OPERATOR(pg_catalog.=) 'simhash' THEN
        RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s USING simhash (%I)',
            how, simhash_internal.simhash_index_name(prefix, '_simhash'), rel, col);
    ELSIF method OPERATOR(pg_catalog.=) 'gin' THEN
        RETURN NEXT pg_catalog.format('CREATE INDEX %sIF NOT EXISTS %I ON %s USING gin (@extschema@.simhash_bands(%I%s))',
            how, simhash_internal.simhash_index_name(prefix, '_bands'), rel, col, cast_);
    ELSE
        RAISE EXCEPTION 'unknown simhash index method "%"', method USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use ''btree'' (four covering segment indexes), ''btree_compact'' (four smaller ones), ''gin'' (one bands index) or ''simhash'' (the extension''s own index).';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION simhash_create_indexes(tbl regclass, col name, method text DEFAULT 'btree')
RETURNS SETOF text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    statement pg_catalog.text;
BEGIN
    FOR statement IN SELECT @extschema@.simhash_index_statements(tbl, col, method) LOOP
        EXECUTE statement;
        RETURN NEXT statement;
    END LOOP;
END $$;

-- The argument checks of simhash_add_dedup by the column's kind (simhash64 or bit codes); the
-- five-argument one stays for simhash_pairs.
CREATE FUNCTION simhash_internal.simhash_dedup_check(function text, k integer, verify name,
                                                      min_similarity double precision, n integer, codes boolean) RETURNS void
IMMUTABLE LANGUAGE c AS 'MODULE_PATHNAME', 'simhash_dedup_check_of_kind_wrapper';
COMMENT ON FUNCTION simhash_internal.simhash_dedup_check(text, integer, name, double precision, integer) IS 'argument checks of simhash_pairs: radius, threshold and shingle length (22023)';
COMMENT ON FUNCTION simhash_internal.simhash_dedup_check(text, integer, name, double precision, integer, boolean) IS 'argument checks of simhash_add_dedup on a column of simhash64 or (codes) of bit codes: radius, threshold and shingle length (22023)';

CREATE OR REPLACE FUNCTION simhash_add_dedup(tbl regclass, col name, k integer DEFAULT 3, action text DEFAULT 'error',
                                  report_table text DEFAULT NULL, verify name DEFAULT NULL,
                                  min_similarity double precision DEFAULT 0.7, n integer DEFAULT 3,
                                  deferred boolean DEFAULT false)
-- (extra_float_digits: min_similarity goes into the trigger arguments as text, every digit kept)
RETURNS name LANGUAGE plpgsql SET extra_float_digits = 3 SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel_name pg_catalog.name;
    rel_schema pg_catalog.name;
    rel_owner pg_catalog.oid;
    row_trigger pg_catalog.name;
    notice_trigger pg_catalog.name;
    report_name pg_catalog.text;
    report_oid pg_catalog.oid;
    report_owner pg_catalog.oid;
    report_kind pg_catalog.char;
    report_persistence pg_catalog.char;
    report_schema pg_catalog.name;
    report_rel pg_catalog.name;
    report_namespace pg_catalog.oid;
    rel_persistence pg_catalog.char;
    grantee pg_catalog.oid;
    statements pg_catalog.text;
    update_of pg_catalog.text;
    verify_args pg_catalog.text;
    citus_table pg_catalog.bool := false;
    -- A column of bit codes: bit, bit varying or a domain over one (the type category 'V').
    code_column pg_catalog.bool := EXISTS (
        SELECT FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
        WHERE a.attrelid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid AND a.attname OPERATOR(pg_catalog.=) col
          AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
          AND t.typcategory OPERATOR(pg_catalog.=) 'V'::pg_catalog.char);
BEGIN
    -- The radius (against the range of the column's kind: simhash64, or bit codes), and with
    -- verify the threshold and the shingle length (22023), before anything else is read or made
    -- (simhash_dedup_lookup below reads a NULL threshold or shingle length as its default).
    PERFORM simhash_internal.simhash_dedup_check('simhash_add_dedup', k, verify, min_similarity, n,
        codes => code_column);
    SELECT c.relname, ns.nspname, c.relowner, c.relpersistence INTO rel_name, rel_schema, rel_owner, rel_persistence
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE c.oid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::pg_catalog.oid USING ERRCODE = 'undefined_table';
    END IF;
    -- The constraint runs its lookups as the table's owner and writes its report table as the
    -- owner: only the owner (or a member of the owning role) may attach it, as for a foreign key.
    IF NOT pg_catalog.pg_has_role(rel_owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', rel_name USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- A Citus table's rows are in its shards, which a trigger here would not see (0A000).
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1)'
            INTO citus_table USING tbl;
    END IF;
    IF citus_table THEN
        RAISE EXCEPTION 'the near-duplicate constraint is not supported on Citus table %', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its rows are in shards that a trigger on this table does not see.',
                  HINT = pg_catalog.format('Load the rows, then remove near-duplicates with simhash_clusters(%L, %L, %s) '
                                           '(see "Sharding with Citus" in the README).', tbl::pg_catalog.text, col, k);
    END IF;
    IF action IS NULL OR NOT (action OPERATOR(pg_catalog.=) 'error' OR action OPERATOR(pg_catalog.=) 'skip'
                              OR action OPERATOR(pg_catalog.=) 'report') THEN
        RAISE EXCEPTION 'invalid action "%" for simhash_add_dedup', action
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The action is ''error'', ''skip'' or ''report''.';
    END IF;
    IF report_table IS NOT NULL AND action OPERATOR(pg_catalog.<>) 'report' THEN
        RAISE EXCEPTION 'only action "report" takes a report table' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF deferred IS NULL THEN
        RAISE EXCEPTION 'deferred must be true or false, not NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF deferred AND action OPERATOR(pg_catalog.=) 'report' THEN
        RAISE EXCEPTION 'the deferred near-duplicate check supports actions ''error'' and ''skip'''
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use deferred => false (the check at each row) for action ''report''.';
    END IF;
    IF verify IS NOT NULL THEN
        -- The text column, checked as the trigger will check it (42703, 42804).
        PERFORM @extschema@.simhash_dedup_lookup(tbl, col, k, verify, min_similarity, n);
        verify_args := pg_catalog.format(', %L, %L, %L', pg_catalog.format('verify=%s', verify),
                                         pg_catalog.format('min_similarity=%s', min_similarity),
                                         pg_catalog.format('n=%s', n));
    ELSE
        verify_args := '';
    END IF;
    IF NOT code_column THEN
        -- Checks the column and its type (42703, 42804) and lists the indexes the lookups need.
        SELECT pg_catalog.string_agg(s OPERATOR(pg_catalog.||) ';', E'\n') INTO statements
        FROM @extschema@.simhash_index_statements(tbl, col) s;
    ELSE
        -- A column of bit codes (a bit-string type: bit, bit varying or a domain over one; the
        -- trigger takes those two): its lookup, which checks the radius again (22023, as above)
        -- and reads the column (42703).
        PERFORM @extschema@.simhash_dedup_lookup(tbl, col, k);
        -- (a temporary table named as pg_temp.name, as simhash_index_statements names it)
        statements := pg_catalog.format('CREATE INDEX IF NOT EXISTS %I ON %s USING simhash (%I);',
            simhash_internal.simhash_index_name(pg_catalog.format('%s_%s', rel_name, col), '_simhash'),
            CASE WHEN rel_persistence OPERATOR(pg_catalog.=) 't'::pg_catalog.char
                 THEN pg_catalog.format('pg_temp.%I', rel_name) ELSE tbl::pg_catalog.text END, col);
    END IF;
    row_trigger := simhash_internal.simhash_index_name(pg_catalog.format('%s_%s', rel_name, col), '_dedup');
    notice_trigger := simhash_internal.simhash_index_name(pg_catalog.format('%s_%s', rel_name, col), '_dedup_notice');
    IF action OPERATOR(pg_catalog.=) 'report' THEN
        IF report_table IS NULL THEN
            report_name := pg_catalog.format('%I.%I', rel_schema,
                                             simhash_internal.simhash_index_name(rel_name, '_near_duplicates'));
        ELSE
            -- Schema-qualified (the table's schema by default), so that no search_path decides later.
            SELECT pg_catalog.string_agg(pg_catalog.quote_ident(part), '.') INTO report_name
            FROM pg_catalog.unnest(CASE WHEN pg_catalog.array_length(pg_catalog.parse_ident(report_table), 1) OPERATOR(pg_catalog.=) 1
                                        THEN pg_catalog.array_prepend(rel_schema::pg_catalog.text, pg_catalog.parse_ident(report_table))
                                        ELSE pg_catalog.parse_ident(report_table) END) part;
        END IF;
        -- The trigger writes the report as the table's owner: a report table must be the owner's
        -- (one another role made first would run that role's triggers and rules with the owner's
        -- rights), a plain or partitioned table, and is made with the owner as its owner.
        report_oid := pg_catalog.to_regclass(report_name)::pg_catalog.oid;
        IF report_oid IS NULL THEN
            EXECUTE pg_catalog.format(
                'CREATE TABLE %s (
                    relation pg_catalog.regclass NOT NULL,
                    trigger_name pg_catalog.name NOT NULL,
                    new_key pg_catalog.text,
                    existing_key pg_catalog.text,
                    distance pg_catalog.int4 NOT NULL,
                    new_fingerprint %s NOT NULL,
                    reported_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
                    similarity pg_catalog.float8)', report_name,
                CASE WHEN code_column THEN 'pg_catalog.varbit' ELSE '@extschema@.simhash64' END);
            report_oid := pg_catalog.to_regclass(report_name)::pg_catalog.oid;
            SELECT c.relowner INTO report_owner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) report_oid;
            IF report_owner OPERATOR(pg_catalog.<>) rel_owner THEN
                EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', report_name, pg_catalog.pg_get_userbyid(rel_owner));
                -- (grants the creating role's default privileges gave to others: the owner's table)
                FOR grantee IN
                    SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
                    WHERE c.oid OPERATOR(pg_catalog.=) report_oid AND a.grantee OPERATOR(pg_catalog.<>) rel_owner
                LOOP
                    EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', report_name,
                        CASE WHEN grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                             ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(grantee)) END);
                END LOOP;
            END IF;
        END IF;
        SELECT c.relowner, c.relkind, c.relpersistence, ns.nspname, c.relname, c.relnamespace
        INTO report_owner, report_kind, report_persistence, report_schema, report_rel, report_namespace
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace
        WHERE c.oid OPERATOR(pg_catalog.=) report_oid;
        IF NOT (report_kind OPERATOR(pg_catalog.=) 'r'::pg_catalog.char OR report_kind OPERATOR(pg_catalog.=) 'p'::pg_catalog.char) THEN
            RAISE EXCEPTION 'report table % is not a table', report_name USING ERRCODE = 'wrong_object_type';
        END IF;
        IF report_owner OPERATOR(pg_catalog.<>) rel_owner THEN
            RAISE EXCEPTION 'report table % is owned by role %, not by %, the owner of table %', report_name,
                pg_catalog.pg_get_userbyid(report_owner), pg_catalog.pg_get_userbyid(rel_owner), rel_name
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Use a report table of the table''s owner, or another name (report_table => ...).';
        END IF;
        -- A temporary report table lives only in this session: only for a temporary table.
        IF report_persistence OPERATOR(pg_catalog.=) 't'::pg_catalog.char
           AND rel_persistence OPERATOR(pg_catalog.<>) 't'::pg_catalog.char THEN
            RAISE EXCEPTION 'report table % is temporary, and table % is not', report_name, rel_name
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT pg_catalog.has_schema_privilege(rel_owner, report_namespace, 'USAGE')
           OR NOT pg_catalog.has_table_privilege(rel_owner, report_oid, 'INSERT') THEN
            RAISE EXCEPTION 'the owner of table %, role %, may not insert into report table %', rel_name,
                pg_catalog.pg_get_userbyid(rel_owner), report_name
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'The trigger writes the report as the table''s owner: it needs USAGE on the report table''s schema and INSERT on it.';
        END IF;
        -- The codes of a column of bit codes go into a column of bit varying (42804).
        IF code_column AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                                       WHERE attrelid OPERATOR(pg_catalog.=) report_oid
                                         AND attname OPERATOR(pg_catalog.=) 'new_fingerprint' AND NOT attisdropped
                                         AND atttypid OPERATOR(pg_catalog.=) 'pg_catalog.varbit'::pg_catalog.regtype::pg_catalog.oid) THEN
            RAISE EXCEPTION 'report table % has no column new_fingerprint of type bit varying for the codes of column %',
                report_name, col USING ERRCODE = 'datatype_mismatch',
                HINT = 'Use another report table (report_table => ...); the constraint creates it.';
        END IF;
        -- As the trigger will name it: schema and name from the catalog (pg_temp_N for a temporary one).
        report_name := pg_catalog.format('%I.%I', report_schema, report_rel);
        IF verify IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                                              WHERE attrelid OPERATOR(pg_catalog.=) report_oid
                                                AND attname OPERATOR(pg_catalog.=) 'similarity' AND NOT attisdropped) THEN
            -- A report table made before for a trigger without verification gets the column.
            EXECUTE pg_catalog.format('ALTER TABLE %s ADD COLUMN similarity pg_catalog.float8', report_name);
        END IF;
    END IF;
    -- Fire on every UPDATE, not UPDATE OF col: the fingerprint may be set by another BEFORE trigger
    -- or be a generated column; the trigger skips rows whose fingerprint did not change.
    update_of := '';
    -- Deferred: AFTER the row is written, which gives the trigger the row's place, to check at commit.
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE TRIGGER %I %s INSERT OR UPDATE%s ON %s FOR EACH ROW
         EXECUTE FUNCTION @extschema@.simhash_dedup_trigger(%L, %L, %L%s%s)',
        row_trigger, CASE WHEN deferred THEN 'AFTER' ELSE 'BEFORE' END, update_of, tbl, col, k, action,
        CASE WHEN report_name IS NULL THEN '' ELSE pg_catalog.format(', %L', report_name) END, verify_args);
    -- (The deferred check reports the rows it skips at commit.)
    IF action OPERATOR(pg_catalog.=) 'skip' AND NOT deferred THEN
        EXECUTE pg_catalog.format(
            'CREATE OR REPLACE TRIGGER %I AFTER INSERT OR UPDATE%s ON %s FOR EACH STATEMENT
             EXECUTE FUNCTION @extschema@.simhash_dedup_notice()', notice_trigger, update_of, tbl);
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE tgrelid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid
                                                      AND tgname OPERATOR(pg_catalog.=) notice_trigger) THEN
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', notice_trigger, tbl);
    END IF;
    IF NOT @extschema@.simhash_indexed(tbl, col) THEN
        RAISE WARNING 'column "%" of relation "%" has no simhash index: every row is checked with a sequential scan',
            col, rel_name USING HINT = pg_catalog.format(E'Create the indexes:\n%s', statements);
    END IF;
    RETURN row_trigger;
END $$;
COMMENT ON FUNCTION simhash_add_dedup(regclass, name, integer, text, text, name, double precision, integer, boolean) IS 'attaches the near-duplicate constraint (triggers, report table) to a simhash64 column or a column of bit codes, optionally verified by the similarity of a text column, or checked at commit (deferred)';

-- The radius test of the simhash index is leakproof (it raises no error and tells nothing but its
-- result): under row-level security it can still be an index condition.
ALTER FUNCTION simhash_internal.simhash_within_ball(simhash64, simhash_ball) LEAKPROOF;

-- Random-hyperplane SimHash of embeddings (new in 0.8.0).
CREATE FUNCTION simhash(embedding real[], seed bigint DEFAULT 0) RETURNS simhash64
    AS 'MODULE_PATHNAME', 'simhash_embedding_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 200;
CREATE FUNCTION simhash_bits(embedding real[], bits integer, seed bigint DEFAULT 0) RETURNS bit
    AS 'MODULE_PATHNAME', 'simhash_bits_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION simhash_cosine_radius(cosine double precision, bits integer DEFAULT 64, recall double precision DEFAULT 0.95)
RETURNS integer
    AS 'MODULE_PATHNAME', 'simhash_cosine_radius_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION simhash(real[], bigint) IS 'random-hyperplane SimHash of an embedding, 64 bits: Hamming / 64 estimates angle / pi; planes from the seed; NULL for the zero vector';
COMMENT ON FUNCTION simhash_bits(real[], integer, bigint) IS 'random-hyperplane SimHash of an embedding as bit(bits), 1 to 4096 bits: the first 64 are simhash(embedding, seed); NULL for the zero vector';
COMMENT ON FUNCTION simhash_cosine_radius(double precision, integer, double precision) IS 'smallest radius k within which a pair of vectors of this cosine similarity falls with probability recall: the binomial quantile of (bits, arccos(cosine) / pi)';

-- ---------------------------------------------------------------------------------------------
-- Binary codes of any length as bit(n) (src/codes/; new in 0.8.0): perceptual image hashes,
-- binary embeddings, simhash_bits. Nothing is defined on (bit, bit), so that pgvector's operators
-- on bit and these live in one schema; the index operators take a simhash_code_ball on the right.
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION simhash_hamming(a bit, b bit) RETURNS simhash_distance
    AS 'MODULE_PATHNAME', 'simhash_hamming_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_code(bytes bytea) RETURNS bit
    AS 'MODULE_PATHNAME', 'simhash_code_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- The pairs of a column of codes of a Citus table, found on its workers (as simhash_pair_keys and
-- simhash_key_pairs for simhash64).
CREATE FUNCTION simhash_code_pair_keys(code bit, k integer) RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'simhash_code_pair_keys_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_code_key_pairs(key bigint, ids bigint[], codes bit varying[], k integer, links_only boolean DEFAULT false)
RETURNS TABLE (id_a bigint, id_b bigint, distance integer)
    AS 'MODULE_PATHNAME', 'simhash_code_key_pairs_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- A radius around a code: code <@ simhash_code_ball(q, k) is simhash_hamming(code, q) <= k.
CREATE TYPE simhash_code_ball AS (center bit varying, radius integer);
CREATE FUNCTION simhash_code_ball(center bit, radius integer) RETURNS simhash_code_ball
    AS $$ SELECT ROW(center, radius)::@extschema@.simhash_code_ball $$ LANGUAGE sql IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION simhash_internal.simhash_code_within(bit, simhash_code_ball) RETURNS boolean
    AS 'MODULE_PATHNAME', 'simhash_code_within' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_internal.simhash_code_ball_sel(internal, oid, internal, integer) RETURNS double precision
    AS 'MODULE_PATHNAME', 'simhash_code_ball_sel_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_internal.simhash_code_ball_joinsel(internal, oid, internal, smallint, internal) RETURNS double precision
    AS 'MODULE_PATHNAME', 'simhash_code_ball_joinsel_wrapper' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <@ (
    LEFTARG = bit, RIGHTARG = simhash_code_ball, FUNCTION = simhash_internal.simhash_code_within,
    RESTRICT = simhash_internal.simhash_code_ball_sel, JOIN = simhash_internal.simhash_code_ball_joinsel
);
-- The distance to the ball's center (its radius unused), for ORDER BY code <-> simhash_code_ball(q, 0).
CREATE FUNCTION simhash_internal.simhash_code_distance(bit, simhash_code_ball) RETURNS integer
    AS 'MODULE_PATHNAME', 'simhash_code_distance' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <-> (
    LEFTARG = bit, RIGHTARG = simhash_code_ball, FUNCTION = simhash_internal.simhash_code_distance
);
-- The same distance as a float8: the order of pgvector's <~> (bit, bit), which the planner hook
-- serves with this operator (src/lookup/codes.rs).
CREATE FUNCTION simhash_internal.simhash_code_distance_float(bit, simhash_code_ball) RETURNS double precision
    AS 'MODULE_PATHNAME', 'simhash_code_distance_float' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OPERATOR <~> (
    LEFTARG = bit, RIGHTARG = simhash_code_ball, FUNCTION = simhash_internal.simhash_code_distance_float
);
-- Strategy 1: radius tests; 2 and 3: ORDER BY distance, nearest first (as integer and as float8).
CREATE OPERATOR CLASS simhash_bit_ops DEFAULT FOR TYPE bit USING simhash AS
    OPERATOR 1 <@ (bit, simhash_code_ball),
    OPERATOR 2 <-> (bit, simhash_code_ball) FOR ORDER BY integer_ops,
    OPERATOR 3 <~> (bit, simhash_code_ball) FOR ORDER BY float_ops;

COMMENT ON FUNCTION simhash_hamming(bit, bit) IS 'number of differing bits of two codes of one length (22026 otherwise); simhash_hamming(code, q) <= k uses a simhash index on code';
COMMENT ON FUNCTION simhash_code(bytea) IS 'the bytes as a code of 8 * length bits, first bit = most significant bit of the first byte';
COMMENT ON FUNCTION simhash_code_pair_keys(bit, integer) IS 'the k + 1 keys of a code for pairs within k (0 to 64): rows sharing a key are paired by simhash_code_key_pairs, and every pair within k comes out under exactly one key';
COMMENT ON FUNCTION simhash_code_key_pairs(bigint, bigint[], bit varying[], integer, boolean) IS 'the pairs within k among the (id, code) rows of one key of simhash_code_pair_keys that are reported under that key (with links_only, enough of them to form the same groups)';
COMMENT ON TYPE simhash_code_ball IS 'a radius around a code: code <@ simhash_code_ball(q, k) is simhash_hamming(code, q) <= k';
COMMENT ON FUNCTION simhash_code_ball(bit, integer) IS 'the ball of codes within radius bits of center';
COMMENT ON FUNCTION simhash_internal.simhash_code_within(bit, simhash_code_ball) IS 'implementation of bit <@ simhash_code_ball';
COMMENT ON FUNCTION simhash_internal.simhash_code_ball_sel(internal, oid, internal, integer) IS 'selectivity of bit <@ simhash_code_ball (uniform codes)';
COMMENT ON FUNCTION simhash_internal.simhash_code_ball_joinsel(internal, oid, internal, smallint, internal) IS 'join selectivity of bit <@ simhash_code_ball (uniform codes)';
COMMENT ON OPERATOR <@ (bit, simhash_code_ball) IS 'within the ball: at most radius bits from its center (answered by a simhash index)';
COMMENT ON FUNCTION simhash_internal.simhash_code_distance(bit, simhash_code_ball) IS 'implementation of bit <-> simhash_code_ball';
COMMENT ON OPERATOR <-> (bit, simhash_code_ball) IS 'Hamming distance to the ball''s center, for ORDER BY (answered by a simhash index)';
COMMENT ON FUNCTION simhash_internal.simhash_code_distance_float(bit, simhash_code_ball) IS 'implementation of bit <~> simhash_code_ball';
COMMENT ON OPERATOR <~> (bit, simhash_code_ball) IS 'Hamming distance to the ball''s center as float8, the order of pgvector''s <~> (answered by a simhash index)';
COMMENT ON OPERATOR CLASS simhash_bit_ops USING simhash IS 'radius tests (code <@ simhash_code_ball(q, k)) and ORDER BY code <-> simhash_code_ball(q, 0) of bit(n) codes in a simhash index';
COMMENT ON OPERATOR FAMILY simhash_bit_ops USING simhash IS 'radius tests and ORDER BY distance of bit(n) codes in a simhash index';
