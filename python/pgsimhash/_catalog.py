"""What the adapters share: where the extension put ``simhash64``, and identifier quoting."""

# The type simhash64 of the extension `simhash`, wherever it was created (its schema need not be
# on search_path), or in the schema given: oid, array oid, schema name. {schema} is a parameter
# placeholder of the driver, bound to the schema name or NULL.
TYPE_QUERY = """
SELECT t.oid, t.typarray, n.nspname
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
WHERE t.typname = 'simhash64'
  AND n.oid = CASE WHEN {schema}::pg_catalog.text IS NULL
                   THEN (SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname = 'simhash')
                   ELSE (SELECT s.oid FROM pg_catalog.pg_namespace s WHERE s.nspname = {schema}::pg_catalog.text)
              END
"""

NOT_FOUND = (
    "type simhash64 not found: run CREATE EXTENSION simhash in this database"
    " (or pass schema= where it lives)"
)


def quote_ident(name):
    """``name`` as a quoted SQL identifier (``ext`` -> ``"ext"``, ``a"b`` -> ``"a""b"``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"not a schema name: {name!r}")
    return '"' + name.replace('"', '""') + '"'
