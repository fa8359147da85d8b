#!/usr/bin/env bash
# Table-scale false matches: how many pairs each fingerprint mode and radius finds among N real
# texts, what they are (exact Jaccard of character 5-shingles, J5), how many unrelated texts a
# lookup returns at N and, extrapolated linearly, at 1M and 10M rows, and the same after
# verification (exact Jaccard of 3-grams, `simhash_similarity(a, b) >= t`); then what verification
# costs a lookup.
#   usage: bench/table_scale.sh [N]      (default 300000; needs scripts/setup.sh; SAMPLE (2000),
#                                         LOOKUPS (300), TIMED_PASSES (3), SEED in the environment)
# Texts: up to N distinct paragraphs from bench/real_texts.py (Debian documentation, man pages,
# crate docs), id = output order. Labels: J5 = simhash_similarity(a, b, 5), J5 >= 0.8 "near copy",
# 0.5 <= J5 < 0.8 "related", J5 < 0.5 "false". Per (mode, k) the pairs are counted with
# simhash_pairs (count(*), nothing fetched) and a uniform random sample of up to SAMPLE pairs (the
# SAMPLE smallest hashint8extended(pair, SEED)) is labelled; the J5 < 0.5 share has a 95 % Wilson
# interval. False matches per lookup at N = 2 x pairs / N x share(J5 < 0.5) (N = rows with a
# fingerprint in that mode); unrelated pairs grow with N^2, so per lookup they grow linearly with N.
# Verified pairs: simhash_pairs(..., 'body', 0.7), the t = 0.8 set is its subset, each sampled the
# same way. Lookup cost: LOOKUPS stored texts with one character replaced, each looked up as
# `fp <~> minhash64($1) <= k` with and without `AND simhash_similarity(body, $1) >= 0.8` through
# plpgsql EXECUTE ... USING (parse, plan with the text folded in, execute; timed with
# clock_timestamp() on the server, TIMED_PASSES passes after one untimed pass), with the four
# covering segment B-trees (SimHash Radius Scan); candidates = "Rows Within Radius" of EXPLAIN
# ANALYZE. Progress goes to stderr, the markdown report to stdout:
#   bench/table_scale.sh 300000 > bench/table_scale.md   (5 minutes on a quiet 2-core machine, 20 shared)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
log() { printf '\n==> %s\n' "$*" >&2; }   # progress on stderr: stdout is the markdown report
N=${1:-300000}
SAMPLE=${SAMPLE:-2000}
LOOKUPS=${LOOKUPS:-300}
TIMED_PASSES=${TIMED_PASSES:-3}   # timed passes over the lookups, after one untimed pass
SEED=${SEED:-20240601}
DB=simhash_bench_table_scale
# mode column | SQL expression | radii
MODES=(
    "fp_simhash|simhash(body)|3 7"
    "fp_mh3|minhash64(body)|9 10 11"
    "fp_mh5|minhash64(body, 5)|7 9"
    "fp_mh4x2|minhash64(body, 4, 2)|7 11"
    "fp_ng3|simhash_ngrams(body, 3)|7"
)
# lookup cost: column | expression of $1 | radius
LOOKUP_MODES=(
    "fp_mh3|minhash64(\$1)|9"
    "fp_mh3|minhash64(\$1)|10"
    "fp_mh3|minhash64(\$1)|11"
    "fp_mh4x2|minhash64(\$1, 4, 2)|11"
)

# The table and its indexes take about 200 MB at 300,000 rows: restart the cluster with 2 GB of
# shared_buffers only if it has less than 512 MB (a restart ends every other session on it).
start_cluster
sb_mb=$(psql -X -At -d postgres -c "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'")
if ((sb_mb < 512)); then restart_cluster "-c shared_buffers=2GB"; fi
export PGOPTIONS="-c jit=off -c max_parallel_workers_per_gather=2"
fresh_database "$DB"
export PGDATABASE=$DB
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
start_all=$(now)
# The extension's library: a reinstall during the run would mix builds (reported at the end).
so_file="$($PG_CONFIG --pkglibdir)/simhash.so"
so_stamp() { stat -c '%y, %s bytes' "$so_file"; }
so_before=$(so_stamp)

