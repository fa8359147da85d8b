"""pgsimhash-load: stream JSON lines, CSV or Parquet into a table with the near-duplicate constraint.

The table's constraint (``simhash_add_dedup(..., action => 'skip' | 'report')``, verified or not,
checked at each row or at commit) decides which rows are near-duplicates; the loader sends the rows
in batches, one transaction each (a multi-row ``INSERT ... SELECT FROM unnest(...)``, which fires
the constraint's triggers as any INSERT does), retries a batch that fails with SQLSTATE 40001 or
40P01 (the constraint's contract: nothing of the failed transaction is stored), prints a progress
line on stderr, and a summary at the end: rows read, inserted, skipped as near-duplicates (with
``report``: reported, and of which stored rows).

Re-running a file inserts nothing twice with ``skip``: every row is then within distance 0 of its
own stored copy, and with ``verify`` of similarity 1. Two kinds of rows escape that, and the summary
counts them: rows whose fingerprint is NULL (a text with no features) and, with ``verify``, rows
whose text has no letter or digit (their similarity is NULL): the constraint never counts them as
near-duplicates. ``--key COLUMN`` (a column the file fills, ideally with a unique index) skips rows
whose key is already stored, which makes any re-run, and ``report`` re-runs, add nothing.

Fingerprints can be computed in the client: ``--fingerprint fp=minhash64:body`` fills a plain
``simhash64`` column with the client's ``minhash64`` of the field ``body`` (the server's bits); a
field holding fingerprints as ``int`` goes into a ``simhash64`` column as its hex text.

Usage: ``pgsimhash-load --table docs --map body=text FILE`` (see ``--help``); the connection comes
from ``--dsn`` or libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple

from . import _core
from ._table import find_constraint, table_columns
from ._input import LoadError, as_text, fingerprint_text, guess_format, read_records

# The functions --fingerprint computes in the client (the *_many ones: a batch at once, the GIL released).
FINGERPRINTS = {
    "simhash": _core.simhash_many,
    "simhash_ngrams": _core.simhash_ngrams_many,
    "minhash64": _core.minhash64_many,
}


@dataclasses.dataclass
class Summary:
    """What a load did."""

    rows_read: int = 0
    inserted: int = 0
    #: rows the constraint dropped (``skip``), at each row or at commit
    skipped: int = 0
    #: rows left out because their ``--key`` is already stored
    already_stored: int = 0
    #: rows stored and reported as near-duplicates (``report``)
    reported: int = 0
    #: (new_key, existing_key, distance, similarity) of the reported rows, at most ``--show`` of them
    reported_pairs: List[tuple] = dataclasses.field(default_factory=list)
    #: stored rows the constraint can never match (NULL fingerprint, or with verify no letter or digit)
    unmatchable: int = 0
    batches: int = 0
    retries: int = 0
    seconds: float = 0.0

    @property
    def rows_per_second(self) -> float:
        return self.rows_read / self.seconds if self.seconds > 0 else 0.0


# -- loading -------------------------------------------------------------------------------------


class Loader:
    def __init__(
        self,
        conn,
        table: str,
        mapping: Optional[Dict[str, str]] = None,
        batch_size: int = 1000,
        mode: Optional[str] = None,
        key: Optional[str] = None,
        max_retries: int = 10,
        show: int = 10,
        progress: Optional[TextIO] = None,
        add_dedup: Optional[Dict[str, Any]] = None,
        fingerprints: Optional[Dict[str, Tuple[str, str]]] = None,
    ):
        from psycopg import sql

        self.sql = sql
        self.conn = conn
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.show = show
        self.progress = progress
        self.mapping = dict(mapping) if mapping else None
        self.key = key
        self.fingerprints = dict(fingerprints) if fingerprints else {}
        for column, (function, _) in self.fingerprints.items():
            if function not in FINGERPRINTS:
                raise LoadError(f"--fingerprint {column}={function}:...: the functions are {', '.join(FINGERPRINTS)}")
        self.summary = Summary()
        with conn.cursor() as cur:
            cur.execute("SELECT %s::pg_catalog.regclass::pg_catalog.text", (table,))
            self.table = cur.fetchone()[0]
            cur.execute(
                "SELECT extnamespace::pg_catalog.regnamespace::pg_catalog.text FROM pg_catalog.pg_extension"
                " WHERE extname = 'simhash'"
            )
            row = cur.fetchone()
            if row is None:
                raise LoadError("the extension simhash is not installed in this database (CREATE EXTENSION simhash)")
            self.schema = row[0]
            self.constraint = find_constraint(cur, self.table)
            if self.constraint is None and add_dedup:
                cur.execute(
                    sql.SQL(
                        "SELECT {}.simhash_add_dedup(%s::pg_catalog.regclass, %s, k => %s, action => %s,"
                        " verify => %s, min_similarity => %s, deferred => %s)"
                    ).format(sql.Identifier(self.schema)),
                    (
                        self.table,
                        add_dedup["column"],
                        add_dedup["k"],
                        mode or "skip",
                        add_dedup.get("verify"),
                        add_dedup.get("min_similarity", 0.7),
                        add_dedup.get("deferred", False),
                    ),
                )
                self.constraint = find_constraint(cur, self.table)
            self.columns = table_columns(cur, self.table)
            cur.execute("SELECT pg_catalog.statement_timestamp()")
            self.started_at = cur.fetchone()[0]
        conn.commit()
        c = self.constraint
        if c is None:
            raise LoadError(
                f"{self.table} has no near-duplicate constraint: add one with simhash_add_dedup"
                f"({self.table!r}, 'fp', k => 9, action => 'skip', verify => 'body'), or give --add-dedup"
            )
        if c.action not in ("skip", "report"):
            raise LoadError(
                f"the near-duplicate constraint of {self.table} (trigger {c.trigger}) has action {c.action!r};"
                " the loader loads into 'skip' or 'report' (simhash_add_dedup(..., action => 'skip') replaces it)"
            )
        if mode is not None and mode != c.action:
            raise LoadError(
                f"--mode {mode} but the constraint of {self.table} (trigger {c.trigger}) has action {c.action!r}"
            )
        self.mode = c.action
        if key is not None and key not in self.columns:
            raise LoadError(f"--key {key}: {self.table} has no column {key} that the loader can fill")
        for column in self.fingerprints:
            if not self.columns.get(column, ("", False))[1]:
                raise LoadError(
                    f"--fingerprint {column}=...: {self.table} has no simhash64 column {column} that the loader can"
                    " fill (a generated column is computed by the server)"
                )

    # The statement for one batch, once the mapping is known.
    def _prepare(self, first: Dict[str, Any]) -> None:
        sql = self.sql
        if self.mapping is None:
            self.mapping = {f: f for f in first if f in self.columns and f not in self.fingerprints}
            ignored = [f for f in first if f not in self.columns]
            if not self.mapping:
                raise LoadError(
                    f"no field of the first record ({', '.join(first)}) is a column of {self.table}:"
                    " give --map column=field"
                )
            if ignored and self.progress is not None:
                print(f"pgsimhash-load: fields not loaded (no such column): {', '.join(ignored)}", file=self.progress)
        for column in self.mapping:
            if column not in self.columns:
                raise LoadError(f"--map {column}=...: {self.table} has no column {column} that the loader can fill")
        for column in self.fingerprints:
            if column in self.mapping:
                raise LoadError(f"{column} is given both by --map and by --fingerprint")
        if self.key is not None and self.key not in self.mapping:
            raise LoadError(f"--key {self.key} is not among the columns loaded ({', '.join(self.mapping)})")
        self.targets = list(self.mapping) + list(self.fingerprints)
        # what makes each target column's values from a batch of records
        self.producers: List[Callable[[List[Dict[str, Any]]], List[Optional[str]]]] = []
        for column, field in self.mapping.items():
            if self.columns[column][1]:
                self.producers.append(lambda records, f=field: [fingerprint_text(r.get(f)) for r in records])
            else:
                self.producers.append(lambda records, f=field: [as_text(r.get(f)) for r in records])
        for column, (function, field) in self.fingerprints.items():
            self.producers.append(
                lambda records, fn=FINGERPRINTS[function], f=field: [
                    None if fp is None else _core.to_hex(fp) for fp in fn([as_text(r.get(f)) for r in records])
                ]
            )
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in self.targets)
        casts = sql.SQL(", ").join(
            sql.SQL("u.{}::{}").format(sql.Identifier(c), sql.SQL(self.columns[c][0])) for c in self.targets
        )
        arrays = sql.SQL(", ").join(sql.SQL("pg_catalog.unnest(%s::pg_catalog.text[])") for _ in self.targets)
        where = sql.SQL("")
        if self.key is not None:
            where = sql.SQL(" WHERE u.{k} IS NULL OR NOT EXISTS (SELECT FROM {t} s WHERE s.{k} = u.{k}::{kt})").format(
                k=sql.Identifier(self.key), t=sql.SQL(self.table), kt=sql.SQL(self.columns[self.key][0])
            )
        fp = sql.Identifier(self.constraint.column)
        unmatchable = sql.SQL("{} IS NULL").format(fp)
        if self.constraint.verify:
            v = sql.Identifier(self.constraint.verify)
            unmatchable = sql.SQL("{} OR {} IS NULL OR {}.minhash64({}) IS NULL").format(
                unmatchable, v, sql.Identifier(self.schema), v
            )
        # (with --key, a row whose key a concurrent loader stored first is left out too)
        conflict = sql.SQL(" ON CONFLICT DO NOTHING" if self.key is not None else "")
        self.statement = sql.SQL(
            "INSERT INTO {t} ({cols}) SELECT {casts} FROM ROWS FROM ({arrays}) AS u({cols}){where}{conflict}"
            " RETURNING ctid, xmin::pg_catalog.text, {unmatchable}"
        ).format(
            t=sql.SQL(self.table),
            cols=cols,
            casts=casts,
            arrays=arrays,
            where=where,
            conflict=conflict,
            unmatchable=unmatchable,
        )
        self.stored_keys = sql.SQL(
            "SELECT pg_catalog.count(*) FROM pg_catalog.unnest(%s::pg_catalog.text[]) AS k"
            " WHERE EXISTS (SELECT FROM {t} s WHERE s.{key} = k::{kt})"
        ).format(t=sql.SQL(self.table), key=sql.Identifier(self.key or "-"), kt=sql.SQL(self.columns.get(self.key, ("text", False))[0]))
        # The rows of this transaction still stored after its COMMIT (skip may delete some at commit).
        self.survivors = sql.SQL(
            "SELECT pg_catalog.count(*) FROM {t} WHERE ctid = ANY(%s::pg_catalog.tid[])"
            " AND xmin::pg_catalog.text = %s"
        ).format(t=sql.SQL(self.table))

    def _batch(self, records: List[Dict[str, Any]]) -> None:
        from psycopg import errors

        columns = [produce(records) for produce in self.producers]
        attempt = 0
        while True:
            try:
                with self.conn.transaction():
                    with self.conn.cursor() as cur:
                        stored = 0
                        if self.key is not None:
                            # the batch's keys already stored: the INSERT leaves their rows out
                            cur.execute(self.stored_keys, (columns[self.targets.index(self.key)],))
                            stored = cur.fetchone()[0]
                        cur.execute(self.statement, columns)
                        returned = cur.fetchall()
                break
            except (errors.SerializationFailure, errors.DeadlockDetected) as e:
                # the constraint's contract: nothing of the transaction is stored; run it again
                attempt += 1
                self.summary.retries += 1
                if attempt > self.max_retries:
                    raise LoadError(
                        f"a batch failed {attempt} times with SQLSTATE {e.sqlstate}; gave up"
                        f" ({self.summary.inserted} rows of earlier batches are stored)"
                    ) from e
                time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))
        kept = len(returned)
        if self.mode == "skip" and returned:
            # skip deletes at COMMIT the rows that a near-duplicate committed concurrently refuses
            # (checked at commit, deferred: every refused row): count the rows still stored
            with self.conn.cursor() as cur:
                cur.execute(self.survivors, ([str(r[0]) for r in returned], returned[0][1]))
                kept = cur.fetchone()[0]
            self.conn.commit()
        s = self.summary
        s.batches += 1
        s.inserted += kept
        s.already_stored += stored
        s.unmatchable += sum(1 for r in returned if r[2])
        if self.mode == "skip":
            s.skipped += len(records) - stored - kept

    def load(self, records: Iterable[Dict[str, Any]]) -> Summary:
        start = time.monotonic()
        last_report = start
        batch: List[Dict[str, Any]] = []

        def flush():
            nonlocal last_report
            if not batch:
                return
            self._batch(batch)
            batch.clear()
            now = time.monotonic()
            if self.progress is not None and now - last_report >= 1.0:
                last_report = now
                self._progress(now - start, end="\r" if self.progress.isatty() else "\n")

        for record in records:
            if self.summary.rows_read == 0 and not hasattr(self, "statement"):
                self._prepare(record)
            self.summary.rows_read += 1
            batch.append(record)
            if len(batch) >= self.batch_size:
                flush()
        flush()
        self.summary.seconds = time.monotonic() - start
        if self.mode == "report":
            self._reported()
        if self.progress is not None:
            self._progress(self.summary.seconds, end="\n")
        return self.summary

    def _progress(self, seconds: float, end: str) -> None:
        s = self.summary
        rate = s.rows_read / seconds if seconds > 0 else 0.0
        done = "skipped" if self.mode == "skip" else "reported"
        count = s.skipped if self.mode == "skip" else s.reported
        print(
            f"pgsimhash-load: {s.rows_read:,} rows read, {s.inserted:,} inserted, {count:,} {done}"
            f" ({rate:,.0f} rows/s)",
            end=end,
            file=self.progress,
            flush=True,
        )

    def _reported(self) -> None:
        """The report table's lines of this load (since it started)."""
        sql = self.sql
        with self.conn.cursor() as cur:
            where = sql.SQL(
                "relation = %s::pg_catalog.regclass AND trigger_name = %s AND reported_at >= %s"
            )
            params = (self.table, self.constraint.trigger, self.started_at)
            table = sql.SQL(self.constraint.report_table)
            cur.execute(sql.SQL("SELECT pg_catalog.count(*) FROM {} WHERE ").format(table) + where, params)
            self.summary.reported = cur.fetchone()[0]
            cur.execute(
                sql.SQL("SELECT new_key, existing_key, distance, similarity FROM {} WHERE ").format(table)
                + where
                + sql.SQL(" ORDER BY reported_at LIMIT %s"),
                params + (self.show,),
            )
            self.summary.reported_pairs = cur.fetchall()
        self.conn.commit()


