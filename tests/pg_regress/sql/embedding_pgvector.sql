-- needs: vector
-- simhash of pgvector's types. Runs only where the server has pgvector (scripts/regress.sh leaves
-- it out elsewhere and says SKIPPED). Both extensions live in one schema without a clash (pgvector's
-- <~> is on bit, ours on simhash64).
CREATE EXTENSION vector;
CREATE TABLE items (id int PRIMARY KEY, embedding vector(3), half halfvec(3), sparse sparsevec(3));
INSERT INTO items VALUES (1, '[1,2,3]', '[1,2,3]', '{1:1,2:2,3:3}/3'), (2, '[-1,-2,-3]', '[-1,-2,-3]', '{1:-1,2:-2,3:-3}/3');
-- vector: simhash(embedding) through pgvector's implicit cast vector -> real[]; the same codes as
-- the real[] arrays (golden values of the embedding test).
SELECT id, simhash(embedding), simhash(embedding, 42), simhash_bits(embedding, 12),
       simhash(embedding) = simhash(embedding::real[]) AS same
FROM items ORDER BY id;
-- halfvec's cast to real[] is an assignment cast: simhash(half::real[]); sparsevec through vector.
SELECT id, simhash(half::real[]), simhash(sparse::vector) FROM items ORDER BY id;
\set VERBOSITY sqlstate
SELECT simhash(half) FROM items;
\set VERBOSITY default
-- A generated column and a simhash index over it; pgvector's own operators still resolve.
ALTER TABLE items ADD COLUMN fp simhash64 GENERATED ALWAYS AS (simhash(embedding)) STORED;
CREATE INDEX items_fp ON items USING simhash (fp);
SELECT id, fp, fp <~> simhash('[1,2,2.9]'::vector) AS distance, embedding <=> '[1,2,2.9]' < 0.01 AS pgvector_cosine,
       '101'::bit(3) <~> '111'::bit(3) AS pgvector_hamming
FROM items ORDER BY id;
DROP TABLE items;
DROP EXTENSION vector;
