# A Citus cluster on this machine for tests/citus (sourced after scripts/common.sh, PostgreSQL 15,
# which is where ../shared/tools/build-citus installs Citus): a coordinator and two workers, each
# a cluster of its own run by the postgres user and made afresh for each run, on ports CITUS_PORT,
# +1 and +2 (default 5600; the expected output of tests/citus names 5601), listening on localhost
# (Citus connects to its nodes over TCP; initdb --auth=trust: a test machine only), with
# shared_preload_libraries = 'citus,simhash' (Citus first: it sets planner hooks without chaining
# earlier ones).
CITUS_PORT=${CITUS_PORT:-5600}
CITUS_DATA=${CITUS_DATA:-/var/lib/postgresql/simhash-citus}

citus_installed() { [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; }

# Starts node $1 (0 coordinator, 1 and 2 workers), creating it if needed.
citus_start_node() {
    local data=$CITUS_DATA-$1 port=$((CITUS_PORT + $1))
    if [ ! -f "$data/PG_VERSION" ]; then
        mkdir -p "$data" && chown postgres:postgres "$data" && chmod 700 "$data"
        as_postgres "$PG_BIN/initdb" -D "$data" -E UTF8 --locale=C.UTF-8 -U postgres --auth=trust >/dev/null
    fi
    if ! as_postgres "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        as_postgres "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -o "-p $port -k /tmp \
            -c listen_addresses=localhost -c shared_preload_libraries=citus,simhash -c max_connections=200 \
            -c max_worker_processes=32 ${CITUS_SERVER_OPTIONS:-}" start >/dev/null
    fi
}

citus_stop() {
    for node in 0 1 2; do
        as_postgres "$PG_BIN/pg_ctl" -D "$CITUS_DATA-$node" -w -m fast stop >/dev/null 2>&1 || true
    done
}

# Makes three new nodes (whatever an earlier run left in their data directories is removed) and
# database $1 on them a cluster with the extension created.
citus_cluster() {
    local db=$1
    citus_stop
    for node in 0 1 2; do
        rm -rf "$CITUS_DATA-$node"
        citus_start_node $node
        psql -q -v ON_ERROR_STOP=1 -p $((CITUS_PORT + node)) -d postgres -c "CREATE DATABASE $db"
        psql -q -v ON_ERROR_STOP=1 -p $((CITUS_PORT + node)) -d "$db" -c "CREATE EXTENSION citus"
    done
    psql -q -v ON_ERROR_STOP=1 -p "$CITUS_PORT" -d "$db" <<SQL >/dev/null
SELECT citus_set_coordinator_host('localhost', $CITUS_PORT);
SELECT citus_add_node('localhost', $((CITUS_PORT + 1)));
SELECT citus_add_node('localhost', $((CITUS_PORT + 2)));
CREATE EXTENSION simhash;
SQL
}
