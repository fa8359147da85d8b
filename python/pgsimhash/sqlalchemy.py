"""SQLAlchemy 2.x: the ``simhash64`` type with the extension's operators, functions and index.

    from sqlalchemy import BigInteger, Computed, Text
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
    from pgsimhash.sqlalchemy import SimHash64, minhash64, simhash_index, simhash_similarity

    class Doc(Base):
        __tablename__ = "docs"
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
        body: Mapped[str] = mapped_column(Text)
        fp = mapped_column(SimHash64, Computed("minhash64(body)", persisted=True))
        __table_args__ = (simhash_index("docs_fp_simhash", "fp"),)

    q = "some text"
    select(Doc.id).where(Doc.fp.within(minhash64(q), 9), simhash_similarity(Doc.body, q) >= 0.7)
    select(Doc.id).order_by(Doc.fp.nearest(minhash64(q))).limit(10)

What the comparators emit (``fp`` a column of type ``SimHash64``):

- ``fp.hamming(q)``: ``fp <~> q``, the Hamming distance (an ``Integer`` expression);
- ``fp.within(q, k)``: ``(fp <~> q) <= k`` with ``k`` written into the SQL as an integer literal, the
  radius test that the planner turns into a lookup in the ``simhash`` index (a bound ``k`` would be a
  parameter, which a generic plan of a prepared statement cannot rewrite);
- ``fp.nearest(q)``: ``fp <-> q``, the distance as a plain integer, for ``ORDER BY ... LIMIT n``
  (the ordering operator of the ``simhash`` index).

``q`` is a ``SimHash64``, an ``int`` from 0 to 2**64 - 1, the hex text (each sent as a parameter
inside ``CAST(... AS simhash64)``), another fingerprint column (a join) or a SQL expression such as
``minhash64(text)``. Values read from a ``SimHash64`` column are ``pgsimhash.value.SimHash64``.

Where the extension lives in a schema that is not on ``search_path`` (``CREATE EXTENSION simhash
SCHEMA ext``), declare the column ``SimHash64(schema="ext")`` and pass ``schema="ext"`` to the
functions: the type is written ``"ext".simhash64``, the operators ``OPERATOR("ext".<~>)``,
``OPERATOR("ext".<=)`` and ``OPERATOR("ext".<->)`` (the ``<=`` too: PostgreSQL's own ``<=`` on
integers would be chosen otherwise, and the index would not be used), and the functions
``ext.minhash64(...)``.
"""

import operator as _operator

from sqlalchemy import Float, Index, Integer, literal, literal_column, text
from sqlalchemy.sql import cast
from sqlalchemy.sql.elements import ClauseElement, quoted_name
from sqlalchemy.sql.functions import Function
from sqlalchemy.types import UserDefinedType

from ._catalog import quote_ident
from .value import SimHash64 as SimHash64Value
from .value import to_simhash64

__all__ = [
    "SimHash64",
    "SimHash64Value",
    "create_extension",
    "hamming",
    "minhash64",
    "simhash",
    "simhash_containment",
    "simhash_index",
    "simhash_ngrams",
    "simhash_similarity",
]


def _operator_name(symbol, schema):
    return f"OPERATOR({quote_ident(schema)}.{symbol})" if schema else symbol


def _radius(k):
    if isinstance(k, bool):
        raise TypeError("the radius is an integer, not a bool")
    return _operator.index(k)  # TypeError for anything that is not an integer


