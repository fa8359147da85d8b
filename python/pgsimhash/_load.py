"""pgsimhash-load's loading: the batches, one transaction each, through an asyncpg connection."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, TextIO, Tuple

from . import _core
from ._catalog import quote_ident
from ._input import LoadError, as_text, fingerprint_text
from ._table import Constraint, find_constraint, table_columns

# The functions --fingerprint computes in the client (the *_many ones: a batch at once, the GIL released).
FINGERPRINTS = {
    "simhash": _core.simhash_many,
    "simhash_ngrams": _core.simhash_ngrams_many,
    "minhash64": _core.minhash64_many,
}

# What the constraint's contract asks to run again: nothing of the failed transaction is stored.
RETRIED = ("40001", "40P01")  # serialization_failure, deadlock_detected

EQ = "OPERATOR(pg_catalog.=)"


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


class Loader:
    """Loads records into a table with the near-duplicate constraint; made by ``await Loader.open(...)``."""

    table: str
    schema: str
    constraint: Constraint
    columns: Dict[str, Tuple[str, bool]]
    started_at: Any

    def __init__(
        self,
        conn,
        mapping: Optional[Dict[str, str]] = None,
        batch_size: int = 1000,
        key: Optional[str] = None,
        max_retries: int = 10,
        show: int = 10,
        progress: Optional[TextIO] = None,
        fingerprints: Optional[Dict[str, Tuple[str, str]]] = None,
    ):
        self.conn = conn
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.show = show
        self.progress = progress
        self.mapping = dict(mapping) if mapping else None
        self.key = key
        self.fingerprints = dict(fingerprints) if fingerprints else {}
        self.statement: Optional[str] = None
        for column, (function, _) in self.fingerprints.items():
            if function not in FINGERPRINTS:
                raise LoadError(f"--fingerprint {column}={function}:...: the functions are {', '.join(FINGERPRINTS)}")
        self.summary = Summary()

    @classmethod
    async def open(
        cls, conn, table: str, mode: Optional[str] = None, add_dedup: Optional[Dict[str, Any]] = None, **options
    ) -> "Loader":
        """Reads the table's constraint and columns (adding the constraint first with ``add_dedup``)."""
        self = cls(conn, **options)
        async with conn.transaction():
            self.table = await conn.fetchval("SELECT $1::pg_catalog.text::pg_catalog.regclass::pg_catalog.text", table)
            schema = await conn.fetchval(
                "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n"
                f" ON n.oid {EQ} e.extnamespace WHERE e.extname {EQ} 'simhash'"
            )
            if schema is None:
                raise LoadError("the extension simhash is not installed in this database (CREATE EXTENSION simhash)")
            self.schema = quote_ident(schema)
            constraint = await find_constraint(conn, self.table)
            if constraint is None and add_dedup:
                await conn.execute(
                    f"SELECT {self.schema}.simhash_add_dedup($1::pg_catalog.text::pg_catalog.regclass,"
                    " $2::pg_catalog.name, k => $3::pg_catalog.int4, action => $4::pg_catalog.text,"
                    " verify => $5::pg_catalog.name, min_similarity => $6::pg_catalog.float8,"
                    " deferred => $7::pg_catalog.bool)",
                    self.table,
                    add_dedup["column"],
                    add_dedup["k"],
                    mode or "skip",
                    add_dedup.get("verify"),
                    add_dedup.get("min_similarity", 0.7),
                    add_dedup.get("deferred", False),
                )
                constraint = await find_constraint(conn, self.table)
            self.columns = await table_columns(conn, self.table)
            self.started_at = await conn.fetchval("SELECT pg_catalog.statement_timestamp()")
        if constraint is None:
            raise LoadError(
                f"{self.table} has no near-duplicate constraint: add one with simhash_add_dedup"
                f"({self.table!r}, 'fp', k => 9, action => 'skip', verify => 'body'), or give --add-dedup"
            )
        self.constraint = c = constraint
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
        if self.key is not None and self.key not in self.columns:
            raise LoadError(f"--key {self.key}: {self.table} has no column {self.key} that the loader can fill")
        for column in self.fingerprints:
            if not self.columns.get(column, ("", False))[1]:
                raise LoadError(
                    f"--fingerprint {column}=...: {self.table} has no simhash64 column {column} that the loader can"
                    " fill (a generated column is computed by the server)"
                )
        return self

    # The statement for one batch, once the mapping is known.
    def _prepare(self, first: Dict[str, Any]) -> None:
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
        # what makes each target column's values (a text[] parameter) from a batch of records
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
        q = quote_ident
        t = self.table  # regclass's text: quoted and qualified as needed
        cols = ", ".join(q(c) for c in self.targets)
        casts = ", ".join(f"u.{q(c)}::{self.columns[c][0]}" for c in self.targets)
        arrays = ", ".join(f"pg_catalog.unnest(${i}::pg_catalog.text[])" for i in range(1, len(self.targets) + 1))
        where = ""
        if self.key is not None:
            k, kt = q(self.key), self.columns[self.key][0]
            where = f" WHERE u.{k} IS NULL OR NOT EXISTS (SELECT FROM {t} s WHERE s.{k} = u.{k}::{kt})"
            # the batch's keys already stored: the INSERT leaves their rows out
            self.stored_keys = (
                "SELECT pg_catalog.count(*) FROM pg_catalog.unnest($1::pg_catalog.text[]) AS k"
                f" WHERE EXISTS (SELECT FROM {t} s WHERE s.{k} = k::{kt})"
            )
        fp = q(self.constraint.column)
        unmatchable = f"{fp} IS NULL"
        if self.constraint.verify:
            v = q(self.constraint.verify)
            unmatchable = f"{unmatchable} OR {v} IS NULL OR {self.schema}.minhash64({v}) IS NULL"
        # (with --key, a row whose key a concurrent loader stored first is left out too)
        conflict = " ON CONFLICT DO NOTHING" if self.key is not None else ""
        self.statement = (
            f"INSERT INTO {t} ({cols}) SELECT {casts} FROM ROWS FROM ({arrays}) AS u({cols}){where}{conflict}"
            f" RETURNING ctid, xmin::pg_catalog.text, {unmatchable}"
        )
        # The rows of this transaction still stored after its COMMIT (skip may delete some at commit).
        self.survivors = (
            f"SELECT pg_catalog.count(*) FROM {t} WHERE ctid {EQ} ANY($1::pg_catalog.tid[])"
            f" AND xmin::pg_catalog.text {EQ} $2::pg_catalog.text"
        )

    async def _batch(self, records: List[Dict[str, Any]]) -> None:
        import asyncpg

        columns = [produce(records) for produce in self.producers]
        attempt = 0
        while True:
            try:
                async with self.conn.transaction():
                    stored = 0
                    if self.key is not None:
                        stored = await self.conn.fetchval(self.stored_keys, columns[self.targets.index(self.key)])
                    returned = await self.conn.fetch(self.statement, *columns)
                break
            except asyncpg.PostgresError as e:
                if e.sqlstate not in RETRIED:
                    raise
                # the constraint's contract: nothing of the transaction is stored; run it again
                attempt += 1
                self.summary.retries += 1
                if attempt > self.max_retries:
                    raise LoadError(
                        f"a batch failed {attempt} times with SQLSTATE {e.sqlstate}; gave up"
                        f" ({self.summary.inserted} rows of earlier batches are stored)"
                    ) from e
                await asyncio.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))
        kept = len(returned)
        if self.mode == "skip" and returned:
            # skip deletes at COMMIT the rows that a near-duplicate committed concurrently refuses
            # (checked at commit, deferred: every refused row): count the rows still stored
            kept = await self.conn.fetchval(self.survivors, [r[0] for r in returned], returned[0][1])
        s = self.summary
        s.batches += 1
        s.inserted += kept
        s.already_stored += stored
        s.unmatchable += sum(1 for r in returned if r[2])
        if self.mode == "skip":
            s.skipped += len(records) - stored - kept

    async def load(self, records: Iterable[Dict[str, Any]]) -> Summary:
        start = time.monotonic()
        last_report = start
        batch: List[Dict[str, Any]] = []

        async def flush():
            nonlocal last_report
            if not batch:
                return
            await self._batch(batch)
            batch.clear()
            now = time.monotonic()
            if self.progress is not None and now - last_report >= 1.0:
                last_report = now
                self._progress(now - start, end="\r" if self.progress.isatty() else "\n")

        for record in records:
            if self.statement is None:
                self._prepare(record)
            self.summary.rows_read += 1
            batch.append(record)
            if len(batch) >= self.batch_size:
                await flush()
        await flush()
        self.summary.seconds = time.monotonic() - start
        if self.mode == "report":
            await self._reported()
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

    async def _reported(self) -> None:
        """The report table's lines of this load (since it started)."""
        table = self.constraint.report_table
        where = (
            f"relation {EQ} $1::pg_catalog.text::pg_catalog.regclass AND trigger_name {EQ} $2::pg_catalog.name"
            f" AND reported_at OPERATOR(pg_catalog.>=) $3::pg_catalog.timestamptz"
        )
        params = (self.table, self.constraint.trigger, self.started_at)
        async with self.conn.transaction():
            self.summary.reported = await self.conn.fetchval(
                f"SELECT pg_catalog.count(*) FROM {table} WHERE {where}", *params
            )
            rows = await self.conn.fetch(
                f"SELECT new_key, existing_key, distance, similarity FROM {table} WHERE {where}"
                " ORDER BY reported_at LIMIT $4::pg_catalog.int8",
                *params,
                self.show,
            )
        self.summary.reported_pairs = [tuple(r) for r in rows]
