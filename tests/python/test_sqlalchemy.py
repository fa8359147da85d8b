"""SQLAlchemy 2.x models doing the README's queries against the real server, with the plans the
simhash index gives them, also with the extension in a schema off search_path."""

from decimal import Decimal

import psycopg
import psycopg.sql
import pytest
from orm_support import EXT_SCHEMA, ext_dsn  # noqa: F401 (fixture)
from sqlalchemy import BigInteger, Column, Computed, Integer, MetaData, Numeric, Table, Text
from sqlalchemy import bindparam, cast, create_engine, event, func, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from pgsimhash.psycopg import register_simhash
from pgsimhash.sqlalchemy import (
    SimHash64,
    create_extension,
    hamming,
    minhash64,
    simhash,
    simhash_containment,
    simhash_index,
    simhash_similarity,
)
from pgsimhash.value import SimHash64 as Value

ZH = "海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。"
ZH_TW = "海量網頁去重是搜索引擎的基礎工作，相似的文章應該只保留一份，以節省存儲與帶寬。"
MUSEUM = "博物馆推出夜间开放活动，观众可以参观青铜器特展。"
EN = "Near-duplicate detection keeps one copy of each article and saves storage."
EN_QUERY = "Near-duplicate detection keeps one copy of every article and saves storage."


class Base(DeclarativeBase):
    pass


class Doc(Base):
    """The README's table docs."""

    __tablename__ = "docs"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str] = mapped_column(Text, nullable=False)
    fp = mapped_column(SimHash64, Computed("minhash64(body)", persisted=True))
    __table_args__ = (simhash_index("docs_fp_simhash", "fp"),)


class Batch(Base):
    """The README's table batch (fingerprints in a plain column)."""

    __tablename__ = "batch"
    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    fp = mapped_column(SimHash64)


def engine_for(dsn):
    return create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))


def plan(conn, stmt, generic=False):
    """EXPLAIN (COSTS OFF) of a statement, its parameters bound by psycopg; with ``generic``, the
    generic plan of the statement prepared with PREPARE (its parameters stay parameters)."""
    compiled = stmt.compile(dialect=conn.dialect)
    raw = conn.connection.driver_connection
    params = {k: v.hex() if isinstance(v, Value) else v for k, v in compiled.params.items()}
    if not generic:
        cur = raw.execute("EXPLAIN (COSTS OFF) " + str(compiled), params)
        return "\n".join(r[0] for r in cur)
    query, values = str(compiled), []
    for i, (name, value) in enumerate(params.items(), 1):
        query = query.replace(f"%({name})s", f"${i}")
        values.append(value)
    raw.execute("PREPARE generic_plan AS " + query)
    raw.execute("SET plan_cache_mode = force_generic_plan")
    try:
        args = psycopg.sql.SQL(", ").join(psycopg.sql.Literal(v) for v in values)
        cur = raw.execute(psycopg.sql.SQL("EXPLAIN (COSTS OFF) EXECUTE generic_plan({})").format(args))
        return "\n".join(r[0] for r in cur)
    finally:
        raw.execute("RESET plan_cache_mode")
        raw.execute("DEALLOCATE generic_plan")


@pytest.fixture(scope="module")
def engine(dsn):
    engine = engine_for(dsn)
    with engine.begin() as conn:
        create_extension(conn)  # already there: IF NOT EXISTS
        Base.metadata.create_all(conn)
    with Session(engine) as s:
        s.add_all([Doc(body=ZH), Doc(body=MUSEUM), Doc(body=EN)])
        s.add_all([Batch(n=1, body=ZH_TW, fp=minhash64(ZH_TW)),
                   Batch(n=2, body="图书馆延长周末开放时间，读者可以在线预约座位。",
                         fp=minhash64("图书馆延长周末开放时间，读者可以在线预约座位。"))])
        s.commit()
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def grown(engine):
    """The README's Indexing step: 100,000 more rows, REINDEX, ANALYZE."""
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO docs (body) SELECT 'document ' || g || ' about ' || md5(g::text) || ' ' ||"
            " md5((g * 7)::text) FROM generate_series(1, 100000) g"))
        conn.execute(text("REINDEX INDEX docs_fp_simhash"))
        conn.execute(text("ANALYZE docs"))
    return engine


