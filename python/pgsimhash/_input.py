"""pgsimhash-load's input: JSON lines, CSV and Parquet files read as dicts, and their values as the
text PostgreSQL reads into a column."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any, Dict, Iterator, Optional, TextIO

from . import _core


class LoadError(Exception):
    """A load that cannot go on (bad options, no constraint, a batch that kept failing)."""


def guess_format(path: str) -> str:
    name = path.lower()[:-3] if path.lower().endswith(".gz") else path.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    if name.endswith(".parquet"):
        return "parquet"
    raise LoadError(f"cannot tell the format of {path!r} from its name: give --format jsonl, csv or parquet")


def _open_text(path: str) -> TextIO:
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="")
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_records(path: str, fmt: str, batch_size: int) -> Iterator[Dict[str, Any]]:
    """The records of one file, as dicts, streamed."""
    if fmt == "jsonl":
        with _open_text(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as e:
                    raise LoadError(f"{path}:{number}: not a JSON line ({e})") from None
                if not isinstance(record, dict):
                    raise LoadError(f"{path}:{number}: a JSON line must hold an object")
                yield record
    elif fmt == "csv":
        with _open_text(path) as f:
            name = path.lower()[:-3] if path.lower().endswith(".gz") else path.lower()
            dialect = "excel-tab" if name.endswith(".tsv") else "excel"
            yield from csv.DictReader(f, dialect=dialect)
    elif fmt == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise LoadError("Parquet input needs pyarrow: pip install pyarrow (or pgsimhash[parquet])") from None
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            yield from batch.to_pylist()
    else:
        raise LoadError(f"unknown format {fmt!r} (jsonl, csv or parquet)")


def fingerprint_text(value: Any) -> Optional[str]:
    """A value for a simhash64 column: an int (a fingerprint as pgsimhash or the server's bigint
    cast gives it) as its hex text; anything else as text (the server reads hex or binary digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _core.to_hex(value)
    return as_text(value)


def as_text(value: Any) -> Optional[str]:
    """A value of the file as the text PostgreSQL reads into the column's type."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    return str(value)
