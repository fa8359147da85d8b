-- A simhash index of bit codes built beyond maintenance_work_mem: the rows go to sorts that spill
-- to disk (a NOTICE), and the index written is the one a build in memory writes, page for page;
-- its radius lookups and nearest rows equal a sequential scan of bit_count(code # q). The segments
-- are made in memory where a segment's entries fit (8 bytes a row), else through sorts too (the
-- last table; the DEBUG line says which).
SET jit = off;
CREATE FUNCTION pg_temp.code256(seed text) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT ('x' || md5(seed || 'a') || md5(seed || 'b'))::bit(256) $$;
-- n bits set (or fewer, where two meet) at places from a seed.
CREATE FUNCTION pg_temp.flips(seed int, n int) RETURNS bit(256) LANGUAGE sql IMMUTABLE
    AS $$ SELECT coalesce(bit_or(set_bit(repeat('0', 256)::bit(256), hashint4(seed * 64 + j) & 255, 1)),
                          repeat('0', 256)::bit(256)) FROM generate_series(1, n) j $$;
-- The pages of index b that differ from index a's (a's length): every byte after the page header's
-- LSN and checksum, but the metapage's (its build stamp).
CREATE FUNCTION pg_temp.pages_differ(a regclass, b regclass) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE substr(pg_read_binary_file(pg_relation_filepath(a), n * 8192, 8192), 11)
                               <> substr(pg_read_binary_file(pg_relation_filepath(b), n * 8192, 8192), 11))
    FROM generate_series(1, pg_relation_size(a) / 8192 - 1) n $$;
-- 30,000 rows: groups of 10, two exact copies of the group's code and near copies 4 to 32 bits
-- from it, and 30 NULL codes.
CREATE TABLE cbig (i int, code bit(256));
INSERT INTO cbig SELECT i, CASE WHEN i % 1000 <> 999 THEN pg_temp.code256((i / 10)::text) # pg_temp.flips(i, greatest(i % 10 - 1, 0) * 4) END
FROM generate_series(0, 29999) i;
CREATE TABLE q (n int, q bit(256));
INSERT INTO q SELECT 1, code FROM cbig WHERE i = 10;
INSERT INTO q SELECT 2, code FROM cbig WHERE i = 12341;
INSERT INTO q SELECT 3, code # pg_temp.flips(-1, 3) FROM cbig WHERE i = 29990;
INSERT INTO q VALUES (4, pg_temp.code256('no row'));

-- 30,000 codes of 256 bits take 1.5 MB in memory: within 1 MB the build sorts on disk.
SET maintenance_work_mem = '1MB';
SET client_min_messages = debug1;
CREATE INDEX cbig_spilled ON cbig USING simhash (code);
RESET client_min_messages;
RESET maintenance_work_mem;
CREATE INDEX cbig_in_memory ON cbig USING simhash (code);
SELECT simhash_index_check('cbig_spilled') AS spilled, simhash_index_check('cbig_in_memory') AS in_memory;
-- The same pages (pages_differ).
CHECKPOINT;
SELECT pg_relation_size('cbig_spilled') / 8192 AS pages,
       pg_relation_size('cbig_spilled') = pg_relation_size('cbig_in_memory') AS same_size,
       pg_temp.pages_differ('cbig_spilled', 'cbig_in_memory');

