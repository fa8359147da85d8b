"""psycopg 3: ``simhash64`` columns read as ``SimHash64`` and ``SimHash64`` values sent as ``simhash64``.

    import psycopg
    from pgsimhash.psycopg import register_simhash
    from pgsimhash.value import SimHash64

    conn = psycopg.connect(...)
    register_simhash(conn)
    conn.execute("SELECT id FROM docs WHERE fp <~> %s <= 9", [SimHash64(fp)])

``register_simhash(conn_or_cursor)`` looks the type up where the extension ``simhash`` was created
(or in ``schema=``) and registers, on that connection or cursor only, loaders for ``simhash64`` and
``simhash64[]`` in text and binary format, and dumpers that send a ``SimHash64`` (and lists of them)
as ``simhash64``, in text or binary format (8 bytes, most significant first). Plain ``int`` values
keep psycopg's own meaning (a number): wrap fingerprints in ``SimHash64``. A ``str`` of 16 hex
digits needs no adapter (psycopg sends it untyped and the server reads it as ``simhash64``).
``register_simhash_async(aconn)`` does the same for an ``AsyncConnection``.
"""

from functools import lru_cache

from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from ._catalog import NOT_FOUND, TYPE_QUERY
from .value import SimHash64

__all__ = ["SimHash64", "register_simhash", "register_simhash_async"]

_QUERY = sql.SQL(TYPE_QUERY.format(schema="%(schema)s"))


class SimHash64Loader(Loader):
    format = Format.TEXT

    def load(self, data: Buffer) -> SimHash64:
        return int.__new__(SimHash64, int(bytes(data), 16))


class SimHash64BinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> SimHash64:
        return SimHash64.from_bytes8(bytes(data))


class _SimHash64Dumper(Dumper):
    format = Format.TEXT

    def dump(self, obj) -> bytes:
        return SimHash64(obj).hex().encode("ascii")


class _SimHash64BinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj) -> bytes:
        return SimHash64(obj).to_bytes8()


@lru_cache(maxsize=None)
def _dumpers(oid):
    # One pair of classes per type oid (cached: registering in a loop must not make new classes).
    text = type("SimHash64Dumper", (_SimHash64Dumper,), {"oid": oid})
    binary = type("SimHash64BinaryDumper", (_SimHash64BinaryDumper,), {"oid": oid})
    return text, binary


def _register(context, row, schema):
    if row is None:
        raise LookupError(NOT_FOUND)
    oid, array_oid, _nspname = row
    info = TypeInfo("simhash64", oid, array_oid)
    info.register(context)  # the type and its array (list loaders and dumpers find the element's)
    adapters = context.adapters
    adapters.register_loader(oid, SimHash64Loader)
    adapters.register_loader(oid, SimHash64BinaryLoader)
    text, binary = _dumpers(oid)
    adapters.register_dumper(SimHash64, binary)
    adapters.register_dumper(SimHash64, text)  # the last registered is the default for %s
    return info


def _connection(conn_or_cursor):
    return getattr(conn_or_cursor, "connection", conn_or_cursor)


def register_simhash(conn_or_cursor, schema=None):
    """Registers ``simhash64`` on a psycopg 3 connection or cursor; returns its ``TypeInfo``.

    ``schema``: where the type lives; by default where the extension ``simhash`` was created.
    Raises ``LookupError`` when the database has no such type.
    """
    conn = _connection(conn_or_cursor)
    # A cursor of its own, without the adapters being registered, in any transaction state.
    row = conn.execute(_QUERY, {"schema": schema}).fetchone()
    return _register(conn_or_cursor, row, schema)


async def register_simhash_async(conn_or_cursor, schema=None):
    """``register_simhash`` for an ``AsyncConnection`` or ``AsyncCursor``."""
    conn = _connection(conn_or_cursor)
    cur = await conn.execute(_QUERY, {"schema": schema})
    row = await cur.fetchone()
    return _register(conn_or_cursor, row, schema)
