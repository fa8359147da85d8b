"""Django: a ``simhash64`` model field, the radius lookup, expressions, the index and the migration
operation that creates the extension.

    from django.db import models
    from django.db.models import Value
    from pgsimhash.django import Hamming, Minhash64, SimHash64Field, SimHashIndex, SimhashSimilarity

    class Doc(models.Model):
        body = models.TextField()
        fp = models.GeneratedField(expression=Minhash64("body"), output_field=SimHash64Field(),
                                   db_persist=True)

        class Meta:
            indexes = [SimHashIndex(fields=["fp"], name="doc_fp_simhash")]

    q = "some text"
    Doc.objects.annotate(similarity=SimhashSimilarity("body", Value(q))).filter(
        fp__within=(Minhash64(Value(q)), 9), similarity__gte=0.7)
    Doc.objects.order_by(Hamming("fp", Minhash64(Value(q))))[:10]

A str argument of an expression names a field (Django's rule); a text is ``Value(text)``.

See docs/python-orm.md for every form and the SQL each emits.
"""

from .expressions import Hamming, Minhash64, Simhash, SimhashContainment, SimhashNgrams, SimhashSimilarity
from .fields import SimHash64Field, Within
from .indexes import SimHashIndex
from .operations import SimHashExtension

__all__ = [
    "Hamming",
    "Minhash64",
    "SimHash64Field",
    "SimHashExtension",
    "SimHashIndex",
    "Simhash",
    "SimhashContainment",
    "SimhashNgrams",
    "SimhashSimilarity",
    "Within",
]