def verified(q, schema=None, doc=Doc):
    """The README's near_duplicates query."""
    fp = minhash64(q, schema=schema)
    return (select(doc.id, doc.fp.hamming(fp).label("distance"),
                   func.round(cast(simhash_similarity(doc.body, q, schema=schema), Numeric), 2))
            .where(doc.fp.within(fp, 9), simhash_similarity(doc.body, q, schema=schema) >= 0.7))


def test_sql_emitted(engine):
    sql = str(select(Doc.id).where(Doc.fp.within(minhash64(EN), 9)).compile(dialect=engine.dialect))
    assert "(docs.fp <~> minhash64(%(minhash64_1)s::VARCHAR)) <= 9" in sql
    sql = str(select(Doc.id).order_by(Doc.fp.nearest(Value(1))).compile(dialect=engine.dialect))
    assert "ORDER BY docs.fp <-> CAST(%(fp_1)s AS simhash64)" in sql
    for bad in ["9", 9.0, True, None]:
        with pytest.raises(TypeError):
            Doc.fp.within(Value(1), bad)


def test_readme_queries(engine):
    with Session(engine) as s:
        assert s.execute(verified(ZH_TW)).all() == [(1, 5, Decimal("0.84"))]
        assert s.execute(verified(EN_QUERY)).all() == [(3, 5, Decimal("0.86"))]
        assert s.scalars(select(Doc.id).where(Doc.fp.within(minhash64(EN_QUERY), 9))).all() == [3]
        # A batch against the table: a join on the radius test between two columns.
        rows = s.execute(select(Batch.n, Doc.id).join(Doc, Doc.fp.within(Batch.fp, 9))
                         .where(simhash_similarity(Doc.body, Batch.body) >= 0.7)).all()
        assert rows == [(1, 1)]
        # Values: SimHash64 out, SimHash64 / int / hex in.
        doc = s.get(Doc, 2)
        assert type(doc.fp) is Value and doc.fp == s.scalar(select(minhash64(MUSEUM)))
        for q in (doc.fp, int(doc.fp), doc.fp.hex()):
            assert s.scalars(select(Doc.id).where(Doc.fp.within(q, 0))).all() == [2]
            assert s.scalar(select(Doc.fp.hamming(q)).where(Doc.id == 2)) == 0
        assert s.scalar(select(hamming(Doc.fp, Value(doc.fp ^ 0b111))).where(Doc.id == 2)) == 3
        assert s.scalar(select(simhash(ZH)).where(Doc.id == 1)) is not None
        assert s.scalar(select(simhash_containment(ZH, ZH + " footer"))) == 1.0


def test_within_uses_the_index(grown):
    stmt = select(Doc.id).where(Doc.fp.within(minhash64(MUSEUM), 9))
    with grown.connect() as conn:
        for generic in (False, True):
            p = plan(conn, stmt, generic)
            assert "docs_fp_simhash" in p and "<@" in p, p
        # What within() avoids: a bound radius is a parameter, which a generic plan does not rewrite.
        bound = select(Doc.id).where(Doc.fp.hamming(minhash64(MUSEUM)) <= bindparam("k", 9))
        p = plan(conn, bound, generic=True)
        assert "Seq Scan" in p and "docs_fp_simhash" not in p, p
        assert conn.execute(stmt).scalars().all() == [2]


def test_nearest_uses_the_index(grown):
    q = minhash64(MUSEUM)
    stmt = select(Doc.id, Doc.fp.nearest(q).label("distance")).order_by(Doc.fp.nearest(q)).limit(3)
    with grown.connect() as conn:
        p = plan(conn, stmt)
        assert "Index Scan using docs_fp_simhash" in p and "Order By: (fp <-> " in p, p
        rows = conn.execute(stmt).all()
        assert rows[0] == (2, 0)
        conn.execute(text("SET enable_indexscan = off"))
        sorted_rows = conn.execute(stmt).all()
        assert [d for _, d in rows] == [d for _, d in sorted_rows]
        # The verified query on the grown table, through the index.
        conn.execute(text("RESET enable_indexscan"))
        assert conn.execute(verified(ZH_TW)).all() == [(1, 5, Decimal("0.84"))]


def test_expression_index(engine):
    """README: an index on minhash64(body) serves minhash64(body) <~> minhash64($1) <= 9."""
    index = simhash_index("batch_body_minhash", minhash64(Batch.body))
    stmt = select(Batch.n).where(minhash64(Batch.body).within(minhash64(ZH), 9))
    with engine.begin() as conn:
        index.create(conn)
        conn.execute(text("SET LOCAL enable_seqscan = off"))  # two rows: a scan would win
        p = plan(conn, stmt)
        assert "batch_body_minhash" in p and "<@" in p, p
        assert conn.execute(stmt).scalars().all() == [1]
        index.drop(conn)


