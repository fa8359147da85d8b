"""``SimHashExtension``: the migration operation that creates the extension."""

from django.contrib.postgres.operations import CreateExtension

from .._catalog import quote_ident


class SimHashExtension(CreateExtension):
    """``CREATE EXTENSION IF NOT EXISTS simhash [SCHEMA schema]`` (reversed by ``DROP EXTENSION``).

    Put it first in the migration that adds the first ``SimHash64Field``. It needs a superuser
    (the extension is not trusted). ``schema``: the schema to create it in (which must exist).
    """

    def __init__(self, schema=None, hints=None):
        self.name = "simhash"
        self.schema = schema
        self.hints = hints or {}

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self.schema and not self.extension_exists(schema_editor, self.name):
            from django.db import router

            if schema_editor.connection.vendor == "postgresql" and router.allow_migrate(
                schema_editor.connection.alias, app_label, **self.hints
            ):
                schema_editor.execute(f"CREATE EXTENSION IF NOT EXISTS simhash SCHEMA {quote_ident(self.schema)}")
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def describe(self):
        where = f" in schema {self.schema}" if self.schema else ""
        return f"Creates extension simhash{where}"
