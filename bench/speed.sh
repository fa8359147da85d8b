#!/usr/bin/env bash
# Fingerprinting speed: the extension (SELECT f(body) FROM a table) next to the same Rust code as a
# standalone binary (the `fingerprints` example), on the same texts, in one run; plus the first call
# in a new connection and the backend's resident memory.
#   usage: bench/speed.sh     (needs scripts/setup.sh and the Debian documentation packages that
#                              bench/quality/run.sh installs; about 2 minutes)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
set -euo pipefail
cd "$REPO_ROOT"
db=simhash_bench_speed
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
ls /usr/share/debian-reference/*.zh-cn.html >/dev/null 2>&1 || { echo "install debian-reference-zh-cn and -en (bench/quality/run.sh does)" >&2; exit 1; }

# Texts: paragraphs of debian-reference (Simplified Chinese and English), ~2,000 characters each.
python3 - "$work" <<'PY'
import glob, html, re, sys
work = sys.argv[1]
docs = []
for lang in ("zh-cn", "en"):
    text = ""
    for f in sorted(glob.glob(f"/usr/share/debian-reference/*.{lang}.html")):
        s = open(f, encoding="utf-8", errors="ignore").read()
        s = re.sub(r"<(script|style|pre)\b.*?</\1>", " ", s, flags=re.S)
        text += re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", s)))
    docs += [text[i:i + 2000] for i in range(0, len(text), 2000)]
docs = docs * 4  # about 4 MB; the repeats are not adjacent, so no memo helps
open(f"{work}/docs.bin", "w").write("\0".join(docs))
with open(f"{work}/docs.tsv", "w") as out:
    for d in docs:
        out.write(d.replace("\\", "\\\\").replace("\t", " ") + "\n")
PY

cargo build --release --quiet -p simhash-core --example fingerprints --example similarity
start_cluster >/dev/null
fresh_database "$db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
q -c "CREATE TABLE docs (body text)" -c "\\copy docs FROM '$work/docs.tsv'"
# Pairs of neighbouring texts for the similarity (each text with the next one).
q -c "CREATE TABLE pairs AS SELECT body AS a, lead(body) OVER (ORDER BY ctid) AS b FROM docs" -c "DELETE FROM pairs WHERE b IS NULL"
bytes=$(q -At -c "SELECT sum(octet_length(body)) FROM docs")
first_call=$(psql -X -d "$db" -At -c '\timing on' -c "SELECT simhash('数据库') IS NOT NULL" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
rss_of_session() {  # the backend's VmRSS in kB after running $1, read while the session is open
    psql -X -d "$db" -At <<SQL | tail -1
$1
SELECT pg_backend_pid() AS pid \gset
\setenv BACKEND_PID :pid
\! awk '/VmRSS/ {print \$2}' /proc/\$BACKEND_PID/status
SQL
}
rss_idle=$(rss_of_session "SELECT 1;")
rss=$(rss_of_session "SELECT simhash('数据库') IS NOT NULL, minhash64('x') IS NOT NULL;")
echo
echo "Fingerprinting speed, $(wc -l <"$work/docs.tsv") texts of about 2,000 characters from debian-reference (zh-cn and en), $((bytes / 1000000)) MB of UTF-8; one core."
echo
echo "| function | standalone binary MB/s | SELECT f(body) FROM docs MB/s | extension / standalone |"
echo "|---|---|---|---|"
for pair in "simhash:simhash(body)" "minhash64:minhash64(body)" "minhash64_4x2:minhash64(body, 4, 2)" "simhash_ngrams3:simhash_ngrams(body)"; do
    mode=${pair%%:*}; call=${pair#*:}
    # Best of three runs each: the machine's timings vary from run to run.
    standalone=$(for i in 1 2 3; do target/release/examples/fingerprints "$mode" <"$work/docs.bin" 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) MB\/s$/\1/p'; done | sort -g | tail -1)
    # Warm the backend (dictionaries) first, then time the query in the same session.
    ms=$(q -At -c "SELECT $call FROM docs LIMIT 1" -c '\timing on' -c "SELECT count($call) FROM docs" -c "SELECT count($call) FROM docs" -c "SELECT count($call) FROM docs" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -g | head -1)
    python3 -c "import sys; b=int(sys.argv[1]); s=float(sys.argv[2]); ms=float(sys.argv[3]); e=b/1e6/(ms/1e3); print(f'| {sys.argv[4]} | {s:.1f} | {e:.1f} | {e/s:.0%} |')" "$bytes" "$standalone" "$ms" "$call"
done
echo
echo "Exact similarity of two texts (simhash_similarity(a, b), n = 3: both texts folded and cut into shingle sets, then compared), each text with the next one:"
echo
echo "| call | standalone binary µs per pair | SQL µs per call |"
echo "|---|---|---|"
standalone=$(for i in 1 2 3; do target/release/examples/similarity 3 <"$work/docs.bin" | sed -n 's/.*, \([0-9.]*\) µs per pair.*/\1/p'; done | sort -g | head -1)
npairs=$(q -At -c "SELECT count(*) FROM pairs")
sql_ms() { q -At -c "SELECT count(*) FROM pairs WHERE $1 IS NOT NULL" -c '\timing on' -c "SELECT count($1) FROM pairs" -c "SELECT count($1) FROM pairs" -c "SELECT count($1) FROM pairs" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -g | head -1; }
both=$(sql_ms "simhash_similarity(a, b)")
fixed=$(sql_ms "simhash_similarity(b, (SELECT a FROM pairs LIMIT 1))")
python3 -c "import sys; n=int(sys.argv[1]); print(f'| simhash_similarity(a, b), two new texts per call | {float(sys.argv[2]):.1f} | {float(sys.argv[3])*1e3/n:.1f} |'); print(f'| simhash_similarity(body, \$1), one side the same text (a verified lookup) | - | {float(sys.argv[4])*1e3/n:.1f} |')" "$npairs" "$standalone" "$both" "$fixed"
echo
echo "First simhash() call in a new connection (loads jieba-rs' dictionary and IDF table, the folding tables): ${first_call} ms."
echo "Backend resident memory: ${rss_idle} kB idle, ${rss} kB after simhash() and minhash64()."