log "loading up to $N real texts (bench/real_texts.py)"
t0=$(now)
q -c "CREATE UNLOGGED TABLE texts (id bigserial, body text NOT NULL)"
python3 "$REPO_ROOT/bench/real_texts.py" "$N" 2>"$work/real_texts.err" |
    PGCLIENTENCODING=UTF8 q -c "COPY texts (body) FROM STDIN"
cat "$work/real_texts.err" >&2
load_s=$(elapsed "$t0")
log "fingerprinting: ${#MODES[@]} modes (parallel CREATE TABLE AS)"
t0=$(now)
cols=""
for m in "${MODES[@]}"; do IFS='|' read -r col expr _ <<<"$m"; cols+=", $expr AS $col"; done
# docs(id bigint primary key, body text) plus one fingerprint column per mode.
q <<SQL
CREATE TABLE docs AS SELECT id, body $cols FROM texts;
ALTER TABLE docs ADD PRIMARY KEY (id);
DROP TABLE texts;
VACUUM ANALYZE docs;
CREATE EXTENSION pg_prewarm;
SELECT pg_prewarm('docs') \g /dev/null
CREATE TABLE results (mode text, col text, k int, set text, rows bigint, pairs bigint, seconds float8,
                      sample int, hi int, mid int, lo int, nolabel int);
CREATE TABLE pair_sample (mode text, k int, set text, id_a bigint, id_b bigint, j5 float8);
SQL
fp_s=$(elapsed "$t0")
N=$(qa -c "SELECT count(*) FROM docs")
read -r avg_chars table_mb <<<"$(qa -F ' ' -c "SELECT round(avg(char_length(body))), round(pg_total_relation_size('docs') / 1048576.0) FROM docs")"
log "$N texts, average $avg_chars characters; load ${load_s} s, fingerprints ${fp_s} s"

# One results row from the pair_sample rows of (mode, k, set) and the given count and time.
record() {   # mode col k set rows pairs seconds
    q <<SQL
INSERT INTO results
SELECT '$1', '$2', $3, '$4', $5, $6, $7, count(*),
       count(*) FILTER (WHERE j5 >= 0.8), count(*) FILTER (WHERE j5 >= 0.5 AND j5 < 0.8),
       count(*) FILTER (WHERE j5 < 0.5), count(*) FILTER (WHERE j5 IS NULL)
FROM pair_sample WHERE mode = '$1' AND k = $3 AND set = '$4';
SQL
}
# A uniform random sample of pairs, repeatable: the SAMPLE smallest hashes of (id_a, id_b).
PAIR_HASH="hashint8extended((id_a << 32) # id_b, $SEED)"

for m in "${MODES[@]}"; do
    IFS='|' read -r col expr radii <<<"$m"
    rows=$(qa -c "SELECT count($col) FROM docs")
    for k in $radii; do
        log "$expr, k = $k: pairs"
        t0=$(now)
        pairs=$(qa -c "SET maintenance_work_mem = '4GB'" -c "SELECT count(*) FROM simhash_pairs('docs', '$col', $k)")
        pairs_s=$(elapsed "$t0")
        q <<SQL
SET maintenance_work_mem = '4GB'; SET work_mem = '256MB';
CREATE TEMP TABLE s AS SELECT id_a, id_b FROM simhash_pairs('docs', '$col', $k) ORDER BY $PAIR_HASH LIMIT $SAMPLE;
INSERT INTO pair_sample SELECT '$expr', $k, 'all', s.id_a, s.id_b, simhash_similarity(a.body, b.body, 5)
FROM s JOIN docs a ON a.id = s.id_a JOIN docs b ON b.id = s.id_b;
SQL
        record "$expr" "$col" "$k" all "$rows" "$pairs" "$pairs_s"
        log "$expr, k = $k: $pairs pairs in $pairs_s s; verified pairs (simhash_similarity >= 0.7)"
        t0=$(now)
        q <<SQL
SET maintenance_work_mem = '4GB'; SET work_mem = '256MB';
CREATE UNLOGGED TABLE verified AS SELECT id_a, id_b, similarity FROM simhash_pairs('docs', '$col', $k, 'body', 0.7);
SQL
        verify_s=$(elapsed "$t0")
        for t in 0.7 0.8; do
            vpairs=$(qa -c "SELECT count(*) FROM verified WHERE similarity >= $t")
            q <<SQL
