-- The Security page (docs/security.md), statement by statement: who may attach the near-duplicate
-- constraint, whose report table it writes and as whom, what its error tells a role that may not
-- read the stored rows, and that no function crashes on a relation that does not exist.
SET client_min_messages = warning;
DROP ROLE IF EXISTS simhash_sec_owner;
DROP ROLE IF EXISTS simhash_sec_other;
RESET client_min_messages;
CREATE ROLE simhash_sec_owner;
CREATE ROLE simhash_sec_other;
GRANT CREATE ON SCHEMA public TO simhash_sec_owner, simhash_sec_other;
SET ROLE simhash_sec_owner;
CREATE TABLE sec_docs (id int PRIMARY KEY, body text, fp simhash64);
INSERT INTO sec_docs VALUES (1, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
SELECT count(*) FROM simhash_create_indexes('sec_docs', 'fp', 'simhash');
RESET ROLE;

-- Attaching the constraint needs ownership of the table: the TRIGGER privilege is not enough.
-- So do the indexes (CREATE INDEX), and checking an index needs a superuser (or a grant).
GRANT TRIGGER, INSERT ON sec_docs TO simhash_sec_other;
SET ROLE simhash_sec_other;
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('sec_docs', 'fp', 3);
SELECT * FROM simhash_create_indexes('sec_docs', 'fp');
SELECT simhash_index_check('sec_docs_fp_simhash');
\set VERBOSITY default

-- A report table that another role made first is refused: the trigger writes the report as the
-- table's owner, and that role's triggers on it would run with the owner's rights.
CREATE TABLE sec_docs_near_duplicates (relation regclass, trigger_name name, new_key text, existing_key text,
                                       distance integer, new_fingerprint simhash64, reported_at timestamptz,
                                       similarity double precision);
GRANT ALL ON sec_docs_near_duplicates TO PUBLIC;
RESET ROLE;
SET ROLE simhash_sec_owner;
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('sec_docs', 'fp', 3, 'report');
\set VERBOSITY default
-- A new one belongs to the table's owner, also when a superuser attaches the constraint.
RESET ROLE;
SELECT simhash_add_dedup('sec_docs', 'fp', 3, 'report', report_table => 'sec_reports');
SELECT relowner::regrole AS report_table_owner FROM pg_class WHERE oid = 'sec_reports'::regclass;
-- The report is written as the owner: the inserting role needs no privilege on the report table.
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (2, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
RESET ROLE;
SELECT new_key, existing_key, distance FROM sec_reports;
-- A report table given away afterwards is not written (42501).
ALTER TABLE sec_reports OWNER TO simhash_sec_other;
SET ROLE simhash_sec_other;
\set VERBOSITY sqlstate
INSERT INTO sec_docs VALUES (3, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
\set VERBOSITY default
RESET ROLE;
-- A temporary report table for a permanent table (it would exist in one session only), and one
-- the owner may not write, are refused.
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('sec_docs', 'fp', 3, 'report', report_table => 'pg_temp.sec_temp_reports');
CREATE SCHEMA sec_closed;
SELECT simhash_add_dedup('sec_docs', 'fp', 3, 'report', report_table => 'sec_closed.sec_reports');
\set VERBOSITY default
DROP SCHEMA sec_closed CASCADE;
DROP TABLE sec_reports, sec_docs_near_duplicates;
DELETE FROM sec_docs WHERE id <> 1;

-- The error of the constraint tells a role that may not read the table (no SELECT, or row-level
-- security) no more than a unique violation would: no key, no distance, no similarity.
SELECT simhash_add_dedup('sec_docs', 'fp', 11, 'error', verify => 'body', min_similarity => 0.5);
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (4, 'the quarterly numbers are up by five percent', minhash64('the quarterly numbers are up by five percent'));
RESET ROLE;
GRANT SELECT ON sec_docs TO simhash_sec_other;
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (4, 'the quarterly numbers are up by five percent', minhash64('the quarterly numbers are up by five percent'));
RESET ROLE;
ALTER TABLE sec_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY sec_own_rows ON sec_docs TO simhash_sec_other USING (id >= 100) WITH CHECK (true);
SET ROLE simhash_sec_other;
SELECT count(*) AS rows_the_tenant_sees FROM sec_docs;
INSERT INTO sec_docs VALUES (4, 'the quarterly numbers are up by five percent', minhash64('the quarterly numbers are up by five percent'));
RESET ROLE;
-- The deferred check too (at commit), and verified: no similarity under the policy either; with
-- the policy gone, the key, distance and similarity.
SELECT simhash_add_dedup('sec_docs', 'fp', 11, 'error', deferred => true);
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (5, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
RESET ROLE;
SELECT simhash_add_dedup('sec_docs', 'fp', 11, 'error', verify => 'body', min_similarity => 0.5, deferred => true);
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (5, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
RESET ROLE;
ALTER TABLE sec_docs DISABLE ROW LEVEL SECURITY;
SET ROLE simhash_sec_other;
INSERT INTO sec_docs VALUES (5, 'the quarterly numbers are up by four percent', minhash64('the quarterly numbers are up by four percent'));
RESET ROLE;
DROP POLICY sec_own_rows ON sec_docs;

-- Lookups and nearest rows honour row-level security and column privileges, through every
-- index route: the segment B-trees (radius scan), the simhash index (radius and ORDER BY), GIN.
CREATE TABLE sec_rls (id int PRIMARY KEY, fp simhash64, fp2 simhash64, fp3 simhash64, secret text);
INSERT INTO sec_rls SELECT g, fp, fp, fp, 'hidden' FROM (VALUES (1, '0000000000000000'::simhash64),
    (2, '0000000000000001'), (3, '0000000000000003'), (4, 'ffffffffffffffff')) v(g, fp);
SELECT count(*) FROM simhash_create_indexes('sec_rls', 'fp');
SELECT count(*) FROM simhash_create_indexes('sec_rls', 'fp2', 'simhash');
SELECT count(*) FROM simhash_create_indexes('sec_rls', 'fp3', 'gin');
ALTER TABLE sec_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY sec_not_two ON sec_rls TO simhash_sec_other USING (id <> 2);
GRANT SELECT (id, fp, fp2, fp3) ON sec_rls TO simhash_sec_other;
SET ROLE simhash_sec_other;
SET enable_seqscan = off;
SELECT id FROM sec_rls WHERE fp <~> '0000000000000000' <= 3 ORDER BY id;
SELECT id FROM sec_rls WHERE fp2 <~> '0000000000000000' <= 3 ORDER BY id;
SELECT id FROM sec_rls WHERE fp3 <~> '0000000000000000' <= 3 ORDER BY id;
SELECT id FROM sec_rls ORDER BY fp2 <-> '0000000000000000' LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM sec_rls WHERE fp <~> '0000000000000000' <= 3;
EXPLAIN (COSTS OFF) SELECT id FROM sec_rls WHERE fp2 <~> '0000000000000000' <= 3;
EXPLAIN (COSTS OFF) SELECT id FROM sec_rls ORDER BY fp2 <-> '0000000000000000' LIMIT 3;
\set VERBOSITY sqlstate
SELECT id, secret FROM sec_rls WHERE fp <~> '0000000000000000' <= 3;
\set VERBOSITY default
RESET enable_seqscan;
RESET ROLE;
DROP TABLE sec_rls;

-- What a role with CREATE on the extension's schema (here public) plants there does not run in
-- another role's statements on a column of bit codes: the constraint's lookup and the pairs name
-- simhash_hamming(bit, bit), simhash_code_ball(bit, integer) and <@ with the column cast to bit
-- (bit varying, a domain), not as its own type, which a function declared for it would match first.
CREATE DOMAIN sec_code AS bit(8);
CREATE TABLE sec_codes (id int PRIMARY KEY, code bit varying, dcode sec_code);
CREATE INDEX ON sec_codes USING simhash (code);
CREATE INDEX ON sec_codes USING simhash (dcode);
ALTER TABLE sec_codes OWNER TO simhash_sec_owner;
SELECT simhash_add_dedup('sec_codes', 'code', 1) IS NOT NULL AS attached;
CREATE TABLE sec_planted_calls (planted text, called_as name);
GRANT INSERT ON sec_planted_calls TO PUBLIC;
SET ROLE simhash_sec_other;
CREATE FUNCTION public.simhash_hamming(a bit varying, b bit) RETURNS simhash_distance LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'planted simhash_hamming(bit varying, bit) runs as %', current_user;
    INSERT INTO public.sec_planted_calls VALUES ('simhash_hamming(bit varying, bit)', current_user);
    RETURN 0;
END $$;
CREATE FUNCTION public.simhash_hamming(a sec_code, b bit) RETURNS simhash_distance LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'planted simhash_hamming(sec_code, bit) runs as %', current_user;
    INSERT INTO public.sec_planted_calls VALUES ('simhash_hamming(sec_code, bit)', current_user);
    RETURN 0;
END $$;
CREATE FUNCTION public.simhash_hamming(a sec_code, b sec_code) RETURNS simhash_distance LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'planted simhash_hamming(sec_code, sec_code) runs as %', current_user;
    INSERT INTO public.sec_planted_calls VALUES ('simhash_hamming(sec_code, sec_code)', current_user);
    RETURN 0;
END $$;
CREATE FUNCTION public.simhash_code_ball(center sec_code, radius integer) RETURNS simhash_code_ball LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'planted simhash_code_ball(sec_code, integer) runs as %', current_user;
    INSERT INTO public.sec_planted_calls VALUES ('simhash_code_ball(sec_code, integer)', current_user);
    RETURN ROW(center, 8)::simhash_code_ball;
END $$;
CREATE FUNCTION public.sec_planted_within(code sec_code, ball simhash_code_ball) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'planted <@ (sec_code, simhash_code_ball) runs as %', current_user;
    INSERT INTO public.sec_planted_calls VALUES ('<@ (sec_code, simhash_code_ball)', current_user);
    RETURN true;
END $$;
CREATE OPERATOR public.<@ (LEFTARG = sec_code, RIGHTARG = simhash_code_ball, FUNCTION = public.sec_planted_within);
RESET ROLE;
-- The lookups still use the columns' indexes.
SET enable_seqscan = off;
SET plan_cache_mode = force_generic_plan;
SELECT simhash_dedup_lookup('sec_codes', 'code', 1) AS lookup \gset
PREPARE sec_lookup(bit, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE sec_lookup(B'1010', '(0,0)');
SELECT simhash_dedup_lookup('sec_codes', 'dcode', 1) AS lookup \gset
PREPARE sec_lookup_d(bit, tid) AS :lookup;
EXPLAIN (COSTS OFF) EXECUTE sec_lookup_d(B'10101010', '(0,0)');
DEALLOCATE sec_lookup;
DEALLOCATE sec_lookup_d;
RESET plan_cache_mode;
RESET enable_seqscan;
-- The table's owner inserts (bit varying); a duplicate is refused as before (23505).
SET ROLE simhash_sec_owner;
INSERT INTO sec_codes VALUES (1, B'10101010', B'10101010'), (2, B'01010101', B'01010101');
\set VERBOSITY sqlstate
INSERT INTO sec_codes VALUES (3, B'10101011', B'11110000');
\set VERBOSITY default
RESET ROLE;
-- The constraint on the domain's column, and its pairs.
SELECT simhash_add_dedup('sec_codes', 'dcode', 1) IS NOT NULL AS attached;
SET ROLE simhash_sec_owner;
INSERT INTO sec_codes VALUES (4, B'11110000', B'11110000');
\set VERBOSITY sqlstate
INSERT INTO sec_codes VALUES (5, B'00001111', B'11110001');
\set VERBOSITY default
SELECT * FROM simhash_pairs('sec_codes', 'dcode', 8) ORDER BY 1, 2;
SELECT * FROM simhash_clusters('sec_codes', 'dcode', 4) ORDER BY 1;
RESET ROLE;
SELECT count(*) AS planted_calls FROM sec_planted_calls;
DROP TABLE sec_codes, sec_planted_calls;
DROP OPERATOR public.<@ (sec_code, simhash_code_ball);
DROP FUNCTION public.sec_planted_within(sec_code, simhash_code_ball);
DROP FUNCTION public.simhash_code_ball(sec_code, integer);
DROP FUNCTION public.simhash_hamming(bit varying, bit);
DROP FUNCTION public.simhash_hamming(sec_code, bit);
DROP FUNCTION public.simhash_hamming(sec_code, sec_code);
DROP DOMAIN sec_code;

-- A key whose cast to text gives NULL (a type's own cast may): the stored row goes unnamed.
CREATE TYPE sec_mood AS ENUM ('calm', 'tense');
CREATE FUNCTION sec_mood_text(sec_mood) RETURNS text LANGUAGE sql AS 'SELECT NULL::text';
CREATE CAST (sec_mood AS text) WITH FUNCTION sec_mood_text(sec_mood);
CREATE TABLE sec_moods (id sec_mood PRIMARY KEY, fp simhash64);
CREATE INDEX ON sec_moods USING simhash (fp);
SELECT simhash_add_dedup('sec_moods', 'fp', 3) IS NOT NULL AS attached;
INSERT INTO sec_moods VALUES ('calm', '0000000000000000');
INSERT INTO sec_moods VALUES ('tense', '0000000000000001');
DROP TABLE sec_moods;
DROP CAST (sec_mood AS text);
DROP FUNCTION sec_mood_text(sec_mood);
DROP TYPE sec_mood;

-- A relation that does not exist (a dropped table's OID is still a valid regclass): 42P01 from
-- every function that takes one, and the backend lives on.
CREATE TABLE sec_gone (id int, fp simhash64, body text);
SELECT 'sec_gone'::regclass::oid AS gone \gset
DROP TABLE sec_gone;
\set VERBOSITY sqlstate
SELECT simhash_indexed(:gone, 'fp');
SELECT simhash_indexed(999999::regclass, 'fp');
SELECT * FROM simhash_index_statements(:gone, 'fp');
SELECT * FROM simhash_create_indexes(:gone, 'fp');
SELECT simhash_add_dedup(:gone, 'fp');
SELECT simhash_dedup_lookup(:gone, 'fp', 3);
SELECT * FROM simhash_pairs(:gone, 'fp', 3);
SELECT * FROM simhash_clusters(:gone, 'fp', 3);
SELECT * FROM simhash_pairs(:gone, 'fp', 3, 'body', 0.5);
SELECT * FROM simhash_clusters(:gone, 'fp', 3, 'body', 0.5);
SELECT simhash_index_check(:gone);
\set VERBOSITY default
SELECT 'still connected' AS backend;

-- A table dropped between the rows `skip` dropped and the notice that counts them (here the
-- table's own notice trigger is gone, so another table's notice reports them).
CREATE TABLE sec_skip_a (id int, fp simhash64);
CREATE TABLE sec_skip_b (id int, fp simhash64);
CREATE INDEX ON sec_skip_a USING simhash (fp);
CREATE INDEX ON sec_skip_b USING simhash (fp);
SELECT simhash_add_dedup('sec_skip_a', 'fp', 3, 'skip') IS NOT NULL, simhash_add_dedup('sec_skip_b', 'fp', 3, 'skip') IS NOT NULL;
BEGIN;
DROP TRIGGER sec_skip_a_fp_dedup_notice ON sec_skip_a;
INSERT INTO sec_skip_a VALUES (1, '0000000000000000'), (2, '0000000000000000');
DROP TABLE sec_skip_a;
INSERT INTO sec_skip_b VALUES (1, '0000000000000000');
COMMIT;
DROP TABLE sec_skip_b;

DROP TABLE sec_docs;
REVOKE CREATE ON SCHEMA public FROM simhash_sec_owner, simhash_sec_other;
DROP ROLE simhash_sec_owner;
DROP ROLE simhash_sec_other;
