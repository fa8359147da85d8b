#!/usr/bin/env bash
# Runs the pg_regress suite (tests/pg_regress) against the cluster of scripts/common.sh.
# Usage: scripts/regress.sh [test ...]   (default: every tests/pg_regress/sql/*.sql)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
if [ $# -gt 0 ]; then tests=("$@"); else
    tests=($(ls tests/pg_regress/sql/*.sql | xargs -n1 basename | sed 's/\.sql$//'))
fi
# A test whose first line is "-- needs: vector" runs only where the server has pgvector.
if ! pgvector_available; then
    for i in "${!tests[@]}"; do
        if head -1 "tests/pg_regress/sql/${tests[$i]}.sql" | grep -q '^-- needs: vector'; then
            echo "SKIPPED: pg_regress test ${tests[$i]} (pgvector is not installed in PostgreSQL $PG_MAJOR)"
            unset 'tests[i]'
        fi
    done
    tests=("${tests[@]}")
    [ ${#tests[@]} -gt 0 ] || exit 0
fi
run_test_driver pg_regress tests/pg_regress simhash_regress "${SIMHASH_REGRESS_OUT:-/tmp/simhash-regress}" "${tests[@]}"
