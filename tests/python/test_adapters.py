"""psycopg 3 and asyncpg adapters of simhash64 against the real server: round trips of the edge
values in text and binary format, arrays, NULL, and a type outside search_path."""

import asyncio

import asyncpg
import psycopg
import pytest
from orm_support import EXT_SCHEMA, conninfo, ext_dsn  # noqa: F401 (fixture)

from pgsimhash.asyncpg import register_simhash as register_asyncpg
from pgsimhash.psycopg import register_simhash, register_simhash_async
from pgsimhash.value import SimHash64

EDGES = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 0x0123456789ABCDEF]


def test_value_type():
    fp = SimHash64(0x0123456789ABCDEF)
    assert fp == 0x0123456789ABCDEF and isinstance(fp, int)
    assert fp.hex() == str(fp) == "0123456789abcdef"
    assert SimHash64("0x0123456789ABCDEF") == fp == SimHash64(" 0123456789abcdef ")
    assert SimHash64("1" * 64) == (1 << 64) - 1
    assert SimHash64.from_signed(-1) == (1 << 64) - 1 and SimHash64(1 << 63).to_signed() == -(1 << 63)
    assert SimHash64(0b100111).hamming(0b101010) == 3
    for bad in ["", "0123", "0123456789abcdeg", "0x" + "0" * 17, "2" * 64, "0x" + "0" * 64]:
        with pytest.raises(ValueError):
            SimHash64(bad)
    for bad in [-1, 1 << 64]:
        with pytest.raises(ValueError):
            SimHash64(bad)
    with pytest.raises(TypeError):
        SimHash64(True)


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_round_trips(dsn, binary):
    with psycopg.connect(dsn) as conn:
        register_simhash(conn)
        cur = conn.cursor(binary=binary)
        p = "%b" if binary else "%t"  # parameters in the format of the results
        for v in EDGES:
            # The parameter is sent typed (simhash64's oid).
            got, text = cur.execute(f"SELECT {p}, {p}::text", [SimHash64(v), SimHash64(v)]).fetchone()
            assert type(got) is SimHash64 and got == v
            assert text == format(v, "016x")
            # Read from the server's own values too, as the server's bigint cast sees them.
            got, = cur.execute("SELECT %s::bigint::simhash64", [SimHash64(v).to_signed()]).fetchone()
            assert got == v and type(got) is SimHash64
        assert cur.execute("SELECT NULL::simhash64").fetchone() == (None,)
        arr, = cur.execute(f"SELECT {p}", [[SimHash64(v) for v in EDGES] + [None]]).fetchone()
        assert arr == EDGES + [None] and all(type(x) is SimHash64 for x in arr[:-1])
        arr, = cur.execute("SELECT ARRAY['0000000000000000', NULL, 'ffffffffffffffff']::simhash64[]").fetchone()
        assert arr == [0, None, (1 << 64) - 1]
        # The distance operator sees the same bits as Python.
        d, = cur.execute("SELECT %s <~> %s", [SimHash64(0), SimHash64((1 << 64) - 1)]).fetchone()
        assert d == 64
        # A hex str needs no adapter: psycopg sends it untyped.
        assert cur.execute("SELECT %s::simhash64", ["8000000000000000"]).fetchone() == (1 << 63,)


def test_psycopg_copy_binary(dsn):
    with psycopg.connect(dsn) as conn:
        register_simhash(conn)
        conn.execute("CREATE TEMP TABLE t (fp simhash64)")
        with conn.cursor().copy("COPY t (fp) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["simhash64"])
            for v in EDGES:
                copy.write_row([SimHash64(v)])
        assert sorted(r[0] for r in conn.execute("SELECT fp FROM t")) == sorted(EDGES)


def test_psycopg_unregistered_and_cursor(dsn):
    with psycopg.connect(dsn) as conn:
        # Without the adapters a simhash64 reads as its text.
        assert conn.execute("SELECT 'ffffffffffffffff'::simhash64").fetchone() == ("ffffffffffffffff",)
        cur = conn.cursor()
        register_simhash(cur)  # on the cursor only
        assert cur.execute("SELECT 'ffffffffffffffff'::simhash64").fetchone() == ((1 << 64) - 1,)
        assert conn.execute("SELECT 'ffffffffffffffff'::simhash64").fetchone() == ("ffffffffffffffff",)


def test_psycopg_async(dsn):
    async def run():
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            await register_simhash_async(conn)
            cur = conn.cursor(binary=True)
            await cur.execute("SELECT %s", [SimHash64(1 << 63)])
            assert await cur.fetchone() == (1 << 63,)

    asyncio.run(run())


def test_psycopg_schema_off_search_path(ext_dsn):
    with psycopg.connect(ext_dsn) as conn:
        assert conn.execute("SELECT to_regtype('simhash64')").fetchone() == (None,)
        info = register_simhash(conn)
        typ = f'"{EXT_SCHEMA}".simhash64'
        for binary in (False, True):
            got, = conn.cursor(binary=binary).execute(
                f"SELECT %s::{typ}", [SimHash64((1 << 64) - 1)]).fetchone()
            assert got == (1 << 64) - 1
        assert conn.execute(f"SELECT ARRAY[%s]::{typ}[]", [SimHash64(5)]).fetchone() == ([5],)
        assert info.oid == conn.execute(f"SELECT '{typ}'::regtype::oid").fetchone()[0]
        with pytest.raises(LookupError):
            register_simhash(conn, schema="public")


def test_psycopg_no_extension(dsn):
    with psycopg.connect(**dict(conninfo(dsn), dbname="postgres")) as conn:
        with pytest.raises(LookupError):
            register_simhash(conn)


@pytest.mark.parametrize("which", ["dsn", "ext_dsn"])
def test_asyncpg_round_trips(request, which):
    params = conninfo(request.getfixturevalue(which))
    typ = "simhash64" if which == "dsn" else f'"{EXT_SCHEMA}".simhash64'

    async def run():
        conn = await asyncpg.connect(host=params["host"], port=int(params["port"]),
                                     user=params.get("user"), database=params["dbname"])
        try:
            await register_asyncpg(conn)
            for v in EDGES:
                for param in (SimHash64(v), v, format(v, "016x")):
                    got, text = await conn.fetchrow(f"SELECT $1::{typ}, $1::{typ}::text", param)
                    assert type(got) is SimHash64 and got == v and text == format(v, "016x")
            assert await conn.fetchval(f"SELECT NULL::{typ}") is None
            arr = await conn.fetchval(f"SELECT $1::{typ}[]", EDGES + [None])
            assert arr == EDGES + [None] and all(type(x) is SimHash64 for x in arr[:-1])
            with pytest.raises(asyncpg.DataError):  # asyncpg wraps the encoder's ValueError
                await conn.fetchval(f"SELECT $1::{typ}", -1)
        finally:
            await conn.close()

    asyncio.run(run())


def test_asyncpg_pool_init(dsn):
    params = conninfo(dsn)

    async def run():
        async with asyncpg.create_pool(host=params["host"], port=int(params["port"]), user=params.get("user"),
                                       database=params["dbname"], min_size=1, max_size=2,
                                       init=register_asyncpg) as pool:
            assert await pool.fetchval("SELECT 'ffffffffffffffff'::simhash64") == (1 << 64) - 1
            assert await pool.fetchval("SELECT $1::simhash64 <~> $2", 0, SimHash64((1 << 64) - 1)) == 64

    asyncio.run(run())
