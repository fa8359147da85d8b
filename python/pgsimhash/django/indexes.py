"""``SimHashIndex``: ``CREATE INDEX ... USING simhash``."""

from django.contrib.postgres.indexes import PostgresIndex


class SimHashIndex(PostgresIndex):
    """The extension's ``simhash`` index on one fingerprint field or expression:
    ``SimHashIndex(fields=["fp"], name="doc_fp_simhash")`` or
    ``SimHashIndex(Minhash64("body"), name="doc_body_minhash")``. It serves ``fp__within``,
    ``order_by(Hamming("fp", q))`` and the near-duplicate constraint."""

    suffix = "simhash"

    def check_supported(self, schema_editor):
        if len(self.fields) + len(self.expressions) != 1:
            raise ValueError("a simhash index has exactly one key column")

    def deconstruct(self):
        path, args, kwargs = super().deconstruct()
        if path == "pgsimhash.django.indexes.SimHashIndex":
            path = "pgsimhash.django.SimHashIndex"  # the public name, in migrations
        return path, args, kwargs
