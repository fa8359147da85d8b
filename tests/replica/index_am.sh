#!/usr/bin/env bash
# The simhash index on a streaming replica: a hot standby of the scripts/common.sh cluster, made
# with pg_basebackup and started on localhost, replays the index's WAL (the build's whole pages,
# GenericXLog records of inserts, new pages, NULL rows and VACUUM) and answers every lookup through
# the index (20 query points, k = 0..64, and ORDER BY fp <-> q) exactly as a sequential scan on the
# standby answers it, after the build and again after inserts, deletes and VACUUM on the primary.
#   usage: tests/replica/index_am.sh     (PG_MAJOR=15|18; the scripts/common.sh cluster is the primary)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
db=simhash_replica
standby_port=$((PGPORT + 100))
standby_data=/var/lib/postgresql/simhash-standby-$PG_MAJOR
stop_standby() {
    as_postgres "$PG_BIN/pg_ctl" -D "$standby_data" -w -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$standby_data"
}
trap stop_standby EXIT
start_cluster
fresh_database "$db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
on_standby() { psql -X -q -v ON_ERROR_STOP=1 -p "$standby_port" -d "$db" "$@"; }

log "a hot standby of PostgreSQL $PG_MAJOR on port $standby_port (pg_basebackup, streaming)"
stop_standby
as_postgres "$PG_BIN/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U postgres -D "$standby_data" -R -X stream -c fast
as_postgres "$PG_BIN/pg_ctl" -D "$standby_data" -l "$standby_data/server.log" -w \
    -o "-p $standby_port -k $PGHOST -c listen_addresses='' -c hot_standby=on -c hot_standby_feedback=on -c max_standby_streaming_delay=-1" start >/dev/null
on_standby -At -c "SELECT pg_is_in_recovery()" | grep -qx t || die "the standby is not in recovery"

# Waits until the standby has replayed everything the primary wrote so far.
catch_up() {
    local lsn
    lsn=$(q -At -c "SELECT pg_current_wal_flush_lsn()")
    for _ in $(seq 1 300); do
        [[ $(on_standby -At -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn") == t ]] && return 0
        sleep 0.2
    done
    die "the standby did not replay up to $lsn within 60 s"
}

# On the standby: the lookups through the index (seqscan off) against the same on a sequential scan.
compare() {   # stage
    catch_up
    local result
    result=$(on_standby -At -v table=r -f "$REPO_ROOT/tests/sql/simhash_index_lookups.sql" \
        -c "SET enable_seqscan = off" -c "EXPLAIN (COSTS OFF) SELECT id FROM r ORDER BY fp <-> '0123456789abcdef' LIMIT 10" 2>&1)
    echo "$result" | grep -q "Index Scan using r_fp" || die "$1: the standby's plan does not use the simhash index: $result"
    local summary
    summary=$(echo "$result" | sed -n 's/.*NOTICE: *//p')
    echo "standby, $1: $summary"
    [[ $summary == *" 0 lookups differ" ]] || die "$1: the standby answers differently through the simhash index"
}

log "primary: a table with a simhash index (build), then lookups on the standby"
q <<'SQL'
CREATE TABLE r (id bigserial PRIMARY KEY, fp simhash64);
INSERT INTO r (fp)
SELECT CASE WHEN i % 97 = 0 THEN NULL ELSE ('x' || substr(md5('r' || i), 1, 16))::bit(64)::bigint::simhash64 END
FROM generate_series(1, 20000) i;
CREATE INDEX r_fp ON r USING simhash (fp);
SQL
compare "after the build"

log "primary: inserts (new pages, NULL rows), deletes and VACUUM, then lookups on the standby"
q <<'SQL'
INSERT INTO r (fp)
SELECT CASE WHEN i % 53 = 0 THEN NULL ELSE ('x' || substr(md5('more' || i), 1, 16))::bit(64)::bigint::simhash64 END
FROM generate_series(1, 40000) i;
DELETE FROM r WHERE id % 5 = 0;
VACUUM r;
SQL
compare "after inserts, DELETE and VACUUM"
# (the standby's feedback holds back VACUUM while it runs: the check after it is gone)
stop_standby
q -c "VACUUM r"
[[ $(q -At -c "SELECT simhash_index_check('r_fp') = (SELECT count(*) FROM r)") == t ]] || die "the primary's index check failed"
log "the simhash index on a streaming standby passed"
