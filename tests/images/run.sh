#!/usr/bin/env bash
# 64-bit perceptual image hashes stored as simhash64 and found within a radius (docs/binary-codes.md):
# tests/images/images.py draws 200 unrelated images from a fixed seed, makes variants of each
# (resized, JPEG at quality 15, both, 25 % brighter, 3 % and 8 % cropped off each side, mirrored)
# and hashes all of them with imagehash's pHash and dHash; tests/images/check.sql loads the hashes
# into simhash64 columns with simhash indexes and checks, through the index (EXPLAIN must show it),
# the text forms, the distances against imagehash's own, the pairs within k against a bit_count()
# scan, the nearest rows against a sort, the share of each variant kind found within k, the false
# matches, and the near-duplicate constraint; then the table of distances per kind.
# Python packages: a venv at $SIMHASH_IMAGES_VENV (default target/images-venv), created and filled
# from PyPI (tests/images/requirements.txt: imagehash, Pillow, numpy, SciPy, PyWavelets) if missing.
#   usage: tests/images/run.sh          (PG_MAJOR=15|18; the scripts/common.sh cluster)
#          K=12 IMAGES=500 tests/images/run.sh   (other radius or count: measured, not asserted)
# Exit status 77 when the venv cannot be made (no python3 venv module, PyPI unreachable): the test
# command reports that as skipped.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
set -euo pipefail
here="$REPO_ROOT/tests/images"
venv=${SIMHASH_IMAGES_VENV:-$REPO_ROOT/target/images-venv}
k=${K:-10}
images=${IMAGES:-200}
strict=$([ "$images" = 200 ] && echo 1 || echo 0)

# (a venv that imports everything is kept as it is: no PyPI needed then)
if ! "$venv/bin/python" -c 'import imagehash, PIL, numpy, scipy, pywt' 2>/dev/null; then
    log "images: creating the Python venv $venv (imagehash and its dependencies, from PyPI)"
    if ! { python3 -m venv --clear "$venv" \
        && "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"; }; then
        echo "images: cannot create the venv $venv with tests/images/requirements.txt" >&2
        # (.ci/run sets SIMHASH_REQUIRE_IMAGES=1: there this fails the run instead of a skip)
        [ "${SIMHASH_REQUIRE_IMAGES:-0}" = 1 ] && exit 1
        exit 77
    fi
fi
"$venv/bin/python" -c 'import imagehash, PIL, numpy, scipy; print(f"images: imagehash {imagehash.__version__}, Pillow {PIL.__version__}, numpy {numpy.__version__}, SciPy {scipy.__version__}")'

work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
log "images: drawing $images images and their variants, hashing them (pHash, dHash)"
"$venv/bin/python" "$here/images.py" "$images" >"$work/hashes.tsv"
chmod 644 "$work/hashes.tsv"

start_cluster
db=simhash_images
fresh_database "$db"
log "images: lookups within k = $k through the simhash index (PostgreSQL $PG_MAJOR)"
psql -X -q -v ON_ERROR_STOP=1 -v k="$k" -v strict="$strict" -v hashes="$work/hashes.tsv" -d "$db" \
    -f "$here/check.sql"
psql -X -q -d postgres -c "DROP DATABASE $db"
log "images: all checks passed"
