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
from ``--dsn`` or libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, ...). The
driver is asyncpg (Apache-2.0; its binary protocol carries the batch's arrays), run by a synchronous
``main()`` on an asyncio loop. Modules: ``_input`` (the files), ``_table`` (the constraint and the
columns), ``_load`` (the batches), ``_connect`` (the connection string).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from typing import Any, Dict, Iterator, Optional, Sequence, TextIO

from ._input import LoadError, guess_format, read_records
from ._load import FINGERPRINTS, Loader, Summary

__all__ = ["FINGERPRINTS", "LoadError", "Loader", "Summary", "main", "parse_args", "print_summary"]


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
        import asyncpg
    except ImportError:
        print("pgsimhash-load needs asyncpg: pip install asyncpg (or './python[loader]')", file=sys.stderr)
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
        loader = asyncio.run(_run(args, mapping, fingerprints, add_dedup))
    except LoadError as e:
        print(f"pgsimhash-load: {e}", file=sys.stderr)
        return 1
    except asyncpg.PostgresError as e:
        print(f"pgsimhash-load: {e} (SQLSTATE {e.sqlstate})", file=sys.stderr)
        return 1
    except (asyncpg.InterfaceError, asyncpg.ClientConfigurationError, OSError, asyncio.TimeoutError) as e:
        # (no connection: refused, no such host, a bad connection string, a timeout)
        print(f"pgsimhash-load: {e or type(e).__name__}", file=sys.stderr)
        return 1
    if args.json:
        s = dataclasses.asdict(loader.summary)
        s["reported_pairs"] = [list(p) for p in s["reported_pairs"]]
        s["rows_per_second"] = loader.summary.rows_per_second
        print(json.dumps(s))
    else:
        print_summary(loader, sys.stdout)
    return 0


async def _run(args: argparse.Namespace, mapping, fingerprints, add_dedup) -> Loader:
    from ._connect import connect

    conn = await connect(args.dsn)
    try:
        loader = await Loader.open(
            conn,
            args.table,
            mode=args.mode,
            add_dedup=add_dedup,
            mapping=mapping,
            batch_size=args.batch_size,
            key=args.key,
            max_retries=args.max_retries,
            show=args.show,
            progress=None if args.quiet else sys.stderr,
            fingerprints=fingerprints,
        )

        def records() -> Iterator[Dict[str, Any]]:
            for path in args.files:
                fmt = args.format or guess_format(path)
                yield from read_records(path, fmt, args.batch_size)

        await loader.load(records())
        return loader
    finally:
        await conn.close()


if __name__ == "__main__":
    sys.exit(main())
