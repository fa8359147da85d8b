#!/usr/bin/env bash
# Runs the isolation suite (tests/isolation: pg_isolation_regress specs of the near-duplicate
# constraint's commit-time recheck, sessions interleaved step by step by isolationtester) against
# the cluster of scripts/common.sh.
# Usage: scripts/isolation.sh [spec ...]   (default: every tests/isolation/specs/*.spec)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
if [ $# -gt 0 ]; then specs=("$@"); else
    specs=($(ls tests/isolation/specs/*.spec | xargs -n1 basename | sed 's/\.spec$//'))
fi
# pg_isolation_regress runs isolationtester from its own directory. A step that neither finishes
# nor waits for a lock is cancelled after this many seconds (isolationtester's default is 300).
export PGISOLATIONTIMEOUT=${PGISOLATIONTIMEOUT:-60}
run_test_driver pg_isolation_regress tests/isolation simhash_isolation "${SIMHASH_ISOLATION_OUT:-/tmp/simhash-isolation}" "${specs[@]}"
