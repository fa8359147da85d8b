-- A shared database: a role without privileges plants, in a schema on a superuser's search_path
-- (public, where it may create), operators and functions that match the argument types of what the
-- extension's SQL compares and calls more exactly than pg_catalog's own, and a superuser then uses
-- every entry point of the extension and updates it from every released version. Nothing planted
-- may run (the class of CVE-2018-1058 and CVE-2020-14350): each planted object records the role that
-- ran it and tries to make the planting role a superuser.
SET client_min_messages = warning;
DROP DATABASE IF EXISTS simhash_regress_hostile;
DROP ROLE IF EXISTS simhash_hostile;
RESET client_min_messages;
SELECT current_database() AS regress_db \gset
CREATE DATABASE simhash_regress_hostile;
CREATE ROLE simhash_hostile LOGIN;

\c simhash_regress_hostile
GRANT CREATE ON SCHEMA public TO simhash_hostile;
SET ROLE simhash_hostile;
CREATE TABLE public.planted_ran (what text, by_role name);
GRANT INSERT ON public.planted_ran TO PUBLIC;
-- (SECURITY INVOKER: it runs with the rights of whoever is fooled into calling it; the WARNING
-- shows in the output even where the caller's statement fails and its transaction rolls back)
CREATE FUNCTION public.planted(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'planted % ran as %', what, current_user;
    INSERT INTO public.planted_ran VALUES (what, current_user);
    BEGIN
        EXECUTE 'ALTER ROLE simhash_hostile SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
END $$;
-- Operators on the types the extension's catalog queries, comparisons and text building mix:
-- reg* types against oid, name against text, integers and floats of different widths, "char"
-- against text. Each records the call and returns what pg_catalog's operator would (through a
-- common type), so that the fooled statement goes on as if nothing happened.
DO $$
DECLARE
    op record;
    n int := 0;
BEGIN
    FOR op IN
        SELECT o.name, p.l, p.r, p.common
        FROM unnest(ARRAY['=', '<>', '<', '<=', '>', '>=']) o(name)
        CROSS JOIN (VALUES ('regtype', 'regtype', 'oid'), ('regtype', 'oid', 'oid'), ('oid', 'regtype', 'oid'),
                           ('regclass', 'regclass', 'oid'), ('regclass', 'oid', 'oid'), ('oid', 'regclass', 'oid'),
                           ('regclass', 'text', 'text'), ('regproc', 'oid', 'oid'), ('oid', 'regprocedure', 'oid'),
                           ('name', 'text', 'text'), ('text', 'name', 'text'), ('name', 'varchar', 'text'),
                           ('"char"', 'text', 'text'), ('text', '"char"', 'text'), ('"char"', 'name', 'text'),
                           ('integer', 'bigint', 'numeric'), ('bigint', 'integer', 'numeric'),
                           ('smallint', 'integer', 'numeric'), ('integer', 'numeric', 'numeric'),
                           ('double precision', 'integer', 'double precision'),
                           ('integer', 'double precision', 'double precision'),
                           ('double precision', 'numeric', 'double precision'),
                           ('double precision', 'bigint', 'double precision'), ('boolean', 'text', 'text')) p(l, r, common)
        UNION ALL
        SELECT '||', l, r, 'text' FROM (VALUES ('name', 'text'), ('text', 'name'), ('name', 'name'), ('text', 'integer'),
                                               ('text', 'bigint'), ('name', 'integer'), ('text', 'regclass'),
                                               ('text', 'oid'), ('text', 'double precision'), ('varchar', 'text'),
                                               ('text', 'varchar')) p(l, r)
        UNION ALL
        SELECT '*', l, r, 'double precision' FROM (VALUES ('double precision', 'numeric'),
                                                          ('double precision', 'integer')) p(l, r)
    LOOP
        n := n + 1;
        EXECUTE format('CREATE FUNCTION public.planted_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                       n, op.l, op.r, CASE WHEN op.name = '||' THEN 'text'
                                           WHEN op.name = '*' THEN 'double precision' ELSE 'boolean' END,
                       format('BEGIN PERFORM public.planted(%L); RETURN $1::%s::%s OPERATOR(pg_catalog.%s) $2::%s::%s; END',
                              format('%s(%s, %s)', op.name, op.l, op.r),
                              -- (reg* types go to oid, the rest to the common type through text)
                              CASE WHEN op.common = 'oid' THEN 'oid' ELSE 'text' END, op.common, op.name,
                              CASE WHEN op.common = 'oid' THEN 'oid' ELSE 'text' END, op.common));
        EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.planted_op_%s)',
                       op.name, op.l, op.r, n);
    END LOOP;