def test_with_psycopg_adapters(dsn):
    engine = engine_for(dsn)
    event.listen(engine, "connect", lambda dbapi_conn, _rec: register_simhash(dbapi_conn))
    try:
        with Session(engine) as s:
            fp = s.scalar(select(Doc.fp).where(Doc.id == 3))
            assert type(fp) is Value
            assert s.scalars(select(Doc.id).where(Doc.fp.within(fp, 0))).all() == [3]
    finally:
        engine.dispose()


def test_schema_off_search_path(ext_dsn):
    metadata = MetaData()
    docs = Table(
        "docs", metadata,
        Column("id", BigInteger, primary_key=True),
        Column("body", Text, nullable=False),
        Column("fp", SimHash64(schema=EXT_SCHEMA)),
    )
    simhash_index("docs_fp_simhash", docs.c.fp)
    engine = engine_for(ext_dsn)
    try:
        with engine.begin() as conn:
            assert conn.scalar(text("SELECT to_regtype('simhash64')")) is None
            metadata.create_all(conn)
            for body in (ZH, MUSEUM, EN):
                conn.execute(docs.insert().values(body=body, fp=minhash64(body, schema=EXT_SCHEMA)))
            conn.execute(text(
                f"INSERT INTO docs (body, fp) SELECT md5(g::text), \"{EXT_SCHEMA}\".minhash64(md5(g::text))"
                " FROM generate_series(1, 20000) g"))
            conn.execute(text("ANALYZE docs"))
        with engine.connect() as conn:
            assert conn.execute(verified(ZH_TW, EXT_SCHEMA, docs.c)).all() == [(1, 5, Decimal("0.84"))]
            stmt = select(docs.c.id).where(docs.c.fp.within(minhash64(MUSEUM, schema=EXT_SCHEMA), 9))
            sql = str(stmt.compile(dialect=conn.dialect))
            assert f'OPERATOR("{EXT_SCHEMA}".<~>)' in sql and f'OPERATOR("{EXT_SCHEMA}".<=) 9' in sql
            for generic in (False, True):
                p = plan(conn, stmt, generic)
                assert "docs_fp_simhash" in p, p
            assert conn.execute(stmt).scalars().all() == [2]
            near = select(docs.c.id).order_by(docs.c.fp.nearest(Value(conn.scalar(
                select(docs.c.fp).where(docs.c.id == 3))))).limit(1)
            assert "Order By" in plan(conn, near) and conn.execute(near).scalars().all() == [3]
            # Why <= is qualified too: PostgreSQL's own integer <= is what an unqualified one finds.
            plain = select(docs.c.id).where(docs.c.fp.hamming(minhash64(MUSEUM, schema=EXT_SCHEMA)) <= 9)
            p = plan(conn, plain)
            assert "Seq Scan" in p and "docs_fp_simhash" not in p, p
    finally:
        engine.dispose()


def test_asyncpg_dialect(engine, dsn):
    import greenlet  # noqa: F401  (SQLAlchemy's asyncio needs it; tests/python/requirements.txt installs it)
    import asyncio

    from sqlalchemy.engine import URL
    from sqlalchemy.ext.asyncio import create_async_engine

    from orm_support import conninfo

    params = conninfo(dsn)
    url = URL.create("postgresql+asyncpg", username=params.get("user"), database=params["dbname"],
                     query={"host": params["host"], "port": str(params["port"])})

    async def run():
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                # asyncpg reads simhash64 as text here; the type's result processor makes it SimHash64.
                fp = (await conn.execute(select(Doc.fp).where(Doc.id == 2))).scalar()
                assert type(fp) is Value
                for q in (fp, (1 << 64) - 1):
                    rows = (await conn.execute(select(Doc.id, Doc.fp.hamming(q)).where(Doc.fp.within(q, 0)))).all()
                    assert rows == ([(2, 0)] if q == fp else [])
                rows = (await conn.execute(verified(ZH_TW))).all()
                assert rows == [(1, 5, Decimal("0.84"))]
        finally:
            await engine.dispose()

    asyncio.run(run())
