"""pgsimhash-load against the real server: a 100,000-row JSON lines file with planted
near-duplicates (tests/python/texts.py) into a table with the verified constraint at k = 9 (skip,
checked at commit); every planted row skipped, every unique row stored, and a re-run adds nothing.
Then report mode with --key and a CSV file, retries of 40001/40P01, fingerprints computed in the
client (--fingerprint, int fields), and Parquet when pyarrow is installed."""

import csv
import json
import os
import subprocess
import sys

import pytest

import texts as corpus

COUNT = 100_000


def load(dsn, *args, check=True):
    """Runs the console script; returns its JSON summary (and the completed process)."""
    command = [os.path.join(os.path.dirname(sys.executable), "pgsimhash-load"), "--dsn", dsn, "--json", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout) if done.returncode == 0 else None
    return summary, done


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    rows, planted = corpus.load_rows(COUNT)
    path = tmp_path_factory.mktemp("load") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path, rows, planted


def make_table(conn, name, action, deferred, key=False):
    conn.execute(
        f"""CREATE TABLE {name} (
                id bigint {'PRIMARY KEY' if key else ''}, url text, body text,
                fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED)"""
    )
    conn.execute(f"CREATE INDEX ON {name} USING simhash (fp)")
    conn.execute(
        f"SELECT simhash_add_dedup('{name}', 'fp', k => 9, action => '{action}', verify => 'body',"
        f" deferred => {deferred})"
    )


def test_planted_near_duplicates_skipped_and_rerun_adds_nothing(dsn, conn, generated, capsys):
    path, rows, planted = generated
    make_table(conn, "docs", "skip", "true")
    summary, done = load(dsn, "--table", "docs", "--batch-size", "2000", str(path))
    assert "rows/s" in done.stderr  # the progress line
    unique = {r["id"] for r in rows} - planted
    assert summary["rows_read"] == COUNT
    assert summary["inserted"] == len(unique)
    assert summary["skipped"] == len(planted)
    assert summary["unmatchable"] == 0
    stored = {i for (i,) in conn.execute("SELECT id FROM docs")}
    assert stored == unique  # every planted row skipped, no unique row lost
    with capsys.disabled():
        print(
            f"\nloader: {COUNT:,} rows into a table with the verified constraint at k = 9 (deferred):"
            f" {summary['seconds']:.1f} s, {summary['rows_per_second']:,.0f} rows/s"
        )
    again, _ = load(dsn, "--table", "docs", "--batch-size", "2000", "--quiet", str(path))
    assert again["rows_read"] == COUNT and again["inserted"] == 0 and again["skipped"] == COUNT
    assert conn.execute("SELECT count(*) FROM docs").fetchone()[0] == len(unique)


def test_report_mode_names_the_stored_rows_and_key_makes_reruns_idempotent(dsn, conn, generated, tmp_path):
    _, rows, planted = generated
    sample = rows[:3000]
    sample_planted = {r["id"] for r in sample} & planted
    path = tmp_path / "docs.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, ["id", "url", "body", "extra"])
        w.writeheader()
        for r in sample:
            w.writerow(dict(r, extra="not loaded"))
    make_table(conn, "reported", "report", "false", key=True)
    summary, done = load(dsn, "--table", "reported", "--mode", "report", "--key", "id", "--show", "1000", str(path))
    assert "fields not loaded (no such column): extra" in done.stderr
    assert summary["inserted"] == len(sample) and summary["skipped"] == 0
    assert summary["reported"] == len(sample_planted)
    bodies = {r["id"]: r["body"] for r in sample}
    import pgsimhash

    for new_key, existing_key, distance, similarity in summary["reported_pairs"]:
        # (reported rows are stored: a later edit may be nearest to an earlier edit)
        assert int(new_key) in sample_planted and int(existing_key) < int(new_key)
        assert distance <= 9 and similarity >= 0.7
        assert similarity == pgsimhash.simhash_similarity(bodies[int(new_key)], bodies[int(existing_key)])
    again, _ = load(dsn, "--table", "reported", "--key", "id", "--quiet", str(path))
    assert again["inserted"] == 0 and again["already_stored"] == len(sample) and again["reported"] == 0
    assert conn.execute("SELECT count(*) FROM reported").fetchone()[0] == len(sample)
    # the summary in words
    _, text = load(dsn, "--table", "reported", "--key", "id", "--quiet", str(path))
    words = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "pgsimhash-load"), "--dsn", dsn, "--table", "reported",
         "--key", "id", "--quiet", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "rows read: 3000" in words and "already stored (--key id): 3000" in words