END $$;
-- Functions of the names the extension calls, with argument types that match better than
-- pg_catalog's (which take text, "any" or anyelement).
CREATE FUNCTION public.format(text, regclass) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('format(text, regclass)'); RETURN NULL; END $$;
CREATE FUNCTION public.format(text, name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('format(text, name)'); RETURN NULL; END $$;
CREATE FUNCTION public.octet_length(name) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('octet_length(name)'); RETURN NULL; END $$;
CREATE FUNCTION public.left(name, integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('left(name, integer)'); RETURN NULL; END $$;
CREATE FUNCTION public.rtrim(name, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('rtrim(name, text)'); RETURN NULL; END $$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('quote_ident(name)'); RETURN NULL; END $$;
CREATE FUNCTION public.to_regclass(name) RETURNS regclass LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('to_regclass(name)'); RETURN NULL; END $$;
CREATE FUNCTION public.pg_has_role(oid, name) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('pg_has_role(oid, name)'); RETURN true; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('now()'); RETURN NULL; END $$;
CREATE FUNCTION public.random() RETURNS double precision LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('random()'); RETURN 0.5; END $$;
-- A table the role owns, for the superuser to index and constrain (as a DBA would on request).
CREATE TABLE public.m (id int PRIMARY KEY, body text);
RESET ROLE;
SELECT count(*) AS planted_operators FROM pg_operator WHERE oprnamespace = 'public'::regnamespace;

-- Every released version, created and updated to the current one by the superuser (whose own
-- statements here name pg_catalog's functions where a planted one would be chosen).
SET client_min_messages = warning;
CREATE TEMP TABLE versions AS
SELECT version FROM pg_available_extension_versions WHERE name = 'simhash' ORDER BY string_to_array(version, '.')::int[];
RESET client_min_messages;
SELECT count(*) >= 9 AS every_release FROM versions;
SELECT pg_catalog.format('DROP EXTENSION IF EXISTS simhash CASCADE; CREATE EXTENSION simhash VERSION %L; ALTER EXTENSION simhash UPDATE;',
              version)
FROM versions ORDER BY string_to_array(version, '.')::int[] \gexec
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'simhash') AS current
FROM pg_extension WHERE extname = 'simhash';
SELECT count(*) AS planted_calls_so_far FROM public.planted_ran;

-- The role's table gets fingerprints, every index kind and the constraint in every form. (The
-- superuser's own statements here avoid the planted operators: `'row ' || g` would run one.)
ALTER TABLE public.m ADD COLUMN fp simhash64, ADD COLUMN fp2 simhash64, ADD COLUMN fp3 simhash64,
    ADD COLUMN fp4 simhash64;
INSERT INTO public.m SELECT g, pg_catalog.format('row %s %s', g, md5(g::text)) FROM generate_series(1, 200) g;
INSERT INTO public.m SELECT id + 500, body FROM public.m WHERE id <= 5;
UPDATE public.m SET fp = minhash64(body), fp2 = minhash64(body), fp3 = minhash64(body), fp4 = minhash64(body);
-- (a temporary table of the same name shadows it for this session)
CREATE TEMP TABLE m (id int);
CREATE TEMP TABLE m_near_duplicates (id int);
SELECT count(*) FROM simhash_index_statements('public.m', 'fp', 'btree', true);
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp');
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp2', 'btree_compact');
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp3', 'gin');
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp4', 'simhash');
SELECT simhash_indexed('public.m', 'fp'), simhash_indexed('public.m', 'body');
SELECT simhash_index_check('public.m_fp4_simhash');
-- Lookups, nearest rows, pairs and clusters in every form.
SET enable_seqscan = off;
SELECT count(*) FROM public.m WHERE fp <~> minhash64(pg_catalog.format('row 1 %s', md5('1'))) <= 3;
SELECT count(*) FROM public.m WHERE fp4 <~> minhash64(pg_catalog.format('row 1 %s', md5('1'))) <= 3;
SELECT id FROM public.m ORDER BY fp4 <-> minhash64(pg_catalog.format('row 1 %s', md5('1'))) LIMIT 1;
RESET enable_seqscan;
SELECT count(*) FROM simhash_pairs('SELECT id, fp FROM public.m', 16);
SELECT count(*) FROM simhash_pairs('public.m', 'fp', 11);
SELECT count(*) FROM simhash_pairs('public.m', 'fp4', 11);
SELECT count(*) FROM simhash_pairs('SELECT id, fp, body FROM public.m', 11, 0.1);
SELECT count(*) FROM simhash_pairs('public.m', 'fp', 11, 'body', 0.1);
SELECT count(*) FROM simhash_clusters('SELECT id, fp FROM public.m', 11);
SELECT count(*) FROM simhash_clusters('public.m', 'fp4', 11);
SELECT count(*) FROM simhash_clusters('SELECT id, fp, body FROM public.m', 11, 0.1);
SELECT count(*) FROM simhash_clusters('public.m', 'fp', 11, 'body', 0.1);
SELECT count(*) FROM simhash_clusters_from_pairs('SELECT 1::bigint, 2::bigint');
SELECT simhash_dedup_lookup('public.m', 'fp', 3, 'body') IS NOT NULL AS lookup_statement;
-- The constraint: each action, verified, deferred; rows that pass and rows that do not.
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('public.m', 'fp', 3, 'error');
INSERT INTO public.m (id, body, fp) SELECT 1001, body, fp FROM public.m WHERE id = 1;
INSERT INTO public.m (id, body, fp) VALUES (1002, 'new', 'ffffffffffffffff');
SELECT simhash_add_dedup('public.m', 'fp', 3, 'skip');
INSERT INTO public.m (id, body, fp) SELECT 1003, body, fp FROM public.m WHERE id = 1;
SELECT simhash_add_dedup('public.m', 'fp', 3, 'report');
INSERT INTO public.m (id, body, fp) SELECT 1004, body, fp FROM public.m WHERE id = 1;
SELECT simhash_add_dedup('public.m', 'fp2', 3, 'error', verify => 'body', min_similarity => 0.5);
INSERT INTO public.m (id, body, fp2) SELECT 1005, body, fp2 FROM public.m WHERE id = 2;
DROP TRIGGER m_fp2_dedup ON public.m;
SELECT simhash_add_dedup('public.m', 'fp3', 3, 'skip', deferred => true);
INSERT INTO public.m (id, body, fp3) SELECT 1006, body, fp3 FROM public.m WHERE id = 3;
SELECT simhash_add_dedup('public.m', 'fp3', 3, 'error', verify => 'body', min_similarity => 0.5, deferred => true);
INSERT INTO public.m (id, body, fp3) SELECT 1007, body, fp3 FROM public.m WHERE id = 3;
-- A column of the role's own domain over simhash64, for which it declares look-alikes of the
-- extension's operator and functions (more exact for the domain than the extension's own): the
-- statements the extension builds cast such a column to simhash64 first.
SET ROLE simhash_hostile;
CREATE DOMAIN public.hfp AS simhash64;
CREATE FUNCTION public.planted_distance(public.hfp, simhash64) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted('<~>(hfp, simhash64)'); RETURN hamming($1::simhash64, $2); END $$;
CREATE OPERATOR public.<~> (LEFTARG = public.hfp, RIGHTARG = simhash64, FUNCTION = public.planted_distance);
CREATE FUNCTION public.simhash_segment(public.hfp, integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_segment(hfp, integer)'); RETURN simhash_segment($1::simhash64, $2); END $$;
CREATE FUNCTION public.simhash_bands(public.hfp) RETURNS integer[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_bands(hfp)'); RETURN simhash_bands($1::simhash64); END $$;
CREATE FUNCTION public.simhash_pair_keys(public.hfp, integer) RETURNS integer[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_pair_keys(hfp, integer)'); RETURN simhash_pair_keys($1::simhash64, $2); END $$;
ALTER TABLE public.m ADD COLUMN fp6 public.hfp, ADD COLUMN fp7 public.hfp;
UPDATE public.m SET fp6 = fp4, fp7 = fp4;
RESET ROLE;
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp6');
SELECT count(*) FROM simhash_create_indexes('public.m', 'fp7', 'gin');
SELECT simhash_add_dedup('public.m', 'fp6', 3, 'skip');
INSERT INTO public.m (id, body, fp6, fp7) SELECT 1010, body, fp6, fp7 FROM public.m WHERE id = 4;
INSERT INTO public.m (id, body, fp6, fp7) VALUES (1011, 'y', '0000000000000011', '0000000000000011');
SELECT count(*) FROM simhash_pairs('public.m', 'fp6', 11);
SELECT count(*) FROM simhash_clusters('public.m', 'fp7', 11);
-- A column without an index: the trigger's first row lists the statements that would make them.
ALTER TABLE public.m ADD COLUMN fp5 simhash64;
SELECT simhash_add_dedup('public.m', 'fp5', 3, 'error');
INSERT INTO public.m (id, body, fp5) VALUES (1007, 'x', '0000000000000001');
\set VERBOSITY default
SELECT count(*) AS reported FROM public.m_near_duplicates;
DROP TABLE pg_temp.m, pg_temp.m_near_duplicates;

-- Codes of any length (release 0.8.0): a bit(64) column, a bit varying one and one of the role's
-- domain over bit(64), for which it declares look-alikes of what the extension's statements call
-- on codes (more exact for the domain than the extension's and pg_catalog's own).
SET ROLE simhash_hostile;
CREATE DOMAIN public.hcode AS bit(64);
CREATE FUNCTION public.simhash_hamming(public.hcode, bit) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_hamming(hcode, bit)'); RETURN simhash_hamming($1::bit, $2); END $$;
CREATE FUNCTION public.simhash_hamming(public.hcode, public.hcode) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_hamming(hcode, hcode)'); RETURN simhash_hamming($1::bit, $2::bit); END $$;
CREATE FUNCTION public.simhash_code_pair_keys(public.hcode, integer) RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('simhash_code_pair_keys(hcode, integer)'); RETURN simhash_code_pair_keys($1::bit, $2); END $$;
CREATE FUNCTION public.bit_count(public.hcode) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('bit_count(hcode)'); RETURN pg_catalog.bit_count($1::bit); END $$;
CREATE FUNCTION public.length(public.hcode) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('length(hcode)'); RETURN pg_catalog.length($1::bit); END $$;
CREATE FUNCTION public.planted_code_eq(public.hcode, public.hcode) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('=(hcode, hcode)'); RETURN $1::bit OPERATOR(pg_catalog.=) $2::bit; END $$;
CREATE OPERATOR public.= (LEFTARG = public.hcode, RIGHTARG = public.hcode, FUNCTION = public.planted_code_eq);
CREATE FUNCTION public.planted_code_in(public.hcode, simhash_code_ball) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM public.planted('<@(hcode, simhash_code_ball)'); RETURN $1::bit <@ $2; END $$;
CREATE OPERATOR public.<@ (LEFTARG = public.hcode, RIGHTARG = simhash_code_ball, FUNCTION = public.planted_code_in);
CREATE TABLE public.mc (id int PRIMARY KEY, body text, code bit(64), vcode bit varying, dcode public.hcode);
RESET ROLE;
INSERT INTO public.mc (id, body, code)
SELECT g, pg_catalog.format('row %s %s', g, md5(g::text)), pg_catalog.format('x%s', pg_catalog.left(md5(g::text), 16))::bit(64)
FROM generate_series(1, 200) g;
INSERT INTO public.mc (id, body, code) SELECT id + 500, body, code FROM public.mc WHERE id <= 5;
UPDATE public.mc SET vcode = code, dcode = code;
CREATE INDEX mc_code ON public.mc USING simhash (code);
CREATE INDEX mc_vcode ON public.mc USING simhash (vcode);
CREATE INDEX mc_dcode ON public.mc USING simhash (dcode);
SELECT simhash_index_check('public.mc_dcode');
SET enable_seqscan = off;
SELECT count(*) FROM public.mc WHERE simhash_hamming(code, (SELECT code FROM public.mc WHERE id = 1)) <= 3;
SELECT id FROM public.mc ORDER BY simhash_hamming(code, (SELECT code FROM public.mc WHERE id = 2)) LIMIT 1;
RESET enable_seqscan;
SELECT count(*) FROM simhash_pairs('public.mc', 'code', 3);
SELECT count(*) FROM simhash_pairs('public.mc', 'vcode', 3);
SELECT count(*) FROM simhash_pairs('public.mc', 'dcode', 3);
SELECT count(*) FROM simhash_clusters('public.mc', 'dcode', 3);
SELECT count(*) FROM simhash_pairs('public.mc', 'dcode', 3, 'body', 0.5);
SELECT count(*) FROM simhash_clusters('public.mc', 'vcode', 3, 'body', 0.5);
SELECT simhash_dedup_lookup('public.mc', 'dcode', 3, 'body') IS NOT NULL AS lookup_statement;
\set VERBOSITY sqlstate
SELECT simhash_add_dedup('public.mc', 'dcode', 3, 'skip');
INSERT INTO public.mc (id, body, code, dcode) SELECT 1001, body, code, dcode FROM public.mc WHERE id = 1;
SELECT simhash_add_dedup('public.mc', 'vcode', 3, 'error', verify => 'body', min_similarity => 0.5, deferred => true);
INSERT INTO public.mc (id, body, vcode) SELECT 1002, body, vcode FROM public.mc WHERE id = 2;
-- The check at each row on the plain bit(64) column ('error'), on another domain column with
-- 'report' and verify (the lookup statement run with its similarity; the report table, of
-- bit varying, made and written), an UPDATE under it, and a domain column without an index (the
-- first row's warning names the statement that would make it).
SELECT simhash_add_dedup('public.mc', 'code', 3, 'error');
INSERT INTO public.mc (id, body, code) SELECT 1003, body, code FROM public.mc WHERE id = 3;
ALTER TABLE public.mc ADD COLUMN rcode public.hcode;
CREATE INDEX mc_rcode ON public.mc USING simhash (rcode);
SELECT simhash_add_dedup('public.mc', 'rcode', 3, 'report', verify => 'body', min_similarity => 0.5);
UPDATE public.mc SET rcode = dcode WHERE id BETWEEN 10 AND 12;
INSERT INTO public.mc (id, body, rcode) SELECT 1004, body, rcode FROM public.mc WHERE id = 11;
SELECT existing_key, new_key, distance FROM public.mc_near_duplicates ORDER BY 1, 2;
ALTER TABLE public.mc ADD COLUMN ncode public.hcode;
SELECT simhash_add_dedup('public.mc', 'ncode', 3, 'error');
INSERT INTO public.mc (id, body, ncode) SELECT 1005, body, dcode FROM public.mc WHERE id = 20;
\set VERBOSITY default
SELECT count(*) AS rows_kept FROM public.mc;

-- Nothing planted ran, and the role is not a superuser.
SELECT * FROM public.planted_ran;
SELECT rolsuper FROM pg_roles WHERE rolname = 'simhash_hostile';

\c :regress_db
DROP DATABASE simhash_regress_hostile;
DROP ROLE simhash_hostile;
