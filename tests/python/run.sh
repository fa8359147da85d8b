#!/usr/bin/env bash
# The Python package (python/, pgsimhash) against the real server: pytest over tests/python/ with
# the cluster of scripts/common.sh (libpq's PGHOST/PGPORT/PGUSER; conftest.py makes a fresh
# database with the extension per test module). test_fingerprints.py: the client's fingerprints,
# fold and similarities equal the server's on 100,000 texts of every script; test_loader.py:
# pgsimhash-load on 100,000 rows with planted near-duplicates, report mode, retries, Parquet; the
# adapters' and ORMs' tests (psycopg, asyncpg, SQLAlchemy, Django) beside them.
# Python packages: a venv at $SIMHASH_PYTHON_VENV (default target/python-venv) with
# tests/python/requirements.txt from PyPI, and ./python built by maturin (pip install
# --no-build-isolation: the venv's maturin, cargo's cache of crates/python/target). The wheel is
# rebuilt only when python/, crates/python or crates/core changed since the venv's last build
# (a stamp in the venv), so the runs for 15 and 18 build it once.
#   usage: tests/python/run.sh [PYTEST ARGS...]   (PG_MAJOR=15|18; the scripts/common.sh cluster)
# Exit status 77 when the venv cannot be made (no python3 venv module, PyPI unreachable): the test
# command reports that as skipped (.ci/run sets SIMHASH_REQUIRE_PYTHON=1: there it fails).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
here="$REPO_ROOT/tests/python"
venv=${SIMHASH_PYTHON_VENV:-$REPO_ROOT/target/python-venv}

unavailable() {
    echo "python: $*" >&2
    [ "${SIMHASH_REQUIRE_PYTHON:-0}" = 1 ] && exit 1
    exit 77
}

# (a venv that imports everything is kept as it is: no PyPI needed then)
if ! "$venv/bin/python" -c 'import maturin, pytest, psycopg, asyncpg, sqlalchemy, greenlet, django, pyarrow' 2>/dev/null; then
    log "python: creating the venv $venv (tests/python/requirements.txt, from PyPI)"
    { python3 -m venv --clear "$venv" \
        && "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"; } \
        || unavailable "cannot create the venv $venv with tests/python/requirements.txt"
fi
# The sources the wheel is built from, as one hash; the venv keeps the hash of its last build.
stamp=$(cd "$REPO_ROOT" && find python crates/python/src crates/python/Cargo.toml crates/python/Cargo.lock \
    crates/core/src crates/core/Cargo.toml -type f ! -path '*/__pycache__/*' -print0 | sort -z \
    | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$venv/pgsimhash.stamp" 2>/dev/null)" != "$stamp" ] || ! "$venv/bin/python" -c 'import pgsimhash' 2>/dev/null; then
    log "python: building and installing ./python (maturin, release)"
    PATH="$venv/bin:$PATH" "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
        --force-reinstall --no-deps \
        "$REPO_ROOT/python"
    echo "$stamp" >"$venv/pgsimhash.stamp"
fi
"$venv/bin/python" -c 'import pgsimhash, psycopg, sqlalchemy, django, asyncpg; print(f"python: pgsimhash {pgsimhash.__version__}, psycopg {psycopg.__version__}, asyncpg {asyncpg.__version__}, SQLAlchemy {sqlalchemy.__version__}, Django {django.__version__}")'

start_cluster
log "python: pytest tests/python (PostgreSQL $PG_MAJOR)"
cd "$here"
status=0
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$@" "$here" || status=$?
# (5: no test collected, a failure here)
[ "$status" = 0 ] || die "python: pytest failed (exit status $status)"
log "python: all tests passed"
