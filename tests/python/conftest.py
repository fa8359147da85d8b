"""Shared fixtures of the Python tests (tests/python/run.sh runs them against the cluster that
scripts/common.sh starts; the connection comes from libpq's environment: PGHOST, PGPORT, PGUSER).

- ``db_params``: a fresh database for the test module, with ``CREATE EXTENSION simhash`` done, as a
  dict (host, port, user, dbname; for Django's settings and the like); dropped after the module.
- ``dsn``: the same database as a ``postgresql://`` URI, which psycopg, asyncpg and SQLAlchemy
  (after ``postgresql+psycopg://``) read.
- ``conn``: a psycopg 3 connection to it (autocommit), closed after the test.
"""

import os
import re
import urllib.parse
import uuid

import pytest

psycopg = pytest.importorskip("psycopg")


def _server():
    return {
        "host": os.environ.get("PGHOST", "/tmp"),
        "port": int(os.environ.get("PGPORT", "5432")),
        "user": os.environ.get("PGUSER", "postgres"),
    }


def _uri(params):
    query = urllib.parse.urlencode({"host": params["host"], "port": params["port"]})
    user = urllib.parse.quote(params["user"])
    return f"postgresql://{user}@/{params['dbname']}?{query}"


@pytest.fixture(scope="module")
def db_params(request):
    server = _server()
    module = re.sub(r"[^a-z0-9_]", "_", request.module.__name__.rsplit(".", 1)[-1].lower())
    name = f"pgsimhash_{module}_{uuid.uuid4().hex[:8]}"[:63]
    admin = psycopg.connect(dbname="postgres", autocommit=True, **server)
    admin.execute(f'CREATE DATABASE "{name}"')
    params = dict(server, dbname=name)
    try:
        with psycopg.connect(autocommit=True, **params) as c:
            c.execute("CREATE EXTENSION simhash")
        yield params
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="module")
def dsn(db_params):
    return _uri(db_params)


@pytest.fixture
def conn(db_params):
    with psycopg.connect(autocommit=True, **db_params) as c:
        yield c
