#!/usr/bin/env bash
# The examples of README.md and docs/ run as shown (tests/docs/examples.py says how), against the
# cluster of scripts/common.sh, each markdown file in a fresh database simhash_examples_<name>
# prepared by tests/docs/fixtures/<name>.sql.
#   usage: tests/docs/run.sh [FILE.md ...]     (PG_MAJOR=15|18)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
start_cluster
exec python3 "$REPO_ROOT/tests/docs/examples.py" "$@"
