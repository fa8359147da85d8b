"""``SimHash64Field`` and its lookup ``within``."""

import operator

from django.core.exceptions import ValidationError
from django.db.models import Expression, Field, Lookup

from .._catalog import quote_ident
from ..value import SimHash64, to_simhash64


def type_name(schema):
    return f"{quote_ident(schema)}.simhash64" if schema else "simhash64"


def operator_name(symbol, schema):
    return f"OPERATOR({quote_ident(schema)}.{symbol})" if schema else symbol


class SimHash64Field(Field):
    """A ``simhash64`` column; values are ``pgsimhash.value.SimHash64`` (an ``int`` subclass).

    Assign a ``SimHash64``, an ``int`` from 0 to 2**64 - 1 or the hex text. ``schema``: the schema
    of the extension when it is not on ``search_path`` (the type, the operators of the lookups and
    of ``Hamming`` are then written qualified).
    """

    description = "64-bit SimHash fingerprint (simhash64)"
    empty_strings_allowed = False

    def __init__(self, *args, schema=None, **kwargs):
        self.schema = schema
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        if path == "pgsimhash.django.fields.SimHash64Field":
            path = "pgsimhash.django.SimHash64Field"  # the public name, in migrations
        if self.schema:
            kwargs["schema"] = self.schema
        return name, path, args, kwargs

    def db_type(self, connection):
        return type_name(self.schema)

    def get_placeholder(self, value, compiler, connection):
        # Values go out as hex text cast to the type, whatever the driver's parameter binding.
        return f"%s::{type_name(self.schema)}"

    def from_db_value(self, value, expression, connection):
        return to_simhash64(value)

    def to_python(self, value):
        try:
            return to_simhash64(value)
        except (TypeError, ValueError) as e:
            raise ValidationError(str(e), code="invalid", params={"value": value}) from e

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return None if value is None else to_simhash64(value).hex()

    def value_to_string(self, obj):
        value = self.value_from_object(obj)
        return None if value is None else to_simhash64(value).hex()


class _Ball(Expression):
    """The right side of ``within``: the query fingerprint and the radius. An expression, so that
    Django resolves the fingerprint when it is one (``OuterRef("fp")`` in a subquery)."""

    def __init__(self, q, k):
        super().__init__()
        self.q, self.k = q, k

    def get_source_expressions(self):
        return [self.q] if hasattr(self.q, "resolve_expression") else []

    def set_source_expressions(self, exprs):
        if exprs:
            (self.q,) = exprs

    def resolve_expression(self, *args, **kwargs):
        c = self.copy()
        if hasattr(c.q, "resolve_expression"):
            c.q = c.q.resolve_expression(*args, **kwargs)
        return c


@SimHash64Field.register_lookup
class Within(Lookup):
    """``fp__within=(q, k)``: ``(fp <~> q) <= k``, the radius test the ``simhash`` index serves.

    ``q`` is a fingerprint value (``SimHash64``, ``int``, hex text) or an expression
    (``Minhash64(Value(text))``, ``F("other__fp")``); ``k`` an integer, written into the SQL as a
    literal (a parameter would keep a generic plan of a prepared statement off the index).
    """

    lookup_name = "within"
    prepare_rhs = False

    def get_prep_lookup(self):
        rhs = self.rhs
        if not isinstance(rhs, (tuple, list)) or len(rhs) != 2:
            raise ValueError("within takes a pair (fingerprint, radius), e.g. fp__within=(q, 9)")
        q, k = rhs
        if isinstance(k, bool):
            raise TypeError("the radius is an integer, not a bool")
        k = operator.index(k)
        if not hasattr(q, "resolve_expression"):
            q = to_simhash64(q)
        return _Ball(q, k)

    def as_sql(self, compiler, connection):
        lhs_sql, params = self.process_lhs(compiler, connection)
        q, k = self.rhs.q, self.rhs.k
        schema = getattr(self.lhs.output_field, "schema", None)
        if hasattr(q, "as_sql"):
            q_sql, q_params = compiler.compile(q)
        else:
            q_sql, q_params = f"%s::{type_name(schema)}", [q.hex()]
        sql = f"({lhs_sql} {operator_name('<~>', schema)} {q_sql}) {operator_name('<=', schema)} {int(k)}"
        return sql, (*params, *q_params)


__all__ = ["SimHash64", "SimHash64Field", "Within"]