def test_retries_serialization_failures_and_deadlocks(dsn, conn, tmp_path):
    make_table(conn, "flaky", "skip", "false")
    # the first two batches fail once each, with 40001 and then 40P01: the loader runs them again
    conn.execute("CREATE SEQUENCE flaky_attempts")
    conn.execute(
        """CREATE FUNCTION flaky_fail() RETURNS trigger LANGUAGE plpgsql AS $$
           DECLARE n bigint := nextval('flaky_attempts');
           BEGIN
               IF n = 1 THEN RAISE EXCEPTION 'test' USING ERRCODE = '40001'; END IF;
               IF n = 3 THEN RAISE EXCEPTION 'test' USING ERRCODE = '40P01'; END IF;
               RETURN NULL;
           END $$"""
    )
    conn.execute("CREATE TRIGGER flaky_fail AFTER INSERT ON flaky FOR EACH STATEMENT EXECUTE FUNCTION flaky_fail()")
    path = tmp_path / "few.jsonl"
    rows = corpus.load_rows(300, seed=5)[0]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary, _ = load(dsn, "--table", "flaky", "--batch-size", "100", "--quiet", str(path))
    assert summary["retries"] == 2 and summary["batches"] == 3
    assert summary["inserted"] + summary["skipped"] == 300
    assert conn.execute("SELECT count(*) FROM flaky").fetchone()[0] == summary["inserted"]
    # a batch that keeps failing: the loader gives up after --max-retries
    conn.execute("CREATE OR REPLACE FUNCTION flaky_fail() RETURNS trigger LANGUAGE plpgsql AS $$"
                 " BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '40001'; END $$")
    _, done = load(dsn, "--table", "flaky", "--max-retries", "2", "--quiet", str(path), check=False)
    assert done.returncode == 1 and "failed 3 times with SQLSTATE 40001" in done.stderr


def test_refuses_a_table_without_the_constraint_or_another_mode(dsn, conn, tmp_path):
    conn.execute("CREATE TABLE plain (id bigint, body text, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED)")
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": 1, "body": "one row of text"}) + "\n", encoding="utf-8")
    _, done = load(dsn, "--table", "plain", "--quiet", str(path), check=False)
    assert done.returncode == 1 and "no near-duplicate constraint" in done.stderr
    summary, _ = load(dsn, "--table", "plain", "--add-dedup", "fp", "--verify", "body", "--quiet", str(path))
    assert summary["inserted"] == 1
    _, done = load(dsn, "--table", "plain", "--mode", "report", "--quiet", str(path), check=False)
    assert done.returncode == 1 and "has action 'skip'" in done.stderr


def test_parquet(dsn, conn, tmp_path):
    pa = pytest.importorskip("pyarrow", reason="Parquet input needs pyarrow (not installed: Parquet not tested)")
    import pyarrow.parquet as pq

    rows = corpus.load_rows(500, seed=9)[0]
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=100)
    make_table(conn, "from_parquet", "skip", "true")
    summary, _ = load(dsn, "--table", "from_parquet", "--map", "id=id", "--map", "body=body", "--quiet", str(path))
    assert summary["rows_read"] == 500 and summary["inserted"] + summary["skipped"] == 500
    assert conn.execute("SELECT count(*), count(url) FROM from_parquet").fetchone() == (summary["inserted"], 0)