def print_summary(loader: Loader, out: TextIO) -> None:
    s = loader.summary
    c = loader.constraint
    verified = f", verified on {c.verify}" if c.verify else ""
    when = "at commit" if c.deferred else "at each row"
    print(f"table {loader.table}: constraint {c.trigger} ({c.action}, k = {c.k}{verified}, checked {when})", file=out)
    print(f"rows read: {s.rows_read}", file=out)
    print(f"inserted: {s.inserted}", file=out)
    if c.action == "skip":
        print(f"skipped as near-duplicates: {s.skipped}", file=out)
    else:
        print(f"reported as near-duplicates (stored): {s.reported}", file=out)
        for new_key, existing_key, distance, similarity in s.reported_pairs:
            sim = "" if similarity is None else f", similarity {similarity:.2f}"
            print(f"  new row {new_key} near stored row {existing_key} (distance {distance}{sim})", file=out)
        if s.reported > len(s.reported_pairs):
            print(f"  ... all of them: SELECT * FROM {c.report_table} WHERE reported_at >= '{loader.started_at}'", file=out)
    if loader.key is not None:
        print(f"already stored (--key {loader.key}): {s.already_stored}", file=out)
    if s.unmatchable:
        print(
            f"stored but never a near-duplicate (NULL fingerprint{', or no letter or digit' if c.verify else ''}):"
            f" {s.unmatchable}{'' if loader.key else ' (a re-run stores them again; --key prevents that)'}",
            file=out,
        )
    print(f"batches: {s.batches}, retried: {s.retries}", file=out)
    print(f"time: {s.seconds:.1f} s ({s.rows_per_second:,.0f} rows/s)", file=out)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="pgsimhash-load",
        description="Stream JSON lines, CSV or Parquet into a table with the simhash near-duplicate constraint.",
        epilog="The connection: --dsn, else libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE, ...).",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="input files ('-' for standard input)")
    p.add_argument("--dsn", default="", help="libpq connection string or URI (default: the environment)")
    p.add_argument("--table", "-t", required=True, help="the table (may be schema-qualified)")
    p.add_argument("--format", "-f", choices=("jsonl", "csv", "parquet"), help="default: from the file name")
    p.add_argument(
        "--map",
        "-m",
        action="append",
        default=[],
        metavar="COLUMN=FIELD",
        help="fill COLUMN from the input's FIELD (repeat; default: every field that names a column)",
    )
    p.add_argument("--batch-size", "-b", type=int, default=1000, help="rows per transaction (default 1000)")
    p.add_argument("--mode", choices=("skip", "report"), help="the constraint's action (checked against the table)")
    p.add_argument("--key", help="a column the input fills: rows whose key is already stored are left out")
    p.add_argument(
        "--fingerprint",
        action="append",
        default=[],
        metavar="COLUMN=FUNCTION:FIELD",
        help="fill the simhash64 COLUMN in the client with FUNCTION (simhash, simhash_ngrams, minhash64; default"
        " parameters) of the input's FIELD (repeat)",
    )
    p.add_argument("--max-retries", type=int, default=10, help="retries of a batch after 40001/40P01 (default 10)")
    p.add_argument("--show", type=int, default=10, help="reported pairs to list in the summary (default 10)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line")
    g = p.add_argument_group("adding the constraint (when the table has none)")
    g.add_argument("--add-dedup", metavar="FP_COLUMN", help="simhash_add_dedup on this simhash64 column")
    g.add_argument("-k", type=int, default=9, help="its radius (default 9)")
    g.add_argument("--verify", metavar="TEXT_COLUMN", help="verify with the similarity of this text column")
    g.add_argument("--min-similarity", type=float, default=0.7, help="the verified threshold (default 0.7)")
    g.add_argument("--deferred", action="store_true", help="check at commit (skip only; faster for bulk loads)")
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error("--batch-size must be at least 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        import psycopg
    except ImportError:
        print("pgsimhash-load needs psycopg 3: pip install 'psycopg[binary]'", file=sys.stderr)
        return 2
    mapping = None
    if args.map:
        try:
            mapping = dict(m.split("=", 1) if "=" in m else (m, m) for m in args.map)
        except ValueError:
            print("pgsimhash-load: --map takes COLUMN=FIELD", file=sys.stderr)
            return 2
    fingerprints = {}
    for spec in args.fingerprint:
        column, _, rest = spec.partition("=")
        function, _, field = rest.partition(":")
        if not column or not function or not field:
            print("pgsimhash-load: --fingerprint takes COLUMN=FUNCTION:FIELD, e.g. fp=minhash64:body", file=sys.stderr)
            return 2
        fingerprints[column] = (function, field)
    add_dedup = None
    if args.add_dedup:
        add_dedup = {
            "column": args.add_dedup,
            "k": args.k,
            "verify": args.verify,
            "min_similarity": args.min_similarity,
            "deferred": args.deferred,
        }
    try:
        with psycopg.connect(args.dsn) as conn:
            loader = Loader(
                conn,
                args.table,
                mapping=mapping,
                batch_size=args.batch_size,
                mode=args.mode,
                key=args.key,
                max_retries=args.max_retries,
                show=args.show,
                progress=None if args.quiet else sys.stderr,
                add_dedup=add_dedup,
                fingerprints=fingerprints,
            )

            def records() -> Iterator[Dict[str, Any]]:
                for path in args.files:
                    fmt = args.format or guess_format(path)
                    yield from read_records(path, fmt, args.batch_size)

            loader.load(records())
    except LoadError as e:
        print(f"pgsimhash-load: {e}", file=sys.stderr)
        return 1
    except psycopg.Error as e:
        state = f" (SQLSTATE {e.sqlstate})" if getattr(e, "sqlstate", None) else ""
        print(f"pgsimhash-load: {e}{state}", file=sys.stderr)
        return 1
    if args.json:
        s = dataclasses.asdict(loader.summary)
        s["reported_pairs"] = [list(p) for p in s["reported_pairs"]]
        s["rows_per_second"] = loader.summary.rows_per_second
        print(json.dumps(s))
    else:
        print_summary(loader, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
