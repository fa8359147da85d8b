-- Verified clusters (src/pairs/verified.rs): simhash_clusters(..., text_column, min_similarity)
-- gives exactly the groups of simhash_clusters_from_pairs over every verified pair (its
-- definition before 0.8.0, written out here), although it compares only the pairs that would
-- join two groups: planted groups and chains (where a chain's ends are within k but unlike, so
-- that a wrongly skipped pair splits a group), copies, NULL texts, texts without a letter, NULL
-- fingerprints, one id on two rows; several radii and thresholds; through the index and in memory.
CREATE TABLE vc (id int PRIMARY KEY, body text, fp simhash64);
-- 30 chains of 8 texts of 40 words: each link changes 1 to 4 more words of the first text (a
-- link's texts have a similarity of about 0.9 to 0.67; with 2 words, texts 4 links apart 0.67).
INSERT INTO vc
SELECT c * 10 + v,
       (SELECT string_agg(CASE WHEN w < v * (c % 4 + 1) THEN 'z' || substr(md5(c || 'x' || w), 1, 6)
                               ELSE substr(md5(c || 'w' || w), 1, 6) END, ' ' ORDER BY w)
        FROM generate_series(0, 39) w), NULL
FROM generate_series(1, 30) c, generate_series(0, 7) v;
UPDATE vc SET fp = minhash64(body);
-- Copies, a NULL text and a text without a letter on a chain's fingerprint, a NULL fingerprint.
INSERT INTO vc SELECT id + 1000, body, fp FROM vc WHERE id % 10 IN (0, 4) AND id < 150;
INSERT INTO vc SELECT id + 2000, NULL, fp FROM vc WHERE id IN (12, 23);
INSERT INTO vc SELECT id + 3000, '!!! ...', fp FROM vc WHERE id IN (31, 45);
INSERT INTO vc SELECT id + 4000, body, NULL FROM vc WHERE id IN (51, 52);
CREATE INDEX ON vc USING simhash (fp);
ANALYZE vc;

-- The rows of two queries that the other lacks (both ways).
CREATE FUNCTION vc_diff(got text, expected text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE d bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ((%s EXCEPT ALL %s) UNION ALL (%s EXCEPT ALL %s)) x', got, expected, expected, got)
        INTO d;
    RETURN d;
END $$;
-- The old definition: the groups of every verified pair.
CREATE FUNCTION vc_old(pairs text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT * FROM simhash_clusters_from_pairs(%L)', 'SELECT id_a, id_b FROM ' || pairs)
$$;

-- Table (through its simhash index) and query (in memory; one id on two rows) forms.
SELECT k, t, (SELECT count(*) FROM simhash_clusters('vc', 'fp', k, 'body', t)) AS rows,
       (SELECT count(DISTINCT representative) FROM simhash_clusters('vc', 'fp', k, 'body', t)) AS groups,
       vc_diff(format('SELECT * FROM simhash_clusters(''vc'', ''fp'', %s, ''body'', %s)', k, t),
               vc_old(format('simhash_pairs(''vc'', ''fp'', %s, ''body'', %s)', k, t))) AS table_form,
       vc_diff(format('SELECT * FROM simhash_clusters(%L, %s, %s, 2)', q, k, t),
               vc_old(format('simhash_pairs(%L, %s, %s, 2)', q, k, t))) AS query_form
FROM (VALUES (3), (9), (14)) r(k), (VALUES (0.6), (0.78), (0.88)) s(t),
     (VALUES ('SELECT id, fp, body FROM vc UNION ALL SELECT id + 1, fp, body FROM vc WHERE id % 7 = 0')) x(q)
ORDER BY 1, 2;
-- A chain joins through its links although its ends are unlike.
SELECT round(simhash_similarity(a.body, b.body)::numeric, 2), a.fp <~> b.fp
FROM vc a, vc b WHERE a.id = 10 AND b.id = 14;
SELECT id, representative FROM simhash_clusters('vc', 'fp', 14, 'body', 0.78) WHERE id / 10 % 100 = 1 ORDER BY 1;

-- Privileges and row-level security apply to the texts as to the caller's query.
DROP ROLE IF EXISTS simhash_regress_vc;
CREATE ROLE simhash_regress_vc;
GRANT SELECT (id, fp) ON vc TO simhash_regress_vc;
SET ROLE simhash_regress_vc;
\set VERBOSITY sqlstate
SELECT count(*) FROM simhash_clusters('vc', 'fp', 9, 'body', 0.7);
SELECT count(*) FROM simhash_clusters('SELECT id, fp, body FROM vc', 9, 0.7);
\set VERBOSITY default
RESET ROLE;
GRANT SELECT ON vc TO simhash_regress_vc;
ALTER TABLE vc ENABLE ROW LEVEL SECURITY;
-- The middle of each chain hidden: the chains split.
CREATE POLICY vc_some ON vc FOR SELECT TO simhash_regress_vc USING (id % 10 <> 2);
SET ROLE simhash_regress_vc;
SELECT count(*) AS rows, count(DISTINCT representative) AS groups, count(*) FILTER (WHERE id % 10 = 2) AS hidden,
       vc_diff('SELECT * FROM simhash_clusters(''vc'', ''fp'', 9, ''body'', 0.7)',
               vc_old('simhash_pairs(''vc'', ''fp'', 9, ''body'', 0.7)')) AS differences
FROM simhash_clusters('vc', 'fp', 9, 'body', 0.7);
RESET ROLE;
SELECT count(*) AS rows, count(DISTINCT representative) AS groups FROM simhash_clusters('vc', 'fp', 9, 'body', 0.7);

-- Misuse, as before: 22023, 42703, 42P10.
\set VERBOSITY sqlstate
SELECT * FROM simhash_clusters('vc', 'fp', 9, 'body', 1.5);
SELECT * FROM simhash_clusters('vc', 'fp', 9, 'body', 0.7, n => 33);
SELECT * FROM simhash_clusters('vc', 'fp', 20, 'body', 0.7);
SELECT * FROM simhash_clusters('vc', 'fp', 9, 'no_such_column', 0.7);
SELECT * FROM simhash_clusters('SELECT id, fp FROM vc', 9, 0.7);
\set VERBOSITY default

DROP TABLE vc;
DROP FUNCTION vc_diff(text, text), vc_old(text);
DROP ROLE simhash_regress_vc;
