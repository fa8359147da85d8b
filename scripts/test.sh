#!/usr/bin/env bash
# The whole test suite: lints, unit tests of the pure-Rust core, the #[pg_test] tests, then the
# pg_regress and isolation suites against the installed extension on a real PostgreSQL 15 server,
# then the concurrency test. Installs whatever is missing first (the steps of scripts/setup.sh,
# without the demo, plus sudo for cargo pgrx test). Debian bookworm, as root.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
EXTRA_PACKAGES=sudo install_prerequisites
if cargo clippy --version >/dev/null 2>&1; then
    log "lints (cargo clippy --workspace -- -D warnings)"
    (cd "$REPO_ROOT" && cargo clippy --workspace --features pg15 --all-targets -- -D warnings)
else
    log "cargo clippy is not installed: lints not checked"
fi
log "unit tests of simhash-core (cargo test)"
(cd "$REPO_ROOT" && cargo test -p simhash-core --release)
log "#[pg_test] tests (cargo pgrx test)"
run_pg_tests
install_extension
start_cluster
log "pg_regress suite"
"$REPO_ROOT/scripts/regress.sh"
log "isolation suite (commit-time recheck of the near-duplicate constraint)"
"$REPO_ROOT/scripts/isolation.sh"
log "concurrency test of the near-duplicate constraint"
"$REPO_ROOT/tests/concurrency/dedup.sh" 3 7 7:verify
log "all tests passed"
