-- 0.5.0 -> 0.6.0: simhash_pairs and simhash_clusters of a Citus table find the pairs on the workers,
-- through two new functions (the table forms' C code changes with the library, not their SQL).

-- Pairs spread over machines (src/pairs/spread.rs): a fingerprint's keys for pairs within k, and
-- the pairs within k among the rows of one key that are reported under it. simhash_pairs and
-- simhash_clusters of a Citus table run them on the workers; they are plain functions too.
CREATE FUNCTION simhash_pair_keys(fp simhash64, k integer) RETURNS integer[]
    AS 'MODULE_PATHNAME', 'simhash_pair_keys_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION simhash_key_pairs(key integer, ids bigint[], fps simhash64[], k integer, links_only boolean DEFAULT false)
RETURNS TABLE (id_a bigint, id_b bigint, distance integer)
    AS 'MODULE_PATHNAME', 'simhash_key_pairs_wrapper' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION simhash_pair_keys(simhash64, integer) IS 'the keys of a fingerprint for pairs within k: rows sharing a key are paired by simhash_key_pairs, and every pair within k comes out under exactly one key';
COMMENT ON FUNCTION simhash_key_pairs(integer, bigint[], simhash64[], integer, boolean) IS 'the pairs within k among the (id, fingerprint) rows of one key of simhash_pair_keys that are reported under that key (with links_only, enough of them to form the same groups)';
COMMENT ON FUNCTION simhash_pairs(regclass, name, integer, name) IS 'all pairs within Hamming distance k in a table column, read through its simhash index where it has one, found on the workers for a Citus table';
COMMENT ON FUNCTION simhash_clusters(regclass, name, integer, name) IS 'each row of a table that has a near-duplicate, with the smallest id of its group, read through its simhash index where it has one, found on the workers for a Citus table';

-- A table's column: on a Citus table distributed by id_column, the pairs are found on the workers
-- (simhash_pairs of the table), and their texts are joined in and compared on the workers, in two
-- work tables co-located with the table (created in its schema and dropped before returning), so
-- that only verified pairs reach the coordinator. Elsewhere as the query form.
CREATE OR REPLACE FUNCTION simhash_pairs(tbl regclass, fp_column name, k integer, text_column name,
                              min_similarity double precision, id_column name DEFAULT 'id', n integer DEFAULT 3)
RETURNS TABLE (id_a bigint, id_b bigint, distance integer, similarity double precision)
LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
    by_id boolean := false;
    schema name;
    rel name;
    id_type text;
    work text;
    pairs text;
    texts text;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL
       AND min_similarity BETWEEN 0 AND 1 AND n BETWEEN 1 AND 32 THEN
        -- (pg_dist_partition, column_to_column_name and citus_is_coordinator are Citus'; named
        -- only where it is installed; the arguments' errors are the query form's)
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1
                                AND partmethod OPERATOR(pg_catalog.=) ''h''
                                AND pg_catalog.column_to_column_name(logicalrelid, partkey) OPERATOR(pg_catalog.=) $2)'
            INTO by_id USING tbl, id_column;
    END IF;
    SELECT ns.nspname, c.relname INTO schema, rel
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE c.oid OPERATOR(pg_catalog.=) tbl;
    IF by_id AND (k > 11 OR pg_catalog.current_setting('transaction_read_only')::boolean
                  OR NOT pg_catalog.has_schema_privilege(schema, 'CREATE')) THEN
        RAISE NOTICE 'simhash: the verified pairs of Citus table % are found on the coordinator, with all its texts in memory', tbl
            USING DETAIL = 'The workers verify pairs within at most 11, in a transaction that may write, '
                           'with CREATE on the table''s schema for two work tables.';
        by_id := false;
    ELSIF by_id THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO by_id;
        IF NOT by_id THEN
            RAISE NOTICE 'simhash: the verified pairs of Citus table % are found on this node, with all its texts in memory', tbl
                USING DETAIL = 'The workers verify pairs where the query runs on the coordinator.';
        END IF;
    END IF;
    IF NOT by_id THEN
        RETURN QUERY SELECT * FROM @extschema@.simhash_pairs(
            pg_catalog.format('SELECT %I, %I, %I FROM %s', id_column, fp_column, text_column, tbl), k, min_similarity, n);
        RETURN;
    END IF;
    SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO id_type
    FROM pg_catalog.pg_attribute a WHERE a.attrelid = tbl AND a.attname = id_column;
    work := 'simhash_verify_' || pg_catalog.pg_backend_pid() || '_' || (pg_catalog.random() OPERATOR(pg_catalog.*) 1e9)::bigint;
    pairs := pg_catalog.format('%I.%I', schema, work || '_a');
    texts := pg_catalog.format('%I.%I', schema, work || '_b');
    -- The pairs, with the shard of their first row ...
    EXECUTE pg_catalog.format('CREATE UNLOGGED TABLE %s (id_a %s NOT NULL, id_b %s NOT NULL, distance integer NOT NULL)',
                              pairs, id_type, id_type);
    PERFORM pg_catalog.create_distributed_table(pairs, 'id_a', colocate_with => pg_catalog.format('%I.%I', schema, rel));
    EXECUTE pg_catalog.format('INSERT INTO %s SELECT p.id_a, p.id_b, p.distance FROM @extschema@.simhash_pairs(%L::pg_catalog.regclass, %L, %s, %L) p',
                              pairs, tbl, fp_column, k, id_column);
    -- ... with the first row's text, moved to the shard of the second ...
    EXECUTE pg_catalog.format('CREATE UNLOGGED TABLE %s (id_b %s NOT NULL, id_a %s NOT NULL, distance integer NOT NULL, body_a text)',
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

-- A table's column: the groups of its verified pairs (on the workers for a Citus table, as above).
CREATE OR REPLACE FUNCTION simhash_clusters(tbl regclass, fp_column name, k integer, text_column name,
                                 min_similarity double precision, id_column name DEFAULT 'id', n integer DEFAULT 3)
RETURNS TABLE (id bigint, representative bigint) LANGUAGE sql VOLATILE STRICT SET extra_float_digits = 3 AS $$
    SELECT * FROM @extschema@.simhash_clusters_from_pairs(pg_catalog.format(
        'SELECT id_a, id_b FROM @extschema@.simhash_pairs(%L::pg_catalog.regclass, %L, %s, %L, %L::pg_catalog.float8, %L, %s)',
        tbl, fp_column, k, text_column, min_similarity, id_column, n))
$$;
