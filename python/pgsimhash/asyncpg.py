"""asyncpg: ``simhash64`` columns read as ``SimHash64``, parameters sent as ``simhash64``.

    import asyncpg
    from pgsimhash.asyncpg import register_simhash
    from pgsimhash.value import SimHash64

    conn = await asyncpg.connect(...)
    await register_simhash(conn)
    await conn.fetch("SELECT id FROM docs WHERE fp <~> $1 <= 9", SimHash64(fp))

asyncpg learns parameter types from the server, so a ``simhash64`` parameter accepts a
``SimHash64``, a plain ``int`` from 0 to 2**64 - 1 or the hex text. The codec is binary (8 bytes,
most significant first); arrays of ``simhash64`` come as lists. In a pool, call it from ``init``:
``asyncpg.create_pool(..., init=register_simhash)``.
"""

from ._catalog import NOT_FOUND, TYPE_QUERY
from .value import SimHash64

__all__ = ["SimHash64", "register_simhash"]

_QUERY = TYPE_QUERY.format(schema="$1")


def _encode(value):
    return SimHash64(value).to_bytes8()


def _decode(data):
    return SimHash64.from_bytes8(data)


async def register_simhash(conn, schema=None):
    """Sets the codec of ``simhash64`` on an asyncpg connection.

    ``schema``: where the type lives; by default where the extension ``simhash`` was created.
    Raises ``LookupError`` when the database has no such type.
    """
    row = await conn.fetchrow(_QUERY, schema)
    if row is None:
        raise LookupError(NOT_FOUND)
    await conn.set_type_codec(
        "simhash64", schema=row["nspname"], encoder=_encode, decoder=_decode, format="binary"
    )