-- Radius lookups (k 0, 8, 16, 40) and the 10 nearest rows (k empty) through the index, against
-- brute force.
-- (through_index: the plan reads the index)
CREATE FUNCTION pg_temp.through_index(query text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF line LIKE '%Index%cbig_%' THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;
CREATE FUNCTION pg_temp.compare() RETURNS TABLE (n int, k int, matches int, same boolean, through_index boolean)
LANGUAGE plpgsql AS $$
DECLARE a int[]; b int[]; ta tid[]; tb tid[]; through text;
BEGIN
    FOR n IN SELECT q.n FROM q ORDER BY 1 LOOP
        FOREACH k IN ARRAY ARRAY[0, 8, 16, 40] LOOP
            through := format('SELECT i FROM cbig WHERE code <@ simhash_code_ball((SELECT q FROM q WHERE n = %s), %s)', n, k);
            SET LOCAL enable_seqscan = off;
            through_index := pg_temp.through_index(through);
            EXECUTE format('SELECT array(%s ORDER BY i)', through) INTO a;
            RESET enable_seqscan;
            EXECUTE format('SELECT array(SELECT i FROM cbig WHERE bit_count(code # (SELECT q FROM q WHERE n = %s)) <= %s ORDER BY i)', n, k) INTO b;
            matches := cardinality(a);
            same := a = b;
            RETURN NEXT;
        END LOOP;
        through := format('SELECT ctid FROM cbig ORDER BY code <-> simhash_code_ball((SELECT q FROM q WHERE n = %s), 0) LIMIT 10', n);
        SET LOCAL enable_seqscan = off;
        through_index := pg_temp.through_index(through);
        EXECUTE format('SELECT array(%s)', through) INTO ta;
        RESET enable_seqscan;
        EXECUTE format('SELECT array(SELECT ctid FROM cbig ORDER BY bit_count(code # (SELECT q FROM q WHERE n = %s)) NULLS LAST, ctid LIMIT 10)', n) INTO tb;
        k := NULL;
        matches := cardinality(ta);
        same := ta = tb;
        RETURN NEXT;
    END LOOP;
END $$;
ANALYZE cbig;
DROP INDEX cbig_in_memory;
SELECT * FROM pg_temp.compare();
-- Through the index built in memory: the same.
CREATE INDEX cbig_in_memory ON cbig USING simhash (code);
DROP INDEX cbig_spilled;
SELECT * FROM pg_temp.compare();

-- Codes stored out of line (TOAST), in memory and on disk: the build detoasts each one (and frees
-- the copy), the index the same either way and its lookups those of a sequential scan.
CREATE TABLE ctoast (i int, code bit(4096), c2 bit(4096), c3 bit(4096), c4 bit(4096));
-- (a row too long for a page's quarter: its one code that may go out of line does, uncompressed)
ALTER TABLE ctoast ALTER code SET STORAGE EXTERNAL, ALTER c2 SET STORAGE PLAIN,
    ALTER c3 SET STORAGE PLAIN, ALTER c4 SET STORAGE PLAIN;
INSERT INTO ctoast SELECT i, code, code, code, code
FROM (SELECT i, ('x' || repeat(md5((i / 2)::text), 32))::bit(4096) AS code FROM generate_series(1, 1500) i) s;
SELECT pg_relation_size(reltoastrelid) >= 1500 * 516 AS out_of_line FROM pg_class WHERE oid = 'ctoast'::regclass;
SET maintenance_work_mem = '1MB';
CREATE INDEX ctoast_spilled ON ctoast USING simhash (code);
RESET maintenance_work_mem;
CREATE INDEX ctoast_in_memory ON ctoast USING simhash (code);
SELECT simhash_index_check('ctoast_spilled') AS spilled, simhash_index_check('ctoast_in_memory') AS in_memory;
CHECKPOINT;
SELECT pg_temp.pages_differ('ctoast_spilled', 'ctoast_in_memory');
DROP INDEX ctoast_in_memory;
SET enable_seqscan = off;
SELECT array(SELECT i FROM ctoast WHERE code <@ simhash_code_ball((SELECT code FROM ctoast WHERE i = 700), 0) ORDER BY i)
    AS through_index;
RESET enable_seqscan;
SELECT array(SELECT i FROM ctoast WHERE code = (SELECT code FROM ctoast WHERE i = 700) ORDER BY i) AS sequential;

-- 8,000 codes of 1,000 bits (63 segments of 16 bits): within 1 MB the codes are sorted on disk
-- and the segments made in memory 16 at a time, the last pass of 15; the same pages again.
CREATE TABLE c1000 (i int, code bit(1000));
INSERT INTO c1000 SELECT i, (SELECT ('x' || string_agg(md5((i / 2) || '/' || j), ''))::bit(1024)::bit(1000)
                             FROM generate_series(1, 8) j)
FROM generate_series(1, 8000) i;
SET maintenance_work_mem = '1MB';
SET client_min_messages = debug1;
CREATE INDEX c1000_spilled ON c1000 USING simhash (code);
RESET client_min_messages;
RESET maintenance_work_mem;
CREATE INDEX c1000_in_memory ON c1000 USING simhash (code);
SELECT simhash_index_check('c1000_spilled') AS spilled, simhash_index_check('c1000_in_memory') AS in_memory;
CHECKPOINT;
SELECT pg_temp.pages_differ('c1000_spilled', 'c1000_in_memory');

-- 100,000 codes of 64 bits: one segment's entries (8 bytes a row) beyond 1 MB, so the segments too
-- go through sorts on disk; the same pages again.
CREATE TABLE c64 (i int, code bit(64));
INSERT INTO c64 SELECT i, ('x' || substr(md5((i / 3)::text), 1, 16))::bit(64) FROM generate_series(1, 100000) i;
SET maintenance_work_mem = '1MB';
SET client_min_messages = debug1;
CREATE INDEX c64_spilled ON c64 USING simhash (code);
RESET client_min_messages;
RESET maintenance_work_mem;
CREATE INDEX c64_in_memory ON c64 USING simhash (code);
SELECT simhash_index_check('c64_spilled') AS spilled, simhash_index_check('c64_in_memory') AS in_memory;
CHECKPOINT;
SELECT pg_temp.pages_differ('c64_spilled', 'c64_in_memory');
