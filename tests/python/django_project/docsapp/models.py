"""The README's tables as Django models."""

from django.db import models

from pgsimhash.django import Minhash64, SimHash64Field, SimHashIndex


class Doc(models.Model):
    """docs: a fingerprint generated from the body, with a simhash index."""

    body = models.TextField()
    fp = models.GeneratedField(expression=Minhash64("body"), output_field=SimHash64Field(), db_persist=True)

    class Meta:
        indexes = [SimHashIndex(fields=["fp"], name="doc_fp_simhash")]


class Batch(models.Model):
    """batch: texts to check against docs, fingerprinted by the application."""

    body = models.TextField()
    fp = SimHash64Field(null=True)
