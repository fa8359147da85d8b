#!/usr/bin/env bash
# Beside text-dedup: the same N real paragraphs deduplicated end to end by text-dedup 0.4.0's MinHash
# pipeline (PyPI) and by the extension, in one run; their times, peak memory and removed sets.
#   usage: bench/text_dedup.sh [N]      (default 200000; 1000000 takes every paragraph
#                                        bench/real_texts.py finds, about 930,000 on a build machine)
# Texts: up to N paragraphs of bench/real_texts.py (Debian documentation, man pages, crate docs),
# id = line number, written once as a tab-separated file (id, body) for COPY and as JSON Lines
# ({"id", "text"}) for text-dedup; neither conversion is timed.
# text-dedup: `python -m text_dedup.minhash --path json --data_files docs.jsonl --split train
# --column text --num_perm 256 --ngram 5 --threshold 0.7 --num_proc $(nproc) --debug --idx_column id
# ...` (word 5-grams, its default sha1 hashes, LSH bands and rows from its optimal_param, a
# union-find over the bands' collisions; it keeps one document of each group, the union-find's root,
# and drops documents shorter than 5 words; --debug --idx_column id saves the union-find with our
# ids, uf.pkl, from which its groups are read),
# installed with `python3 -m venv $TEXT_DEDUP_VENV && $TEXT_DEDUP_VENV/bin/pip install
# text-dedup==0.4.0` when not there (default venv bench/.venv-text-dedup, ignored by git; the
# versions of its main dependencies are printed). Time: wall clock of the command, with its own
# phase times; memory: the peak resident set size of its largest process (GNU time -v; each of
# its --num_proc worker processes holds its own).
# The extension, in one psql session on the server of scripts/common.sh restarted with its
# defaults: CREATE TABLE docs (id, body, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED),
# \copy, CREATE INDEX ... USING simhash (fp), and the groups of verified near-duplicates,
# simhash_clusters('docs', 'fp', 9, 'body', 0.7), materialized (maintenance_work_mem=1GB for the
# pairs). Time: psql's \timing of each statement and the wall clock of the session; memory: the
# backend's peak resident set size (VmHWM; the shared buffers it touched count too, the parallel
# workers of the index build do not). Grouped: documents with at least one near-duplicate. Removed:
# text-dedup's, the documents not in its output; the extension's, the rows of a group other than its
# representative (its smallest id). The two keep different members of a group, so the overlap is
# given for both sets, and where they disagree the exact similarity of each removed document to the
# one kept in its place. K, THRESHOLD, NUM_PERM and NGRAM override 9, 0.7, 256 and 5.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
N=${1:-200000}
K=${K:-9}
THRESHOLD=${THRESHOLD:-0.7}
NUM_PERM=${NUM_PERM:-256}
NGRAM=${NGRAM:-5}
VERSION=0.4.0
VENV=${TEXT_DEDUP_VENV:-$REPO_ROOT/bench/.venv-text-dedup}
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time, Debian package time) is needed for the peak memory"

if [[ $("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('text-dedup'))" 2>/dev/null) != "$VERSION" ]]; then
    log "installing text-dedup $VERSION into $VENV: python3 -m venv $VENV && $VENV/bin/pip install text-dedup==$VERSION"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "text-dedup==$VERSION"
fi
versions=$("$VENV/bin/python" -c "
import importlib.metadata as m, sys
print(', '.join(f'{p} {m.version(p)}' for p in ('text-dedup', 'datasets', 'numpy', 'pyarrow', 'xxhash')) + ', Python ' + sys.version.split()[0])")

log "collecting up to $N real paragraphs (bench/real_texts.py)"
python3 "$REPO_ROOT/bench/real_texts.py" "$N" 2>"$work/real_texts.err" | awk '{ print NR "\t" $0 }' > "$work/docs.tsv"
cat "$work/real_texts.err"
N=$(wc -l < "$work/docs.tsv")
python3 - "$work/docs.tsv" "$work/docs.jsonl" <<'PY'
import json, re, sys
# COPY text format back to text: \\ \t \n \r (bench/real_texts.py escapes only these).
unescape = lambda s: re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), s)
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in src:
        i, body = line.rstrip("\n").split("\t", 1)
        out.write(json.dumps({"id": int(i), "text": unescape(body)}, ensure_ascii=False) + "\n")
PY
chmod 644 "$work"/docs.*

log "text-dedup $VERSION MinHash: $NUM_PERM permutations, word $NGRAM-grams, threshold $THRESHOLD"
t0=$(now)
(cd "$work" && COLUMNS=200 /usr/bin/time -v -o td.time "$VENV/bin/python" -m text_dedup.minhash \
    --path json --data_files "$work/docs.jsonl" --split train --cache_dir "$work/td-cache" \
    --output "$work/td-out" --column text --num_perm "$NUM_PERM" --ngram "$NGRAM" \
    --threshold "$THRESHOLD" --num_proc "$(nproc)" --debug --idx_column id > td.log 2>&1) || { cat "$work/td.log" >&2; die "text-dedup failed"; }
