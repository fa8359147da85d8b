"""Expressions: ``Hamming`` (``<~>``) and the extension's functions."""

from django.db.models import F, FloatField, Func, IntegerField, Value
from django.utils.deconstruct import deconstructible

from ..value import to_simhash64
from .fields import SimHash64Field, operator_name, quote_ident


def _fingerprint(value, schema):
    # A str names a field (as in Func); SimHash64 and int values are fingerprints.
    if isinstance(value, str):
        return F(value)
    if hasattr(value, "resolve_expression"):
        return value
    return Value(to_simhash64(value).hex(), output_field=SimHash64Field(schema=schema))


@deconstructible(path="pgsimhash.django.Hamming")
class Hamming(Func):
    """``Hamming(a, b)``: ``a <~> b``, the number of differing bits (an integer).

    Each side is a field name (``"fp"``), an expression (``F("batch__fp")``,
    ``Minhash64(Value(text))``) or a fingerprint value (``SimHash64``, ``int``; hex text as
    ``SimHash64("0123456789abcdef")``).
    In ``order_by`` the ``simhash`` index serves it nearest first (``.order_by(Hamming("fp", q))[:10]``).
    ``schema``: taken from a ``SimHash64Field`` operand when not given.
    """

    output_field = IntegerField()

    def __init__(self, a, b, schema=None):
        self.schema = schema
        super().__init__(_fingerprint(a, schema), _fingerprint(b, schema))

    def as_sql(self, compiler, connection, **extra):
        schema = self.schema
        if schema is None:
            for e in self.get_source_expressions():
                schema = getattr(getattr(e, "output_field", None), "schema", None) or schema
        joiner = f" {operator_name('<~>', schema)} "
        return super().as_sql(compiler, connection, template="(%(expressions)s)", arg_joiner=joiner, **extra)


class _ExtensionFunc(Func):
    """A function of the extension, qualified with ``schema=`` when given."""

    def __init__(self, *expressions, schema=None, **extra):
        self.schema = schema
        # Trailing optional arguments left out take the SQL function's defaults.
        expressions = list(expressions)
        while expressions and expressions[-1] is None:
            expressions.pop()
        if any(e is None for e in expressions):
            raise ValueError("an optional argument is left out while a later one is given")
        expressions = [e if hasattr(e, "resolve_expression") or isinstance(e, str) else Value(e)
                       for e in expressions]
        super().__init__(*expressions, **extra)

    def as_sql(self, compiler, connection, **extra):
        function = f"{quote_ident(self.schema)}.{self.function}" if self.schema else self.function
        return super().as_sql(compiler, connection, function=function, **extra)


@deconstructible(path="pgsimhash.django.Minhash64")
class Minhash64(_ExtensionFunc):
    """``minhash64(text [, n [, hashes_per_bit]])``; a str argument names a field, ``Value(text)`` is a text."""

    function = "minhash64"

    def __init__(self, text, n=None, hashes_per_bit=None, schema=None):
        super().__init__(text, n, hashes_per_bit, schema=schema, output_field=SimHash64Field(schema=schema))


@deconstructible(path="pgsimhash.django.Simhash")
class Simhash(_ExtensionFunc):
    """``simhash(text [, top_n])``: the word-level SimHash."""

    function = "simhash"

    def __init__(self, text, top_n=None, schema=None):
        super().__init__(text, top_n, schema=schema, output_field=SimHash64Field(schema=schema))


@deconstructible(path="pgsimhash.django.SimhashNgrams")
class SimhashNgrams(_ExtensionFunc):
    """``simhash_ngrams(text [, n])``: the SimHash of the character n-grams."""

    function = "simhash_ngrams"

    def __init__(self, text, n=None, schema=None):
        super().__init__(text, n, schema=schema, output_field=SimHash64Field(schema=schema))


@deconstructible(path="pgsimhash.django.SimhashSimilarity")
class SimhashSimilarity(_ExtensionFunc):
    """``simhash_similarity(a, b [, n])``: the exact Jaccard similarity of the texts' character n-grams."""

    function = "simhash_similarity"

    def __init__(self, a, b, n=None, schema=None):
        super().__init__(a, b, n, schema=schema, output_field=FloatField())


@deconstructible(path="pgsimhash.django.SimhashContainment")
class SimhashContainment(_ExtensionFunc):
    """``simhash_containment(a, b [, n])``: the share of the smaller n-gram set inside the larger."""

    function = "simhash_containment"

    def __init__(self, a, b, n=None, schema=None):
        super().__init__(a, b, n, schema=schema, output_field=FloatField())


__all__ = ["Hamming", "Minhash64", "Simhash", "SimhashContainment", "SimhashNgrams",
           "SimhashSimilarity"]
