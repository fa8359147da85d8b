-- Every lookup through the simhash index of the table named by the psql variable `table` (columns
-- id and fp) against the same lookup on a sequential scan, for 20 query points (rows picked by
-- md5 of their id): fp <~> q <= k for k = 0..64 (against bit_count of the XOR) and ORDER BY
-- fp <-> q (every row's distance, nearest first, NULL rows last). Writes nothing (it runs on a
-- hot standby too); a NOTICE reports '<rows> rows, <n> lookups differ'.
-- Used by tests/crash/index_am.sh and tests/replica/index_am.sh: psql -v table=NAME -f this file.
SET jit = off;
SELECT set_config('simhash_test.table', :'table', false) IS NOT NULL AS table_set;
DO $$
DECLARE
    tbl text := current_setting('simhash_test.table');
    q record;
    k int;
    got bigint[];
    want bigint[];
    got_order int[];
    want_order int[];
    rows bigint;
    differ int := 0;
BEGIN
    FOR q IN EXECUTE format('SELECT fp FROM %I WHERE fp IS NOT NULL ORDER BY md5(id::text) LIMIT 20', tbl) LOOP
        SET LOCAL enable_seqscan = off;
        EXECUTE format('SELECT array_agg(d) FROM (SELECT fp <-> %L AS d FROM %I ORDER BY fp <-> %L) o', q.fp, tbl, q.fp)
            INTO got_order;
        RESET enable_seqscan;
        EXECUTE format('SELECT array_agg(fp <-> %L ORDER BY fp <-> %L) FROM %I', q.fp, q.fp, tbl) INTO want_order;
        IF got_order IS DISTINCT FROM want_order THEN differ := differ + 1; END IF;
        FOR k IN 0..64 LOOP
            SET LOCAL enable_seqscan = off;
            EXECUTE format('SELECT array_agg(id ORDER BY id) FROM %I WHERE fp <~> %L <= %s', tbl, q.fp, k) INTO got;
            RESET enable_seqscan;
            EXECUTE format('SELECT array_agg(id ORDER BY id) FROM %I WHERE bit_count((fp::bigint # %L::simhash64::bigint)::bit(64)) <= %s',
                           tbl, q.fp, k) INTO want;
            IF got IS DISTINCT FROM want THEN differ := differ + 1; END IF;
        END LOOP;
    END LOOP;
    EXECUTE format('SELECT count(*) FROM %I', tbl) INTO rows;
    RAISE NOTICE '% rows, % lookups differ', rows, differ;
END $$;