def test_fingerprints_computed_in_the_client(dsn, conn, generated, tmp_path):
    """--fingerprint fills a plain simhash64 column in the client, and a field holding fingerprints
    as int (pgsimhash's, or the server's bigint) is loaded as the same bits: both equal the server's
    minhash64(body), and the constraint skips the same rows as with a generated column."""
    import pgsimhash

    _, rows, planted = generated
    sample = rows[:3000]
    path = tmp_path / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, r in enumerate(sample):
            fp = pgsimhash.minhash64(r["body"])
            f.write(json.dumps(dict(r, given=fp if i % 2 else pgsimhash.to_signed(fp))) + "\n")
    for name, how in (("client_fp", ["--fingerprint", "fp=minhash64:body"]), ("given_fp", ["--map", "fp=given"])):
        conn.execute(f"CREATE TABLE {name} (id bigint, body text, fp simhash64)")
        conn.execute(f"CREATE INDEX ON {name} USING simhash (fp)")
        summary, _ = load(
            dsn, "--table", name, "--map", "id=id", "--map", "body=body", *how, "--add-dedup", "fp",
            "--verify", "body", "--deferred", "--quiet", str(path),
        )
        assert summary["skipped"] == len({r["id"] for r in sample} & planted)
        assert summary["inserted"] == len(sample) - summary["skipped"]
        assert conn.execute(f"SELECT count(*) FROM {name} WHERE fp IS DISTINCT FROM minhash64(body)").fetchone()[0] == 0
    _, done = load(dsn, "--table", "client_fp", "--fingerprint", "body=minhash64:body", str(path), check=False)
    assert done.returncode == 1 and "no simhash64 column body" in done.stderr


def test_standard_input_and_gzip(dsn, conn, tmp_path):
    import gzip

    rows = corpus.load_rows(200, seed=11)[0]
    make_table(conn, "streamed", "skip", "false")
    lines = "".join(json.dumps(r) + "\n" for r in rows)
    command = [os.path.join(os.path.dirname(sys.executable), "pgsimhash-load"), "--dsn", dsn, "--json", "--quiet",
               "--table", "streamed", "--format", "jsonl", "-"]
    first = json.loads(subprocess.run(command, input=lines, capture_output=True, text=True, check=True).stdout)
    assert first["rows_read"] == 200 and first["inserted"] + first["skipped"] == 200
    path = tmp_path / "same.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(lines)
    again, _ = load(dsn, "--table", "streamed", "--quiet", str(path))
    assert again["rows_read"] == 200 and again["inserted"] == 0 and again["skipped"] == 200


def test_keyword_connection_string(db_params, conn, tmp_path):
    """--dsn in libpq's keyword=value form (asyncpg reads URIs only: the loader turns it into one)."""
    conn.execute("CREATE TABLE by_keywords (id bigint, body text, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED)")
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": 1, "body": "one row of text"}) + "\n", encoding="utf-8")
    dsn = (f"host={db_params['host']} port={db_params['port']} user='{db_params['user']}'"
           f" dbname={db_params['dbname']} application_name=pgsimhash_test connect_timeout=30")
    summary, _ = load(dsn, "--table", "by_keywords", "--add-dedup", "fp", "--quiet", str(path))
    assert summary["inserted"] == 1
    _, done = load("host=/nonexistent-socket-dir port=1", "--table", "by_keywords", str(path), check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr


def test_runs_without_psycopg(dsn, conn, tmp_path):
    """The loader's driver is asyncpg (Apache-2.0): it loads with psycopg (LGPL-3.0) unimportable."""
    conn.execute("CREATE TABLE no_psycopg (id bigint, body text, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED)")
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": 1, "body": "one row of text"}) + "\n", encoding="utf-8")
    code = ("import sys; sys.modules['psycopg'] = None; from pgsimhash.loader import main;"
            " sys.exit(main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, "--dsn", dsn, "--json", "--quiet", "--table", "no_psycopg", "--add-dedup", "fp",
         str(path)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["inserted"] == 1
