#!/usr/bin/env bash
# The whole test suite: unit tests of the pure-Rust core, then the pg_regress suite against the
# installed extension on a real PostgreSQL 15 server. Installs whatever is missing first (the same
# steps as scripts/setup.sh, without the demo). Debian bookworm, as root.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_prerequisites
log "unit tests of simhash-core (cargo test)"
(cd "$REPO_ROOT" && cargo test -p simhash-core --release)
install_extension
start_cluster
log "pg_regress suite"
"$REPO_ROOT/scripts/regress.sh"
log "all tests passed"
