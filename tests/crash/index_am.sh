#!/usr/bin/env bash
# Crash recovery of the simhash index: a table with the index under a concurrent load (4 clients
# inserting rows, some with NULL fingerprints, one deleting rows and running VACUUM) when the
# server is killed (SIGKILL to the postmaster and its processes, no checkpoint); after the restart
# replays the WAL (and VACUUM), the index's own check is clean, it holds every row, and every lookup
# (20 query points, k = 0..64, and ORDER BY fp <-> q) answers exactly what a sequential scan answers.
#   usage: tests/crash/index_am.sh     (PG_MAJOR=15|18; the scripts/common.sh cluster)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
db=simhash_crash
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
start_cluster
fresh_database "$db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
q <<'SQL'
CREATE TABLE c (id bigserial PRIMARY KEY, fp simhash64);
INSERT INTO c (fp) SELECT ('x' || substr(md5('c' || i), 1, 16))::bit(64)::bigint::simhash64 FROM generate_series(1, 20000) i;
CREATE INDEX c_fp ON c USING simhash (fp);
CHECKPOINT;
SQL
cat > "$work/insert.sql" <<'SQL'
INSERT INTO c (fp) SELECT CASE WHEN random() < 0.02 THEN NULL ELSE ('x' || substr(md5(random()::text), 1, 16))::bit(64)::bigint::simhash64 END FROM generate_series(1, 50);
SQL
cat > "$work/vacuum.sql" <<'SQL'
DELETE FROM c WHERE id IN (SELECT id FROM c TABLESAMPLE SYSTEM (1) LIMIT 200);
VACUUM c;
SQL
log "crash: a concurrent load, then SIGKILL of PostgreSQL $PG_MAJOR"
(cd "$work" && pgbench -n -c 5 -T 30 -d "$db" -f insert.sql@9 -f vacuum.sql@1 >"$work/pgbench.log" 2>&1 || true) &
load=$!
sleep 12
postmaster=$(head -1 "$SIMHASH_PGDATA/postmaster.pid")
kill -9 "$postmaster"
pkill -9 -P "$postmaster" || true
wait "$load" || true
for _ in $(seq 1 50); do pgrep -P "$postmaster" >/dev/null || break; sleep 0.2; done
rm -f "$SIMHASH_PGDATA/postmaster.pid" "$PGHOST/.s.PGSQL.$PGPORT" "$PGHOST/.s.PGSQL.$PGPORT.lock"
start_cluster
grep -q "database system was interrupted\|was not properly shut down" "$SIMHASH_PGDATA/server.log" \
    || die "the server did not recover from a crash (server.log)"
# (VACUUM first, with its index pass forced: the index, like a B-tree, keeps the entries of rows
# whose transactions the crash aborted until VACUUM removes them)
q -c "VACUUM (INDEX_CLEANUP ON) c"
lookups=$(q -At -v table=c -f "$REPO_ROOT/tests/sql/simhash_index_lookups.sql" 2>&1 | sed -n 's/.*NOTICE: *//p')
check=$(q -At -c "SELECT CASE WHEN simhash_index_check('c_fp') = (SELECT count(*) FROM c) THEN 'clean' ELSE 'MISMATCH' END")
echo "after the crash: $lookups, index check $check"
[[ $check == clean && $lookups == *" 0 lookups differ" ]] || die "the simhash index is wrong after crash recovery"
log "crash recovery of the simhash index passed"