td_s=$(elapsed "$t0")
td_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/td.time")
# Its phases (the Timer lines of its log), its LSH parameters, the ids it removed (those not in its
# output, each marked 1 when shorter than its min_length, 5 words: dropped before hashing) and its
# groups (id, the group's root) from the saved union-find.
td_phases=$(sed -n 's/^.*INFO *\([A-Za-z]*\) *: *\([0-9.]*\)s.*$/\1 \2 s/p' "$work/td.log" | paste -sd, | sed 's/,/, /g')
read -r td_bands td_rows <<<"$("$VENV/bin/python" -c "from text_dedup.utils import optimal_param; print(*optimal_param($THRESHOLD, $NUM_PERM))")"
"$VENV/bin/python" - "$work/docs.jsonl" "$work/td-out" "$work/td_removed.tsv" "$work/td_groups.tsv" <<'PY'
import collections, json, os, pickle, sys
import datasets
from text_dedup.minhash import NON_ALPHA
kept = set(datasets.load_from_disk(sys.argv[2])["id"])
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[3], "w") as out:
    for line in src:
        doc = json.loads(line)
        if doc["id"] not in kept:
            short = len(NON_ALPHA.split(doc["text"].lower())) < 5
            out.write(f"{doc['id']}\t{int(short)}\n")
with open(os.path.join(sys.argv[2], "uf.pkl"), "rb") as f:
    uf = pickle.load(f)
root = {x: uf.find(x) for x in list(uf.parent)}
size = collections.Counter(root.values())
with open(sys.argv[4], "w") as out:
    for x, r in root.items():
        if size[r] > 1:
            out.write(f"{x}\t{r}\n")
PY
chmod 644 "$work"/td_*.tsv

log "the extension: COPY with minhash64(body), a simhash index, simhash_clusters(..., $K, 'body', $THRESHOLD)"
restart_cluster ""
fresh_database simhash_bench_text_dedup
export PGDATABASE=simhash_bench_text_dedup
t0=$(now)
psql -X -v ON_ERROR_STOP=1 -At > "$work/ext.log" <<SQL
SET maintenance_work_mem = '1GB';
SELECT pg_backend_pid() AS pid \gset
\setenv BACKEND_PID :pid
\timing on
CREATE TABLE docs (id bigint PRIMARY KEY, body text NOT NULL,
                   fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED);
\copy docs (id, body) FROM '$work/docs.tsv'
CREATE INDEX docs_fp_simhash ON docs USING simhash (fp);
CREATE TABLE clusters AS SELECT * FROM simhash_clusters('docs', 'fp', $K, 'body', $THRESHOLD);
\timing off
\! grep VmHWM /proc/\$BACKEND_PID/status
SQL
ext_s=$(elapsed "$t0")
ext_kb=$(awk '/VmHWM/ { print $2 }' "$work/ext.log")
read -r copy_ms index_ms clusters_ms <<<"$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$work/ext.log" | sed -n '2,4p' | paste -sd' ')"
ms_to_s() { python3 -c "import sys; print(f'{float(sys.argv[1]) / 1000:.2f}')" "$1"; }
index_mb=$(psql -At -c "SELECT round(pg_relation_size('docs_fp_simhash') / 1048576.0)")
table_mb=$(psql -At -c "SELECT round(pg_table_size('docs') / 1048576.0)")

log "comparing the groups and the removed sets"
psql -q -v ON_ERROR_STOP=1 -c "CREATE TABLE td_removed (id bigint PRIMARY KEY, short boolean)" \
    -c "\\copy td_removed FROM '$work/td_removed.tsv'" \
    -c "CREATE TABLE td_groups (id bigint PRIMARY KEY, root bigint)" \
    -c "\\copy td_groups FROM '$work/td_groups.tsv'"
read -r td_grouped td_groups td_removed td_short ext_grouped ext_groups ext_removed grouped_both removed_both td_removed_grouped ext_removed_grouped <<<"$(psql -At -F ' ' -c "
    SELECT (SELECT count(*) FROM td_groups), (SELECT count(DISTINCT root) FROM td_groups),
           (SELECT count(*) FROM td_removed), (SELECT count(*) FROM td_removed WHERE short),
           (SELECT count(*) FROM clusters), (SELECT count(DISTINCT representative) FROM clusters),
           (SELECT count(*) FROM clusters WHERE id <> representative),
           (SELECT count(*) FROM td_groups JOIN clusters USING (id)),
           (SELECT count(*) FROM td_removed JOIN clusters c USING (id) WHERE c.id <> c.representative),
           (SELECT count(*) FROM td_removed JOIN clusters USING (id)),
           (SELECT count(*) FROM clusters c JOIN td_groups USING (id) WHERE c.id <> c.representative)")"
