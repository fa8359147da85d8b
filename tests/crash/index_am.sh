#!/usr/bin/env bash
# Crash recovery of the simhash index: a table with the index under a concurrent load (4 clients
# inserting rows, some with NULL fingerprints, one deleting rows and running VACUUM) when the
# server is killed (SIGKILL to the postmaster and its processes, no checkpoint); after the restart
# replays the WAL (and VACUUM), the index's own check is clean, it holds every row, and every lookup
# (20 query points, k = 0..64, and ORDER BY fp <-> q) answers exactly what a sequential scan answers.
# The crash itself is checked too: rows are being committed in the 2 s before the kill, pgbench
# ends cut off (status 2, clients aborted mid-command, no clean shutdown), the server log written
# since this run started shows crash recovery with WAL replay, and rows of the load survive it.
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
rows_before=$(q -At -c "SELECT max(id) FROM c")
# Only what this run's server writes from here on is searched for the recovery messages.
log_offset=$(stat -c %s "$SIMHASH_PGDATA/server.log")
# (-T 30: the load would go on for 18 s past the kill; pgbench's own exit status is judged below)
(cd "$work" && exec pgbench -n -c 5 -T 30 -f insert.sql@9 -f vacuum.sql@1 "$db" >"$work/pgbench.log" 2>&1) &
load=$!
sleep 10
written_at_10s=$(q -At -c "SELECT max(id) FROM c")
sleep 2
written_at_12s=$(q -At -c "SELECT max(id) FROM c")
# The load must be running when the server dies: pgbench still at work, rows committed in the
# last 2 seconds.
kill -0 "$load" 2>/dev/null || { cat "$work/pgbench.log"; die "pgbench ended before the kill: no load at the crash"; }
((written_at_12s > written_at_10s)) \
    || { cat "$work/pgbench.log"; die "no rows committed in the 2 s before the kill (max(id) $written_at_10s, then $written_at_12s): no load at the crash"; }
# The whole server at once, as in a power loss: the postmaster stopped first (it forks no new
# process then), then SIGKILL to it and to every process it had started (children left alive
# would be re-parented, and a busy one would hold the shared memory against the restart).
postmaster=$(head -1 "$SIMHASH_PGDATA/postmaster.pid")
kill -STOP "$postmaster"
# (its children from /proc: a fresh Debian root has no pgrep)
children_of() {
    local stat rest state ppid
    for stat in /proc/[0-9]*/stat; do
        rest=$(cat "$stat" 2>/dev/null) || continue
        read -r state ppid _ <<<"${rest##*) }"
        [ "$ppid" = "$1" ] && { stat=${stat#/proc/}; echo "${stat%/stat}"; }
    done
    return 0
}
server_pids=("$postmaster" $(children_of "$postmaster"))
kill -9 "${server_pids[@]}" 2>/dev/null || true
load_status=0
wait "$load" || load_status=$?
# (the files of the killed server only: never those of a server that still runs; a zombie is dead)
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
for pid in "${server_pids[@]}"; do
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.2; done
    alive "$pid" && die "server process $pid survived SIGKILL"
done
rm -f "$SIMHASH_PGDATA/postmaster.pid" "$PGHOST/.s.PGSQL.$PGPORT" "$PGHOST/.s.PGSQL.$PGPORT.lock"
start_cluster
# pgbench ran (its clients connected and wrote rows, checked above) and lost its server: it exits
# 2 ("Run was aborted"), its clients aborted in the middle of a command, and no server process
# said goodbye (a clean shutdown terminates connections "due to administrator command"). 0 would
# mean it ran its 30 s undisturbed (no crash under the load), 1 that it never got going.
if [ "$load_status" -ne 2 ] || ! grep -q "aborted in command" "$work/pgbench.log" \
    || grep -q "terminating connection due to administrator command" "$work/pgbench.log"; then
    cat "$work/pgbench.log"
    die "pgbench ended with status $load_status (2 expected), $(grep -c "aborted in command" "$work/pgbench.log") clients cut off mid-command (some expected), $(grep -c "due to administrator command" "$work/pgbench.log") connections closed by a clean shutdown (none expected): the server was not killed under the load"
fi
tail -c +$((log_offset + 1)) "$SIMHASH_PGDATA/server.log" >"$work/server-since-start.log"
grep -q "database system was interrupted\|was not properly shut down" "$work/server-since-start.log" \
    || die "the server did not recover from a crash (no recovery message in server.log since this run started)"
grep -q "redo done\|redo starts" "$work/server-since-start.log" || die "the restart replayed no WAL (server.log)"
rows_written=$(q -At -c "SELECT count(*) FROM c WHERE id > $rows_before")
echo "the load was writing at the kill (max(id) $written_at_10s at 10 s, $written_at_12s at 12 s); $rows_written of its rows are in the recovered table"
((rows_written > 0)) || die "no row written by the load survived the crash"
# (VACUUM first, with its index pass forced: the index, like a B-tree, keeps the entries of rows
# whose transactions the crash aborted until VACUUM removes them)
q -c "VACUUM (INDEX_CLEANUP ON) c"
lookups=$(q -At -v table=c -f "$REPO_ROOT/tests/sql/simhash_index_lookups.sql" 2>&1 | sed -n 's/.*NOTICE: *//p')
check=$(q -At -c "SELECT CASE WHEN simhash_index_check('c_fp') = (SELECT count(*) FROM c) THEN 'clean' ELSE 'MISMATCH' END")
echo "after the crash: $lookups, index check $check"
[[ $check == clean && $lookups == *" 0 lookups differ" ]] || die "the simhash index is wrong after crash recovery"
log "crash recovery of the simhash index passed"
