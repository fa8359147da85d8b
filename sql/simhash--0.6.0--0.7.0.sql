-- 0.6.0 -> 0.7.0: the deferred near-duplicate check, simhash_add_dedup(..., deferred => true):
-- the rows a transaction writes are checked when it commits, all together (the library's
-- simhash_dedup_trigger, fired AFTER the row is written, remembers them). simhash_add_dedup gains
-- the parameter; a new signature, so the function is dropped and created again.

DROP FUNCTION simhash_add_dedup(regclass, name, integer, text, text, name, double precision, integer);

-- Attaches the near-duplicate constraint to tbl.col: the row trigger, the statement trigger that
-- reports skipped rows (action 'skip'), and the report table (action 'report'; default name
-- <table>_near_duplicates, created if missing). Calling it again replaces the triggers. Returns the
-- row trigger's name.
-- With verify (a text column), a row within k is a near-duplicate only if
-- simhash_similarity(its text, the stored row's text, n) >= min_similarity.
-- With deferred, the rows are checked when the transaction commits, all together (an AFTER row
-- trigger remembers them; actions 'error' and 'skip', without verify).
CREATE FUNCTION simhash_add_dedup(tbl regclass, col name, k integer DEFAULT 3, action text DEFAULT 'error',
                                  report_table text DEFAULT NULL, verify name DEFAULT NULL,
                                  min_similarity double precision DEFAULT 0.7, n integer DEFAULT 3,
                                  deferred boolean DEFAULT false)
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
    citus_table boolean := false;
BEGIN
    -- The radius, and with verify the threshold and the shingle length (22023).
    PERFORM simhash_internal.simhash_dedup_check('simhash_add_dedup', k, verify, min_similarity, n);
    -- A Citus table's rows are in its shards, which a trigger here would not see (0A000).
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
            INTO citus_table USING tbl;
    END IF;
    IF citus_table THEN
        RAISE EXCEPTION 'the near-duplicate constraint is not supported on Citus table %', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its rows are in shards that a trigger on this table does not see.',
                  HINT = pg_catalog.format('Load the rows, then remove near-duplicates with simhash_clusters(%L, %L, %s) '
                                           '(see "Sharding with Citus" in the README).', tbl::text, col, k);
    END IF;
    IF action IS NULL OR action NOT IN ('error', 'skip', 'report') THEN
        RAISE EXCEPTION 'invalid action "%" for simhash_add_dedup', action
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The action is ''error'', ''skip'' or ''report''.';
    END IF;
    IF report_table IS NOT NULL AND action <> 'report' THEN
        RAISE EXCEPTION 'only action "report" takes a report table' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF deferred IS NULL THEN
        RAISE EXCEPTION 'deferred must be true or false, not NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF deferred AND (action = 'report' OR verify IS NOT NULL) THEN
        RAISE EXCEPTION 'the deferred near-duplicate check supports actions ''error'' and ''skip'' without verify'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use deferred => false (the check at each row) for action ''report'' or verify.';
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
    -- Deferred: AFTER the row is written, which gives the trigger the row's place, to check at commit.
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE TRIGGER %I %s INSERT OR UPDATE%s ON %s FOR EACH ROW
         EXECUTE FUNCTION @extschema@.simhash_dedup_trigger(%L, %L, %L%s%s)',
        row_trigger, CASE WHEN deferred THEN 'AFTER' ELSE 'BEFORE' END, update_of, tbl, col, k, action,
        CASE WHEN report_name IS NULL THEN '' ELSE ', ' || pg_catalog.quote_literal(report_name) END, verify_args);
    -- (The deferred check reports the rows it skips at commit.)
    IF action = 'skip' AND NOT deferred THEN
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

COMMENT ON FUNCTION simhash_add_dedup(regclass, name, integer, text, text, name, double precision, integer, boolean) IS 'attaches the near-duplicate constraint (triggers, report table) to a simhash64 column, optionally verified by the similarity of a text column, or checked at commit (deferred)';
COMMENT ON FUNCTION simhash_dedup_trigger() IS 'BEFORE ROW trigger (column, k, action [, report table]): refuses, skips or reports rows within k bits of a stored row; fired AFTER ROW, checks the rows at commit (deferred)';
