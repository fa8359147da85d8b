"""Shared by the adapter and ORM tests: connection parameters from the ``dsn`` fixture, and a
database whose extension lives in a schema off ``search_path``."""

import os
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

# The schema of ext_dsn's extension: mixed case and a blank, so it must be quoted everywhere,
# and not on search_path.
EXT_SCHEMA = "Simhash Ext"


def conninfo(dsn):
    """host, port, user, dbname of ``dsn``, completed from the libpq environment."""
    params = conninfo_to_dict(dsn)
    for key, env in (("host", "PGHOST"), ("port", "PGPORT"), ("user", "PGUSER")):
        if key not in params and os.environ.get(env):
            params[key] = os.environ[env]
    return params


@pytest.fixture(scope="module")
def ext_dsn(dsn):
    """A fresh database with ``CREATE EXTENSION simhash SCHEMA "Simhash Ext"``."""
    name = "orm_ext_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    params = dict(conninfo(dsn), dbname=name)
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{EXT_SCHEMA}"')
            conn.execute(f'CREATE EXTENSION simhash SCHEMA "{EXT_SCHEMA}"')
        yield psycopg.conninfo.make_conninfo(**params)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