SET work_mem = '256MB';
CREATE TEMP TABLE s AS SELECT id_a, id_b FROM verified WHERE similarity >= $t ORDER BY $PAIR_HASH LIMIT $SAMPLE;
INSERT INTO pair_sample SELECT '$expr', $k, 'J3>=$t', s.id_a, s.id_b, simhash_similarity(a.body, b.body, 5)
FROM s JOIN docs a ON a.id = s.id_a JOIN docs b ON b.id = s.id_b;
SQL
            record "$expr" "$col" "$k" "J3>=$t" "$rows" "$vpairs" "$verify_s"
        done
        q -c "DROP TABLE verified"
    done
done

log "lookup cost: $LOOKUPS stored texts with one character replaced"
q <<SQL
-- Query texts: LOOKUPS random rows (repeatable), the character at a random position replaced.
CREATE TABLE lookups AS
SELECT row_number() OVER (ORDER BY h)::int AS j, id AS source_id,
       overlay(body PLACING CASE WHEN substr(body, p, 1) = 'x' THEN 'y' ELSE 'x' END FROM p FOR 1) AS q
FROM (SELECT id, body, hashint8extended(id, $SEED) AS h,
             1 + (abs(hashint8extended(id, $SEED + 1)) % char_length(body))::int AS p FROM docs) d
ORDER BY h LIMIT $LOOKUPS;
CREATE TABLE lookup_times (seq bigserial, label text, k int, j int, variant text, us float8, nrows bigint);
CREATE TABLE lookup_plans (label text, k int, j int, variant text, node text, within bigint, checked bigint,
                           returned bigint, planning_ms float8, execution_ms float8, found_source boolean);
CREATE FUNCTION time_lookups(label text, k int, plain text, verified text) RETURNS void LANGUAGE plpgsql AS \$f\$
DECLARE r record; t0 timestamptz; n bigint; pass int; v text; sql text; found boolean;
BEGIN
    FOR pass IN 0..$TIMED_PASSES LOOP
        FOR r IN SELECT * FROM lookups ORDER BY j LOOP
            FOREACH v IN ARRAY CASE WHEN r.j % 2 = 0 THEN ARRAY['plain', 'verified'] ELSE ARRAY['verified', 'plain'] END LOOP
                sql := CASE v WHEN 'plain' THEN plain ELSE verified END;
                t0 := clock_timestamp();
                EXECUTE sql USING r.q;
                GET DIAGNOSTICS n = ROW_COUNT;
                IF pass > 0 THEN
                    INSERT INTO lookup_times (label, k, j, variant, us, nrows) VALUES (label, k, r.j, v,
                        extract(epoch FROM clock_timestamp() - t0) * 1e6, n);
                END IF;
            END LOOP;
        END LOOP;
    END LOOP;
    -- Untimed: the plan of each variant (EXPLAIN ANALYZE) and whether it returns the edited row.
    FOR r IN SELECT * FROM lookups ORDER BY j LOOP
        FOREACH v IN ARRAY CASE WHEN r.j % 2 = 0 THEN ARRAY['plain', 'verified'] ELSE ARRAY['verified', 'plain'] END LOOP
            sql := CASE v WHEN 'plain' THEN plain ELSE verified END;
            EXECUTE 'SELECT count(*) > 0 FROM (' || sql || ') s WHERE id = \$2' USING r.q, r.source_id INTO found;
            EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || sql USING r.q INTO sql;
            INSERT INTO lookup_plans
            SELECT label, k, r.j, v, coalesce(p->'Plan'->>'Custom Plan Provider', p->'Plan'->>'Node Type'),
                   (p->'Plan'->>'Rows Within Radius')::bigint, (p->'Plan'->>'Index Tuples Checked')::bigint,
                   (p->'Plan'->>'Actual Rows')::numeric::bigint, (p->>'Planning Time')::float8,
                   (p->>'Execution Time')::float8, found
            FROM (SELECT sql::json->0 AS p) x;
        END LOOP;
    END LOOP;
