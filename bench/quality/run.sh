#!/usr/bin/env bash
# Fingerprint quality harness, one command: installs the Debian documentation packages that give the
# corpus and a Python venv with the outside implementations, builds the `fingerprints` and
# `pair_similarity` examples, then evaluates every mode the first lists, and the verified recipe
# (fingerprint distance <= k and exact shingle similarity >= t) with the second. Report: stdout and
# bench/quality/results.md.
#
#   bench/quality/run.sh [harness.py options, e.g. --short 100 --medium 80 --long 40 --modes simhash]
#
# Environment: CARGO_TARGET_DIR (default: the repo's target/), QUALITY_VENV (default:
# /tmp/simhash-quality-venv).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${QUALITY_VENV:-/tmp/simhash-quality-venv}
target=${CARGO_TARGET_DIR:-$repo/target}
[[ $target == /* ]] || target=$repo/$target  # cargo reads a relative one from the repo root below

die() { echo "quality harness: error: $*" >&2; exit 1; }

# Debian packages: prose in English, Simplified and Traditional Chinese (the same books in each, so
# the same sections give real Simplified/Traditional pairs).
packages=(
  debian-reference-en debian-reference-zh-cn debian-reference-zh-tw
  maint-guide maint-guide-zh-cn maint-guide-zh-tw
  debian-handbook "installation-guide-$(dpkg --print-architecture)"
  python3-venv
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || die "missing Debian packages ${missing[*]}; install them as root"
  echo "installing ${missing[*]}" >&2
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi

# Python venv with pinned versions; rebuilt when the pins change.
requirements="jieba==0.42.1 simhash==2.1.2 datasketch==2.0.0 opencc==1.4.2"
if [[ ! -x $venv/bin/python || $(cat "$venv/.requirements" 2>/dev/null) != "$requirements" ]]; then
  echo "creating the venv $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed (is python3-venv installed?)"
  # shellcheck disable=SC2086  # the pins are separate words
  "$venv/bin/pip" install -q --disable-pip-version-check $requirements || die "pip install $requirements failed"
  echo "$requirements" >"$venv/.requirements"
fi
"$venv/bin/python" -c 'import jieba, simhash, datasketch, opencc' || die "the venv $venv lacks a package; delete it and rerun"

echo "building the fingerprints and pair_similarity examples (target dir $target)" >&2
(cd "$repo" && CARGO_TARGET_DIR=$target cargo build --release --quiet -p simhash-core --example fingerprints \
  --example pair_similarity) || die "cargo build of the fingerprints and pair_similarity examples failed"

exec "$venv/bin/python" "$here/harness.py" --bin "$target/release/examples/fingerprints" \
  --pair-bin "$target/release/examples/pair_similarity" \
  --out "$here/results.md" --details "$here/out/details.csv" --pairs "$here/out/pairs.csv" "$@"