# Where they disagree, the exact similarity (simhash_similarity: Jaccard of character 3-gram sets,
# the extension's verification) of each removed document to the one its pipeline kept in its place:
# text-dedup's removals outside any group of the extension, against their group's root; the
# extension's removals outside any group of text-dedup, against their representative. Each line:
# documents, the 10th / 50th / 90th percentile, how many at or above THRESHOLD.
disagree() {
    psql -At -F ' ' -c "SELECT count(*), coalesce(round(percentile_cont(0.1) WITHIN GROUP (ORDER BY s)::numeric, 2)::text, '-'),
        coalesce(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY s)::numeric, 2)::text, '-'),
        coalesce(round(percentile_cont(0.9) WITHIN GROUP (ORDER BY s)::numeric, 2)::text, '-'),
        count(*) FILTER (WHERE s >= $THRESHOLD) FROM ($1) x"
}
read -r td_only td_only_p10 td_only_p50 td_only_p90 td_only_above <<<"$(disagree "
    SELECT simhash_similarity(d.body, r.body) AS s FROM td_removed t JOIN td_groups g USING (id)
    JOIN docs d ON d.id = t.id JOIN docs r ON r.id = g.root
    WHERE g.root <> t.id AND NOT EXISTS (SELECT FROM clusters c WHERE c.id = t.id)")"
read -r ext_only ext_only_p10 ext_only_p50 ext_only_p90 ext_only_above <<<"$(disagree "
    SELECT simhash_similarity(d.body, r.body) AS s FROM clusters c
    JOIN docs d ON d.id = c.id JOIN docs r ON r.id = c.representative
    WHERE c.id <> c.representative AND NOT EXISTS (SELECT FROM td_groups g WHERE g.id = c.id)")"
pct() { python3 -c "import sys; a, b = map(int, sys.argv[1:]); print(f'{100 * a / b:.1f} %' if b else '-')" "$1" "$2"; }
gb() { python3 -c "import sys; print(f'{int(sys.argv[1]) / 1048576:.2f} GB')" "$1"; }

echo
echo "Deduplicating $N real paragraphs (bench/real_texts.py, $(du -m "$work/docs.tsv" | cut -f1) MB of text) end to end, one run on $(nproc) cores; $(server_settings), maintenance_work_mem=1GB for the session; text-dedup from PyPI ($versions)."
echo
echo "| pipeline | time s | peak memory | documents in groups (groups) | removed | removed by the other too | removed and in a group of the other |"
echo "|---|---|---|---|---|---|---|"
echo "| text-dedup $VERSION MinHash LSH ($NUM_PERM permutations, word $NGRAM-grams, threshold $THRESHOLD: $td_bands bands of $td_rows rows), --num_proc $(nproc) | $td_s | $(gb "$td_kb") (largest process) | $td_grouped ($td_groups) | $td_removed ($td_short of them shorter than 5 words) | $removed_both ($(pct "$removed_both" "$td_removed")) | $td_removed_grouped ($(pct "$td_removed_grouped" "$td_removed")) |"
echo "| simhash: COPY with \`minhash64(body)\`, \`simhash\` index, \`simhash_clusters('docs', 'fp', $K, 'body', $THRESHOLD)\` | $ext_s | $(gb "$ext_kb") (backend) | $ext_grouped ($ext_groups) | $ext_removed | $removed_both ($(pct "$removed_both" "$ext_removed")) | $ext_removed_grouped ($(pct "$ext_removed_grouped" "$ext_removed")) |"
echo
echo "Documents in a group of both: $grouped_both ($(pct "$grouped_both" "$td_grouped") of text-dedup's, $(pct "$grouped_both" "$ext_grouped") of the extension's). text-dedup's phases: $td_phases. The extension's statements: COPY with minhash64 $(ms_to_s "$copy_ms") s (table $table_mb MB), index $(ms_to_s "$index_ms") s ($index_mb MB), simhash_clusters $(ms_to_s "$clusters_ms") s."
echo
echo "Where they disagree (exact similarity: simhash_similarity, Jaccard of character 3-gram sets, of a removed document and the one kept in its place; 10th / 50th / 90th percentile):"
echo
echo "| removed by | only | similarity p10 / p50 / p90 | at or above $THRESHOLD |"
echo "|---|---|---|---|"
echo "| text-dedup, in no group of the extension (against its group's root) | $td_only | $td_only_p10 / $td_only_p50 / $td_only_p90 | $td_only_above |"
echo "| the extension, in no group of text-dedup (against its representative) | $ext_only | $ext_only_p10 / $ext_only_p50 / $ext_only_p90 | $ext_only_above |"