END
\$f\$;
SQL
declare -A indexed
for m in "${LOOKUP_MODES[@]}"; do
    IFS='|' read -r col qexpr k <<<"$m"
    if [[ -z ${indexed[$col]:-} ]]; then
        log "segment indexes on $col"
        q -c "SELECT simhash_create_indexes('docs', '$col')" >/dev/null
        q -c "VACUUM ANALYZE docs"
        qa -c "SELECT sum(pg_prewarm(indexrelid)) FROM pg_index WHERE indrelid = 'docs'::regclass" >/dev/null
        indexed[$col]=1
    fi
    label=${qexpr//\$1/body}
    log "lookups: $label, k = $k"
    plain="SELECT id FROM docs WHERE $col <~> $qexpr <= $k"
    verified="$plain AND simhash_similarity(body, \$1) >= 0.8"
    q -c "SELECT time_lookups('$label', $k, \$q\$$plain\$q\$, \$q\$$verified\$q\$)" >/dev/null
done

log "simhash_similarity per call: every row against 3 lookup texts, one core"
sim_us=$(qa <<SQL
SET max_parallel_workers_per_gather = 0;
CREATE FUNCTION time_similarity() RETURNS float8 LANGUAGE plpgsql AS \$f\$
DECLARE r record; t0 timestamptz; with_sim float8 := 0; without float8 := 0; n bigint;
BEGIN
    FOR r IN SELECT q FROM lookups ORDER BY j LIMIT 3 LOOP
        t0 := clock_timestamp();
        EXECUTE 'SELECT count(*) FROM docs WHERE body <> \$1' USING r.q INTO n;
        without := without + extract(epoch FROM clock_timestamp() - t0);
        t0 := clock_timestamp();
        EXECUTE 'SELECT count(*) FROM docs WHERE simhash_similarity(body, \$1) >= 0.8' USING r.q INTO n;
        with_sim := with_sim + extract(epoch FROM clock_timestamp() - t0);
    END LOOP;
    RETURN (with_sim - without) * 1e6 / (3 * (SELECT count(*) FROM docs));
END
\$f\$;
SELECT round(time_similarity()::numeric, 2);
SQL
)
settings=$(qa -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', shared_buffers=' || current_setting('shared_buffers') || ', max_parallel_workers_per_gather=' || current_setting('max_parallel_workers_per_gather') || ', jit=' || current_setting('jit')")
qa -F $'\t' -c "SELECT mode, col, k, set, rows, pairs, seconds, sample, hi, mid, lo, nolabel FROM results" >"$work/results.tsv"
qa -F $'\t' -c "
    WITH t AS (SELECT label, k, variant, min(seq) AS seq, percentile_cont(0.5) WITHIN GROUP (ORDER BY us) AS p50,
                      avg(us) AS mean, avg(nrows) AS nrows
               FROM lookup_times GROUP BY 1, 2, 3),
         p AS (SELECT label, k, variant, string_agg(DISTINCT node, ', ') AS node, avg(within) AS w_mean,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY within) AS w_p50, max(within) AS w_max,
                      avg(checked) AS checked, percentile_cont(0.5) WITHIN GROUP (ORDER BY planning_ms) AS plan_p50,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY execution_ms) AS exec_p50, avg(execution_ms) AS exec_mean,
                      avg(found_source::int) AS found
               FROM lookup_plans GROUP BY 1, 2, 3)
    SELECT t.label, t.k, t.variant, t.p50, t.mean, t.nrows, p.node, p.w_mean, p.w_p50, p.w_max, p.checked,
           p.plan_p50, p.exec_p50, p.exec_mean, p.found
    FROM t JOIN p USING (label, k, variant) ORDER BY t.seq, t.variant" >"$work/lookups.tsv"
total_s=$(elapsed "$start_all")
so_after=$(so_stamp)
if [[ $so_after == "$so_before" ]]; then so_note="simhash.so modified $so_before, unchanged during the run"
else so_note="WARNING: simhash.so was reinstalled during the run ($so_before -> $so_after): steps after that used another build"; fi

python3 - "$work/results.tsv" "$work/lookups.tsv" "$N" "$SAMPLE" "$LOOKUPS" "$TIMED_PASSES" "$settings, $(nproc) cores" \
    "$avg_chars" "$table_mb" "$total_s" "$sim_us" "$so_note" "$(tail -n 1 "$work/real_texts.err")" <<'PY'
