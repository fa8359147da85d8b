#!/usr/bin/env bash
# Runs the pg_regress suite (tests/pg_regress) against the cluster of scripts/common.sh.
# Usage: scripts/regress.sh [test ...]   (default: every tests/pg_regress/sql/*.sql)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
if [ $# -gt 0 ]; then tests=("$@"); else
    tests=($(ls tests/pg_regress/sql/*.sql | xargs -n1 basename | sed 's/\.sql$//'))
    # embedding_pgvector needs pgvector in this server (the 18 wheel has it; for 15,
    # ../shared/tools/build-pgvector builds it): left out loudly where it is missing.
    if ! pgvector_installed; then
        tests=($(printf '%s\n' "${tests[@]}" | grep -vx embedding_pgvector))
        printf '\n==> SKIPPED: pg_regress embedding_pgvector (pgvector is not installed in PostgreSQL %s)\n' "$PG_MAJOR"
    fi
fi
run_test_driver pg_regress tests/pg_regress simhash_regress "${SIMHASH_REGRESS_OUT:-/tmp/simhash-regress}" "${tests[@]}"
