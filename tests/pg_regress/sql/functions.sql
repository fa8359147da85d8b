-- hamming(), <~>, simhash_segment(), simhash(): values, integer behaviour, NULLs, errors.

SELECT hamming('0000000000000000', '0000000000000000') AS zero,
       hamming('0000000000000000', 'ffffffffffffffff') AS all_bits,
       '0000000000000027'::simhash64 <~> '000000000000002a' AS seed_example,
       '8000000000000001'::simhash64 <~> '0000000000000001' AS top_bit;

-- <~> is commutative and its result is an integer everywhere.
SELECT a <~> b = b <~> a AS commutes,
       (a <~> b) + 1 AS plus_one,
       (a <~> b) * 2 AS doubled,
       pg_typeof(a <~> b) AS type,
       pg_typeof((a <~> b) + 1) AS arithmetic_type
FROM (VALUES ('0123456789abcdef'::simhash64, 'fedcba9876543210'::simhash64)) v(a, b);
SELECT avg(d), sum(d), min(d), max(d)
FROM (SELECT ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64 <~> '0000000000000000' AS d
      FROM generate_series(1, 100) i) s;
SELECT fp, fp <~> '0000000000000000' AS d
FROM (VALUES ('00000000000000ff'::simhash64), ('0000000000000001'), ('000000000000000f')) v(fp)
ORDER BY d DESC;
SELECT fp <~> '0000000000000000' <= 3 AS within_3, fp <~> '0000000000000000' < 3 AS below_3,
       3 >= fp <~> '0000000000000000' AS commuted, fp <~> '0000000000000000' <= 3::bigint AS int8_bound
FROM (VALUES ('0000000000000007'::simhash64), ('000000000000000f')) v(fp);

-- NULL in, NULL out.
SELECT hamming(NULL, '0000000000000000') IS NULL AS a,
       ('0000000000000000'::simhash64 <~> NULL) IS NULL AS b,
       (NULL::simhash64 <~> '0000000000000000' <= 3) IS NULL AS c,
       ('0000000000000000'::simhash64 <~> '0000000000000001' <= NULL::int) IS NULL AS d,
       simhash_segment(NULL, 0) IS NULL AS e,
       simhash_segment('0000000000000000', NULL) IS NULL AS f,
       simhash(NULL) IS NULL AS g;

-- Segments: 0 is the most significant 16 bits.
SELECT n, simhash_segment('0123456789abcdef', n) AS segment,
       to_hex(simhash_segment('0123456789abcdef', n)) AS hex
FROM generate_series(0, 3) n;
SELECT simhash_segment('ffffffffffffffff', 0) AS max_segment;
\set VERBOSITY default
SELECT simhash_segment('0123456789abcdef', 4);
SELECT simhash_segment('0123456789abcdef', -1);
\set VERBOSITY sqlstate
SELECT simhash_segment('0123456789abcdef', 4);
\set VERBOSITY default

-- simhash(): texts with no words have no fingerprint (NULL, which matches nothing).
SELECT simhash('') IS NULL AS empty,
       simhash('   ') IS NULL AS blanks,
       simhash('，。！？') IS NULL AS punctuation,
       simhash('a') IS NULL AS one_letter;
SELECT simhash('near-duplicate detection') = simhash('near-duplicate detection') AS deterministic;

-- The function properties the planner relies on.
SELECT proname, provolatile, proisstrict, proparallel, procost
FROM pg_proc WHERE proname IN ('simhash', 'hamming', 'simhash_segment') ORDER BY proname, procost;
SELECT pg_typeof(simhash('x y')), typlen, typbyval, typalign, typstorage
FROM pg_type WHERE typname = 'simhash64';

-- Every object of the extension (functions, aggregate, types, domain, operators, operator classes
-- and families, casts, the access method, the private schema) carries a COMMENT (\df+, \dT+,
-- \dC+ explain them): none listed.
SELECT pg_describe_object(d.classid, d.objid, 0) AS without_comment
FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
WHERE e.extname = 'simhash' AND d.deptype = 'e'
  AND obj_description(d.objid, d.classid::regclass::text) IS NULL
  -- (array types, which PostgreSQL 18 also records as members of the extension)
  AND NOT EXISTS (SELECT FROM pg_type t WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid AND t.typelem <> 0)
ORDER BY 1;

-- The SQL surface: functions a user calls are in the extension's schema; those that only the
-- extension's own objects call (type I/O and comparison, the radius comparisons and their planner
-- support, the aggregate's support, helpers) are in the private schema simhash_internal.
SELECT n.nspname AS schema, count(*) AS functions,
       string_agg(DISTINCT p.proname, ' ' ORDER BY p.proname) AS names
FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE e.extname = 'simhash' AND d.deptype = 'e'
GROUP BY n.nspname ORDER BY 1;
-- A user's search_path does not need the private schema: the operators, casts, the aggregate and
-- binary COPY reach their functions by OID.
SET search_path = public;
SELECT '0123456789abcdef'::simhash64 < 'fedcba9876543210'::simhash64 AS lt,
       hamming('0000000000000000', '000000000000000f') AS d, ('0000000000000003'::simhash64)::bit(64) = (3::bigint)::bit(64) AS bit_cast,
       simhash_agg(f, 1) = simhash(ARRAY['a', 'b'], ARRAY[1, 1]::float8[]) AS agg
FROM unnest(ARRAY['a', 'b']) f;
RESET search_path;