import math, sys
res_path, lk_path, n, sample, lookups, passes, settings, avg_chars, table_mb, total_s, sim_us, so_note, source = sys.argv[1:]
n = int(n)
rows = [l.rstrip("\n").split("\t") for l in open(res_path) if l.strip()]
lk = [l.rstrip("\n").split("\t") for l in open(lk_path) if l.strip()]

def wilson(x, m, z=1.96):
    if m == 0:
        return float("nan"), float("nan")
    p = x / m
    d = 1 + z * z / m
    c = (p + z * z / (2 * m)) / d
    h = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / d
    return max(0.0, c - h), min(1.0, c + h)

def num(x):
    if x != x:
        return "-"
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.1f}" if x < 10 else f"{x:.0f}"
    return f"{x:.2g}" if x >= 0.001 else f"{x:.1e}"

def pct(x, m):
    return f"{100 * x / m:.1f}" if m else "-"

by = {}
order = []
for mode, col, k, s, nrows, pairs, secs, smp, hi, mid, lo, nolabel in rows:
    key = (mode, int(k))
    if key not in by:
        order.append(key)
    by.setdefault(key, {})[s] = dict(rows=int(nrows), pairs=int(pairs), secs=float(secs), sample=int(smp),
                                     hi=int(hi), mid=int(mid), lo=int(lo), nolabel=int(nolabel))

def false_per_lookup(d, scale_to=None):
    """(point, low, high) false matches per lookup at the table's size or at scale_to rows."""
    if d["sample"] == 0:
        return 0.0, 0.0, 0.0
    share = d["lo"] / d["sample"]
    lo, hi = wilson(d["lo"], d["sample"])
    per = 2 * d["pairs"] / d["rows"]
    f = (scale_to / d["rows"]) if scale_to else 1
    return per * share * f, per * lo * f, per * hi * f

print(f"Pairs among {n:,} real texts (bench/real_texts.py: Debian documentation, man pages, crate docs; "
      f"average {avg_chars} characters; table {table_mb} MB) ({settings}). "
      f"Labels: J5 = `simhash_similarity(a, b, 5)`, exact Jaccard of the folded character 5-shingle sets, "
      f"over a uniform random sample of up to {int(sample):,} pairs per row (fixed seed). "
      f"False matches per lookup = 2 x pairs / N x share(J5 < 0.5), at N and extrapolated linearly "
      f"(per-pair false rate held fixed) to 1M and 10M rows; [95 % Wilson interval].")
print()
print(f"Source: {source}. Extension: {so_note}.")
print()

