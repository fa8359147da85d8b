#!/usr/bin/env bash
# The Citus tests: a coordinator and two workers on this machine (tests/citus/cluster.sh, PostgreSQL
# 15 with Citus installed, e.g. by ../shared/tools/build-citus), then pg_regress of tests/citus/sql
# against the coordinator: each answer on a distributed table equals that of a plain table on one
# node. Without Citus it says so and succeeds. The nodes are stopped afterwards.
#   usage: tests/citus/run.sh [test ...]
PG_MAJOR=15
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
source "$REPO_ROOT/tests/citus/cluster.sh"
if ! citus_installed; then
    # (.ci/run, which builds Citus, sets SIMHASH_REQUIRE_CITUS=1: there a missing Citus fails)
    [ "${SIMHASH_REQUIRE_CITUS:-0}" = 1 ] && die "Citus is not installed in PostgreSQL 15 ($("$PG_CONFIG" --pkglibdir))"
    log "Citus is not installed in PostgreSQL 15 ($("$PG_CONFIG" --pkglibdir)): skipping tests/citus (../shared/tools/build-citus installs it)"
    exit 0
fi
tests=("$@"); [ ${#tests[@]} -gt 0 ] || tests=(citus)
outdir=${SIMHASH_CITUS_OUT:-/tmp/simhash-citus}
log "Citus: a coordinator (port $CITUS_PORT) and two workers"
trap citus_stop EXIT
citus_cluster simhash_citus_regress
rm -rf "$outdir" && mkdir -p "$outdir" && chmod 777 "$outdir"
status=0
"$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress" --use-existing --bindir="$PG_BIN" \
    --host=/tmp --port="$CITUS_PORT" --user=postgres --dbname=simhash_citus_regress \
    --inputdir="$REPO_ROOT/tests/citus" --outputdir="$outdir" "${tests[@]}" || status=$?
if [ $status -ne 0 ] && [ -f "$outdir/regression.diffs" ]; then
    cat "$outdir/regression.diffs"
fi
exit $status
