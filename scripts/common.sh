# Shared steps of scripts/setup.sh, scripts/test.sh and bench/*.sh. Source it; do not run it.
# Everything is idempotent: a step that is already done is skipped.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/bin/pg_config}
PG_BIN=/usr/lib/postgresql/15/bin
# A cluster of our own (not Debian's "15 main"), owned by the postgres user.
SIMHASH_PGDATA=${SIMHASH_PGDATA:-/var/lib/postgresql/simhash-15}
export PGHOST=${PGHOST:-/tmp}
export PGPORT=${SIMHASH_PGPORT:-5499}
export PGUSER=postgres
PGRX_VERSION=0.18.0
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

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
    if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION"; then
        log "installing cargo-pgrx $PGRX_VERSION (takes about 5 minutes)"
        cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
    fi
    if [ ! -f "${PGRX_HOME:-$HOME/.pgrx}/config.toml" ] || ! grep -q pg15 "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
        log "cargo pgrx init --pg15 $PG_CONFIG"
        cargo pgrx init --pg15 "$PG_CONFIG"
    fi
}

install_extension() {
    log "building and installing the extension (release)"
    (cd "$REPO_ROOT" && cargo pgrx install --release --pg-config "$PG_CONFIG")
}

# The #[pg_test] functions, in a throwaway cluster that cargo-pgrx starts as the postgres user.
# It installs a test build of the extension: run install_extension after it.
run_pg_tests() {
    local data=/var/lib/postgresql/simhash-pgrx-test
    mkdir -p "$data" && chown postgres:postgres "$data"
    (cd "$REPO_ROOT" && cargo pgrx test pg15 --runas postgres --pgdata "$data")
}

start_cluster() {
    if [ ! -f "$SIMHASH_PGDATA/PG_VERSION" ]; then
        log "creating a UTF8 cluster in $SIMHASH_PGDATA"
        mkdir -p "$SIMHASH_PGDATA"
        chown postgres:postgres "$SIMHASH_PGDATA"
        chmod 700 "$SIMHASH_PGDATA"
        as_postgres "$PG_BIN/initdb" -D "$SIMHASH_PGDATA" -E UTF8 --locale=C.UTF-8 -U postgres --auth=trust >/dev/null
    fi
    if ! as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" status >/dev/null 2>&1; then
        log "starting PostgreSQL 15 on port $PGPORT (socket in $PGHOST)"
        as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -l "$SIMHASH_PGDATA/server.log" -w \
            -o "-p $PGPORT -k $PGHOST -c listen_addresses='' ${SIMHASH_SERVER_OPTIONS:-}" start >/dev/null
    fi
}

# Restarts the cluster with extra server options (e.g. "-c shared_buffers=2GB" for benchmarks).
restart_cluster() {
    as_postgres "$PG_BIN/pg_ctl" -D "$SIMHASH_PGDATA" -w -m fast stop >/dev/null 2>&1 || true
    SIMHASH_SERVER_OPTIONS="$1" start_cluster
}

# Recreates database $1 with the extension installed.
fresh_database() {
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