def table(title, sets, note):
    print(f"**{title}**" + (f" {note}" if note else ""))
    print()
    print("| mode | k | N (rows with a fingerprint) | pairs | pairs / 1,000 rows | search s | sample | J5 >= 0.8 % | 0.5-0.8 % | J5 < 0.5 % [95 % CI] | false / lookup at N | at 1M | at 10M [95 % CI] |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in order:
        d = by[key].get(sets)
        if d is None:
            continue
        m = d["sample"]
        lo, hi = wilson(d["lo"], m)
        f_n = false_per_lookup(d)
        f_1m = false_per_lookup(d, 1_000_000)
        f_10m = false_per_lookup(d, 10_000_000)
        share = f"{pct(d['lo'], m)} [{100 * lo:.1f}-{100 * hi:.1f}]" if m else "-"
        extra = f" ({d['nolabel']} unlabelled)" if d["nolabel"] else ""
        print(f"| `{key[0]}` | {key[1]} | {d['rows']:,} | {d['pairs']:,} | {1000 * d['pairs'] / d['rows']:.1f} | {d['secs']:.1f} | {m:,}{extra} | "
              f"{pct(d['hi'], m)} | {pct(d['mid'], m)} | {share} | {num(f_n[0])} | {num(f_1m[0])} | "
              f"{num(f_10m[0])} [{num(f_10m[1])}-{num(f_10m[2])}] |")
    print()

table("All pairs within k", "all",
      "(`SELECT count(*) FROM simhash_pairs('docs', fp, k)`; search s = that query):")
table("Verified, J3 >= 0.7", "J3>=0.7",
      "(pairs within k that also have `simhash_similarity(a, b) >= 0.7`: "
      "`simhash_pairs('docs', fp, k, 'body', 0.7)`; search s = that query, stored into a table):")
table("Verified, J3 >= 0.8", "J3>=0.8",
      "(the subset with `simhash_similarity(a, b) >= 0.8`; search s = the same query at 0.7):")

print("**False matches per lookup, side by side** (J5 < 0.5; at N / 1M / 10M rows):")
print()
print("| mode | k | unverified | verified J3 >= 0.7 | verified J3 >= 0.8 |")
print("|---|---|---|---|---|")
for key in order:
    cells = []
    for s in ("all", "J3>=0.7", "J3>=0.8"):
        d = by[key].get(s)
        cells.append(" / ".join(num(false_per_lookup(d, sc)[0]) for sc in (None, 1_000_000, 10_000_000)) if d else "-")
    print(f"| `{key[0]}` | {key[1]} | " + " | ".join(cells) + " |")
print()

print(f"**What verification costs a lookup** ({int(lookups)} stored texts with one character replaced; "
      f"`SELECT id FROM docs WHERE fp <~> f($1) <= k [AND simhash_similarity(body, $1) >= 0.8]` "
      f"by plpgsql `EXECUTE ... USING` (parse, plan, execute), server-side µs from clock_timestamp(), "
      f"p50 and mean over {passes} timed passes after an untimed one, the two variants alternated; "
      f"four covering segment B-trees, prewarmed; from one untimed EXPLAIN ANALYZE per lookup and variant: "
      f"candidates = \"Rows Within Radius\", planning and execution times; "
      f"edited row found = the lookup returns the row whose text was edited):")
print()
print("| mode | k | plan | candidates per lookup mean / p50 / max | expected from the pairs, 1 + 2 x pairs / N | index tuples checked | rows returned plain / verified | edited row found plain / verified % | plain p50 / mean µs | verified p50 / mean µs | verification cost, mean µs | EXPLAIN ANALYZE planning p50 ms | execution p50 / mean ms plain | verified |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
lkd = {}
lorder = []
for label, k, variant, p50, mean, nrows, node, w_mean, w_p50, w_max, checked, plan_p50, exec_p50, exec_mean, found in lk:
    key = (label, int(k))
    if key not in lkd:
        lorder.append(key)
    lkd.setdefault(key, {})[variant] = dict(p50=float(p50), mean=float(mean), nrows=float(nrows), node=node,
                                            w_mean=float(w_mean), w_p50=float(w_p50), w_max=float(w_max),
                                            checked=float(checked), plan_p50=float(plan_p50),
                                            exec_p50=float(exec_p50), exec_mean=float(exec_mean), found=float(found))
for key in lorder:
    p, v = lkd[key]["plain"], lkd[key]["verified"]
    node = p["node"] if p["node"] == v["node"] else f"{p['node']} / {v['node']}"
    a = by.get(key, {}).get("all")
    table_wide = f"{1 + 2 * a['pairs'] / a['rows']:.1f}" if a else "-"
    print(f"| `{key[0]}` | {key[1]} | {node} | {p['w_mean']:.1f} / {p['w_p50']:.0f} / {p['w_max']:.0f} | {table_wide} | {p['checked']:,.0f} | "
          f"{p['nrows']:.2f} / {v['nrows']:.2f} | {100 * p['found']:.1f} / {100 * v['found']:.1f} | "
          f"{p['p50']:.0f} / {p['mean']:.0f} | {v['p50']:.0f} / {v['mean']:.0f} | {v['mean'] - p['mean']:+.0f} | "
          f"{p['plan_p50']:.2f} | {p['exec_p50']:.3f} / {p['exec_mean']:.3f} | {v['exec_p50']:.3f} / {v['exec_mean']:.3f} |")
print()
print(f"`simhash_similarity(body, q)` costs {sim_us} µs per call here (one core; every row's text against "
      f"3 of the query texts, less a scan that compares the texts with `<>`): the verification of a lookup "
      f"costs about candidates x that.")
print()
print(f"Whole run: {float(total_s) / 60:.1f} minutes.")
PY