class SimHash64(UserDefinedType):
    """The column type ``simhash64`` (``SimHash64(schema="ext")`` for an extension outside search_path)."""

    cache_ok = True

    def __init__(self, schema=None):
        self.schema = schema

    def get_col_spec(self, **kw):
        return f"{quote_ident(self.schema)}.simhash64" if self.schema else "simhash64"

    def bind_processor(self, dialect):
        def process(value):
            return None if value is None else to_simhash64(value).hex()

        return process

    def bind_expression(self, bindvalue):
        # Parameters go out as hex text, typed by the cast (drivers send str untyped or as text).
        return cast(bindvalue, self)

    def result_processor(self, dialect, coltype):
        # Text from a driver without adapters, or SimHash64 from registered psycopg/asyncpg ones.
        return to_simhash64

    @property
    def python_type(self):
        return SimHash64Value

    class comparator_factory(UserDefinedType.Comparator):
        def _schema(self):
            return getattr(self.type, "schema", None)

        def hamming(self, other):
            """``fp <~> other``: the number of differing bits, 0 to 64."""
            return self.op(_operator_name("<~>", self._schema()), return_type=Integer)(other)

        def within(self, other, k):
            """``(fp <~> other) <= k``: the radius test the ``simhash`` index serves (k from 0 to 64)."""
            radius = literal_column(str(_radius(k)), Integer)
            distance = self.hamming(other)
            schema = self._schema()
            if schema:
                return distance.op(_operator_name("<=", schema), is_comparison=True)(radius)
            return distance <= radius

        def nearest(self, other):
            """``fp <-> other``: the distance to order by, nearest first (``ORDER BY ... LIMIT n``)."""
            return self.op(_operator_name("<->", self._schema()), return_type=Integer)(other)


def _function(name, args, type_, schema):
    if schema:
        return Function(quoted_name(name, quote=False), *args, type_=type_,
                        packagenames=(quoted_name(schema, quote=True),))
    return Function(name, *args, type_=type_)


def _args(*args):
    # Trailing optional arguments left out take the SQL function's defaults.
    args = list(args)
    while args and args[-1] is None:
        args.pop()
    if any(a is None for a in args):
        raise ValueError("an optional argument is left out while a later one is given")
    return args


def _fingerprint(value, schema):
    # A Python value as a simhash64 parameter (an expression stays as it is).
    if isinstance(value, ClauseElement) or hasattr(value, "__clause_element__"):
        return value
    return literal(value, SimHash64(schema))


def hamming(a, b, schema=None):
    """``hamming(a, b)``: the function form of ``<~>`` (Python values sent as ``simhash64``)."""
    return _function("hamming", [_fingerprint(a, schema), _fingerprint(b, schema)], Integer, schema)


def simhash(text_, top_n=None, schema=None):
    """``simhash(text [, top_n])``: the word-level SimHash of a text (a ``SimHash64`` expression)."""
    return _function("simhash", _args(text_, top_n), SimHash64(schema), schema)


def simhash_ngrams(text_, n=None, schema=None):
    """``simhash_ngrams(text [, n])``: the SimHash of the text's character n-grams."""
    return _function("simhash_ngrams", _args(text_, n), SimHash64(schema), schema)


def minhash64(text_, n=None, hashes_per_bit=None, schema=None):
    """``minhash64(text [, n [, hashes_per_bit]])``: the recommended fingerprint."""
    return _function("minhash64", _args(text_, n, hashes_per_bit), SimHash64(schema), schema)


def simhash_similarity(a, b, n=None, schema=None):
    """``simhash_similarity(a, b [, n])``: the exact Jaccard similarity of the texts' character n-grams (0 to 1)."""
    return _function("simhash_similarity", _args(a, b, n), Float, schema)


def simhash_containment(a, b, n=None, schema=None):
    """``simhash_containment(a, b [, n])``: the share of the smaller n-gram set inside the larger."""
    return _function("simhash_containment", _args(a, b, n), Float, schema)


def simhash_index(name, column, **kw):
    """``CREATE INDEX name ON ... USING simhash (column)``: an ``Index`` for ``__table_args__`` or a ``Table``.

    ``column`` is a column, its name or an expression (``minhash64(Doc.body)``); further keywords
    go to ``Index`` (``postgresql_concurrently=True``, ``postgresql_where`` ...).
    """
    return Index(name, column, postgresql_using="simhash", **kw)


def create_extension(connection, schema=None):
    """Runs ``CREATE EXTENSION IF NOT EXISTS simhash [SCHEMA schema]`` on a SQLAlchemy connection.

    Needs a superuser (the extension is not trusted). With ``metadata.create_all(engine)``, call it
    first on the same engine.
    """
    statement = "CREATE EXTENSION IF NOT EXISTS simhash"
    if schema:
        statement += f" SCHEMA {quote_ident(schema)}"
    connection.execute(text(statement))
