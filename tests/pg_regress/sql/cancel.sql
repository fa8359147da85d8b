-- A cancel or a statement timeout stops every function that goes through a long text (issue 35):
-- each call below takes 1 to 5 s on a text of 130 MB, and the 300 ms timeout must stop it inside
-- the function (57014).
--
-- A timeout that a function ignores still ends the statement, at the next check after the
-- function returns, with the same error: so the calls are made where PostgreSQL checks nothing
-- between the function's return and a NOTICE, as the argument of a PL/pgSQL RAISE (a simple
-- expression, evaluated without the executor). A function that does not check runs to the end
-- and prints "NOTICE: ... ran to the end" before the error; one that checks prints only the error.
-- (The text is built in the same statement, in about 100 ms; a second one would take the time
-- out of the function, and PL/pgSQL checks before each statement.) No time is measured here.
-- Needs a UTF8 database (the Chinese text); elsewhere the whole test is skipped (cancel_1.out).
SELECT getdatabaseencoding() <> 'UTF8' AS skip_test \gset
\if :skip_test
\quit
\endif
\set VERBOSITY sqlstate
-- (the calls on two such texts would need more memory than simhash.max_text_memory allows by
-- default, and be refused at once: memory.sql)
SET simhash.max_text_memory = '8GB';

-- 130 bytes that take the slowest paths of folding: NFKC (the ligature, the combining accent),
-- capital sigma's lower case, and Traditional characters and Taiwan words (two conversion steps).
CREATE FUNCTION pg_temp.long_text() RETURNS text LANGUAGE sql AS
$$ SELECT repeat('Café ﬁnal ΣΑΣ 資料庫的軟體開發，程式。 e' || chr(769) || ' PostgreSQL database 海量网页去重是搜索引擎的基础工作 ', 1000000) $$;

SET statement_timeout = '300ms';
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash ran to the end: %', simhash(t) IS NOT NULL; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash(text, top_n) ran to the end: %', simhash(t, 1000) IS NOT NULL; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash_ngrams ran to the end: %', simhash_ngrams(t) IS NOT NULL; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'minhash64 ran to the end: %', minhash64(t) IS NOT NULL; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'minhash64(text, 4, 2) ran to the end: %', minhash64(t, 4, 2) IS NOT NULL; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash_fold ran to the end: %', octet_length(simhash_fold(t)) > 0; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash_similarity ran to the end: %', simhash_similarity(t, t) > 0; END $$;
DO $$ DECLARE t text := pg_temp.long_text();
BEGIN RAISE NOTICE 'simhash_containment ran to the end: %', simhash_containment('PostgreSQL', t) > 0; END $$;
-- 16 million custom features, built in the call's arguments (the timeout comes while they are
-- built, and nothing checks before the function; n is a variable, so that the planner does not
-- compute the call as a constant).
DO $$ DECLARE n integer := 16000000;
BEGIN RAISE NOTICE 'simhash(text[], float8[]) ran to the end: %',
    simhash(array_fill('ab'::text, ARRAY[n]), array_fill(1.0::float8, ARRAY[n])) IS NOT NULL; END $$;
-- A set-returning function runs in the executor, which checks before the next row: this one does
-- not tell whether the function checks, only that the call stops (simhash_features goes through
-- the same code as simhash, above). The aggregate's rows are the executor's too.
SELECT count(*) FROM simhash_features(pg_temp.long_text());
SELECT simhash_agg('ab', 1.0) FROM generate_series(1, 100000000);
-- The code of an embedding whose matrix is beyond the cache (4,096 planes of 65,536 dimensions,
-- generated for the vector: about 5 s).
DO $$ DECLARE v real[] := array_fill(1::real, ARRAY[65536]);
BEGIN RAISE NOTICE 'simhash_bits ran to the end: %', simhash_bits(v, 4096) IS NOT NULL; END $$;
RESET statement_timeout;

-- An interrupted call leaves nothing behind: the next calls give the golden fingerprints.
SELECT simhash('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。'),
       minhash64('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。', 4, 2),
       simhash_similarity('資料庫擴充套件', '数据库扩展套件');
SELECT simhash('{1,2,3}'::real[]);
