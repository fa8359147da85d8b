-- simhash 0.1.0 -> 0.2.0 (ALTER EXTENSION simhash UPDATE TO '0.2.0').
-- Only comments: every function and operator of the extension now carries one. The library of
-- 0.2.0 also fixes the commit-time recheck (see CHANGELOG.md); nothing to migrate in the catalog.

\echo Use "ALTER EXTENSION simhash UPDATE TO '0.2.0'" to load this file. \quit

COMMENT ON OPERATOR < (simhash64, simhash64) IS 'less than, in unsigned order (as the hex text sorts)';
COMMENT ON OPERATOR <= (simhash64, simhash64) IS 'less than or equal, in unsigned order';
COMMENT ON OPERATOR > (simhash64, simhash64) IS 'greater than, in unsigned order';
COMMENT ON OPERATOR >= (simhash64, simhash64) IS 'greater than or equal, in unsigned order';
COMMENT ON OPERATOR = (simhash64, simhash64) IS 'equal';
COMMENT ON OPERATOR <> (simhash64, simhash64) IS 'not equal';
COMMENT ON OPERATOR <= (simhash_distance, integer) IS 'radius test: at most k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR < (simhash_distance, integer) IS 'radius test: fewer than k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR >= (integer, simhash_distance) IS 'radius test, commuted: k >= distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR > (integer, simhash_distance) IS 'radius test, commuted: k > distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR <= (simhash_distance, bigint) IS 'radius test: at most k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR < (simhash_distance, bigint) IS 'radius test: fewer than k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR >= (bigint, simhash_distance) IS 'radius test, commuted: k >= distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR > (bigint, simhash_distance) IS 'radius test, commuted: k > distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR <= (simhash_distance, smallint) IS 'radius test: at most k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR < (simhash_distance, smallint) IS 'radius test: fewer than k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR >= (smallint, simhash_distance) IS 'radius test, commuted: k >= distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR > (smallint, simhash_distance) IS 'radius test, commuted: k > distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR <= (simhash_distance, simhash_distance) IS 'radius test: at most k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR < (simhash_distance, simhash_distance) IS 'radius test: fewer than k bits apart (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR >= (simhash_distance, simhash_distance) IS 'radius test, commuted: k >= distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON OPERATOR > (simhash_distance, simhash_distance) IS 'radius test, commuted: k > distance (rewritten into index lookups where the segment indexes exist)';
COMMENT ON FUNCTION simhash64_in(cstring) IS 'input function of simhash64 (16 hexadecimal digits); internal';
COMMENT ON FUNCTION simhash64_out(simhash64) IS 'output function of simhash64 (16 lower-case hexadecimal digits); internal';
COMMENT ON FUNCTION simhash64_recv(internal) IS 'binary input function of simhash64 (8 bytes, big-endian); internal';
COMMENT ON FUNCTION simhash64_send(simhash64) IS 'binary output function of simhash64 (8 bytes, big-endian); internal';
COMMENT ON FUNCTION simhash64_eq(simhash64, simhash64) IS 'implementation of = for simhash64';
COMMENT ON FUNCTION simhash64_ne(simhash64, simhash64) IS 'implementation of <> for simhash64';
COMMENT ON FUNCTION simhash64_lt(simhash64, simhash64) IS 'implementation of < for simhash64 (unsigned order, as the hex text sorts)';
COMMENT ON FUNCTION simhash64_le(simhash64, simhash64) IS 'implementation of <= for simhash64 (unsigned order)';
COMMENT ON FUNCTION simhash64_gt(simhash64, simhash64) IS 'implementation of > for simhash64 (unsigned order)';
COMMENT ON FUNCTION simhash64_ge(simhash64, simhash64) IS 'implementation of >= for simhash64 (unsigned order)';
COMMENT ON FUNCTION simhash64_cmp(simhash64, simhash64) IS 'B-tree comparison support of simhash64 (unsigned order)';
COMMENT ON FUNCTION simhash64_hash(simhash64) IS 'hash support of simhash64 (the int8 hash of the same 64 bits)';
COMMENT ON FUNCTION simhash64_hash_extended(simhash64, bigint) IS 'extended hash support of simhash64 (the int8 hash of the same 64 bits)';
COMMENT ON FUNCTION simhash_distance_le(simhash_distance, integer) IS 'implementation of simhash_distance <= integer, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt(simhash_distance, integer) IS 'implementation of simhash_distance < integer, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le_commuted(integer, simhash_distance) IS 'implementation of integer >= simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt_commuted(integer, simhash_distance) IS 'implementation of integer > simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le(simhash_distance, bigint) IS 'implementation of simhash_distance <= bigint, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt(simhash_distance, bigint) IS 'implementation of simhash_distance < bigint, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le_commuted(bigint, simhash_distance) IS 'implementation of bigint >= simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt_commuted(bigint, simhash_distance) IS 'implementation of bigint > simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le(simhash_distance, smallint) IS 'implementation of simhash_distance <= smallint, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt(simhash_distance, smallint) IS 'implementation of simhash_distance < smallint, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le_commuted(smallint, simhash_distance) IS 'implementation of smallint >= simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt_commuted(smallint, simhash_distance) IS 'implementation of smallint > simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le(simhash_distance, simhash_distance) IS 'implementation of simhash_distance <= simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt(simhash_distance, simhash_distance) IS 'implementation of simhash_distance < simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_le_commuted(simhash_distance, simhash_distance) IS 'implementation of simhash_distance >= simhash_distance, with the planner support that turns a radius test into index lookups';
COMMENT ON FUNCTION simhash_distance_lt_commuted(simhash_distance, simhash_distance) IS 'implementation of simhash_distance > simhash_distance, with the planner support that turns a radius test into index lookups';
