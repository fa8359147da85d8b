#!/usr/bin/env bash
# Runs the pg_regress suite (tests/pg_regress) against the cluster of scripts/common.sh.
# Usage: scripts/regress.sh [test ...]   (default: every tests/pg_regress/sql/*.sql)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
if [ $# -gt 0 ]; then tests=("$@"); else
    tests=($(ls tests/pg_regress/sql/*.sql | xargs -n1 basename | sed 's/\.sql$//'))
fi
outdir=${SIMHASH_REGRESS_OUT:-/tmp/simhash-regress}
rm -rf "$outdir" && mkdir -p "$outdir" && chmod 777 "$outdir"
fresh_database simhash_regress
PG_REGRESS=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress
status=0
"$PG_REGRESS" --use-existing --bindir="$PG_BIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
    --dbname=simhash_regress --inputdir=tests/pg_regress --outputdir="$outdir" "${tests[@]}" || status=$?
if [ $status -ne 0 ] && [ -f "$outdir/regression.diffs" ]; then
    cat "$outdir/regression.diffs"
fi
exit $status
