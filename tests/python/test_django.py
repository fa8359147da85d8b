"""Django against the real server: the project in django_project/ (the README's tables), its
migration creating the extension, the README's queries through the ORM and their plans, and the
field with the extension in a schema off search_path."""

import os
import sys

import django
import psycopg
import pytest
from orm_support import EXT_SCHEMA, conninfo, ext_dsn  # noqa: F401 (fixture)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "django_project"))

from pgsimhash.value import SimHash64  # noqa: E402

ZH = "海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。"
ZH_TW = "海量網頁去重是搜索引擎的基礎工作，相似的文章應該只保留一份，以節省存儲與帶寬。"
MUSEUM = "博物馆推出夜间开放活动，观众可以参观青铜器特展。"
EN = "Near-duplicate detection keeps one copy of each article and saves storage."
EN_QUERY = "Near-duplicate detection keeps one copy of every article and saves storage."
LIBRARY = "图书馆延长周末开放时间，读者可以在线预约座位。"


def database(dsn):
    params = conninfo(dsn)
    return {"ENGINE": "django.db.backends.postgresql", "NAME": params["dbname"],
            "HOST": params.get("host", ""), "PORT": params.get("port", ""), "USER": params.get("user", ""),
            "PASSWORD": params.get("password", "")}


@pytest.fixture(scope="module")
def project(dsn, ext_dsn):
    """Django set up on the fixture's database (and ext_dsn's as the alias "ext"), migrated by
    the project's migration after the extension was dropped, so that SimHashExtension creates it."""
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.postgres", "docsapp"],
        # "ssb": the same database through psycopg's server-side parameter binding.
        DATABASES={"default": database(dsn), "ext": database(ext_dsn),
                   "ssb": dict(database(dsn), OPTIONS={"server_side_binding": True})},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP EXTENSION simhash")
    call_command("migrate", "docsapp", verbosity=0)
    yield
    from django.db import connections

    connections.close_all()


def test_migration(project, dsn):
    from django.core.management import call_command

    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'simhash'").fetchone() == (1,)
        indexdef, = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'doc_fp_simhash'").fetchone()
        assert "USING simhash (fp)" in indexdef
        kind, = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                             " WHERE attrelid = 'docsapp_batch'::regclass AND attname = 'fp'").fetchone()
        assert kind == "simhash64"
        generated, = conn.execute("SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef"
                                  " WHERE adrelid = 'docsapp_doc'::regclass").fetchone()
        assert generated == "minhash64(body)"
    # The models and the migration agree: the field, the expression and the index deconstruct.
    call_command("makemigrations", "docsapp", "--check", "--dry-run", verbosity=0)


@pytest.fixture(scope="module")
def docs(project):
    from docsapp.models import Batch, Doc

    for body in (ZH, MUSEUM, EN):
        Doc.objects.create(body=body)
    Batch.objects.create(body=ZH_TW, fp=SimHash64(_server_minhash(ZH_TW)))
    Batch.objects.create(body=LIBRARY, fp=_server_minhash(LIBRARY).hex())
    return Doc, Batch


def _server_minhash(text):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT minhash64(%s)::text", [text])
        return SimHash64(cur.fetchone()[0])


def verified(Doc, q):
    """The README's near_duplicates query."""
    from django.db.models import Value

    from pgsimhash.django import Hamming, Minhash64, SimhashSimilarity

    return (Doc.objects
            .annotate(distance=Hamming("fp", Minhash64(Value(q))), similarity=SimhashSimilarity("body", Value(q)))
            .filter(fp__within=(Minhash64(Value(q)), 9), similarity__gte=0.7)
            .values_list("id", "distance", "similarity"))


def test_readme_queries(docs):
    from django.db.models import OuterRef, Subquery, Value

    from pgsimhash.django import Hamming, Minhash64, SimhashContainment

    Doc, Batch = docs
    (row,) = verified(Doc, ZH_TW)
    assert row[:2] == (1, 5) and round(row[2], 2) == 0.84
    (row,) = verified(Doc, EN_QUERY)
    assert row[:2] == (3, 5) and round(row[2], 2) == 0.86
    assert list(Doc.objects.filter(fp__within=(Minhash64(Value(EN_QUERY)), 9)).values_list("id", flat=True)) == [3]
    # A batch against the table: per batch row, the stored near-duplicate.
    near = Doc.objects.filter(fp__within=(OuterRef("fp"), 9)).values("id")[:1]
    assert list(Batch.objects.annotate(doc=Subquery(near)).order_by("id").values_list("doc", flat=True)) == [1, None]
    # Values: SimHash64 out; SimHash64, int and hex in; NULL.
    doc = Doc.objects.get(id=2)
    assert type(doc.fp) is SimHash64 and doc.fp == _server_minhash(MUSEUM)
    for q in (doc.fp, int(doc.fp), doc.fp.hex()):
        assert list(Doc.objects.filter(fp__within=(q, 0)).values_list("id", flat=True)) == [2]
        assert Doc.objects.filter(fp=q).count() == 1
    assert Doc.objects.annotate(d=Hamming("fp", SimHash64(doc.fp ^ 0b111))).get(id=2).d == 3
    assert Doc.objects.annotate(c=SimhashContainment(Value(ZH), Value(ZH + " footer"))).get(id=1).c == 1.0
    for v in (0, 1 << 63, (1 << 64) - 1, None):
        b = Batch.objects.create(body="edge", fp=v)
        assert Batch.objects.get(id=b.id).fp == v
        b.delete()
    with pytest.raises(TypeError):
        Doc.objects.filter(fp__within=(doc.fp, "9"))
    with pytest.raises(ValueError):
        Doc.objects.filter(fp__within=doc.fp)


def test_expression_index(docs):
    """SimHashIndex on an expression: minhash64(body), used by a within on the same expression."""
    from django.db import connection
    from django.db.models import Value

    from pgsimhash.django import Minhash64, SimHashIndex

    _, Batch = docs
    index = SimHashIndex(Minhash64("body"), name="batch_body_minhash")
    with connection.schema_editor() as editor:
        editor.add_index(Batch, index)
    try:
        query = (Batch.objects.annotate(m=Minhash64("body")).filter(m__within=(Minhash64(Value(ZH)), 9))
                 .values_list("body", flat=True))
        with connection.cursor() as cur:
            cur.execute("SET enable_seqscan = off")  # two rows: a scan would win
        plan = query.explain()
        assert "batch_body_minhash" in plan and "<@" in plan, plan
        assert list(query) == [ZH_TW]
    finally:
        with connection.cursor() as cur:
            cur.execute("RESET enable_seqscan")
        with connection.schema_editor() as editor:
            editor.remove_index(Batch, index)


def test_server_side_binding(docs):
    from django.db.models import Value

    from pgsimhash.django import Hamming, Minhash64

    Doc, Batch = docs
    docs_ssb, batch_ssb = Doc.objects.using("ssb"), Batch.objects.using("ssb")
    fp = docs_ssb.get(id=2).fp
    assert list(docs_ssb.filter(fp__within=(Minhash64(Value(MUSEUM)), 9)).values_list("id", flat=True)) == [2]
    for q in (fp, int(fp), fp.hex()):
        assert list(docs_ssb.filter(fp__within=(q, 0)).values_list("id", flat=True)) == [2]
        assert docs_ssb.filter(fp=q).count() == 1
    assert docs_ssb.annotate(d=Hamming("fp", SimHash64(fp ^ 1))).get(id=2).d == 1
    b = batch_ssb.create(body="edge", fp=(1 << 64) - 1)
    batch_ssb.filter(id=b.id).update(fp=fp.hex())
    assert batch_ssb.get(id=b.id).fp == fp
    b.delete()


@pytest.fixture(scope="module")
def grown(docs):
    """The README's Indexing step: 100,000 more rows, REINDEX, ANALYZE."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("INSERT INTO docsapp_doc (body) SELECT 'document ' || g || ' about ' || md5(g::text)"
                    " || ' ' || md5((g * 7)::text) FROM generate_series(1, 100000) g")
        cur.execute("REINDEX INDEX doc_fp_simhash")
        cur.execute("ANALYZE docsapp_doc")
    return docs


def test_plans(grown):
    from django.db.models import Value

    from pgsimhash.django import Hamming, Minhash64

    Doc, _ = grown
    within = Doc.objects.filter(fp__within=(Minhash64(Value(MUSEUM)), 9)).values_list("id", flat=True)
    plan = within.explain()
    assert "doc_fp_simhash" in plan and "<@" in plan, plan
    assert list(within) == [2]
    nearest = Doc.objects.order_by(Hamming("fp", Minhash64(Value(MUSEUM)))).values_list("id", flat=True)[:3]
    plan = nearest.explain()
    assert "Index Scan using doc_fp_simhash" in plan and "Order By: (fp <-> " in plan, plan
    assert list(nearest)[0] == 2
    (row,) = verified(Doc, ZH_TW)
    assert row[:2] == (1, 5)


def test_schema_off_search_path(project):
    from django.db import connections, models
    from django.db.models import Value

    from pgsimhash.django import Hamming, Minhash64, SimHash64Field, SimHashExtension, SimHashIndex

    class ExtDoc(models.Model):
        body = models.TextField()
        fp = SimHash64Field(schema=EXT_SCHEMA, null=True)

        class Meta:
            app_label = "docsapp"
            indexes = [SimHashIndex(fields=["fp"], name="extdoc_fp_simhash")]

    conn = connections["ext"]
    with conn.cursor() as cur:
        cur.execute("DROP EXTENSION simhash")
    op = SimHashExtension(schema=EXT_SCHEMA)
    with conn.schema_editor() as editor:
        op.database_forwards("docsapp", editor, None, None)
        editor.create_model(ExtDoc)
    with conn.cursor() as cur:
        cur.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'simhash'")
        assert cur.fetchone() == (f'"{EXT_SCHEMA}"',)
        cur.execute("SELECT to_regtype('simhash64')")
        assert cur.fetchone() == (None,)
    objects = ExtDoc.objects.using("ext")
    for body in (ZH, MUSEUM, EN):
        objects.create(body=body, fp=_ext_minhash(conn, body))
    with conn.cursor() as cur:
        cur.execute(f'INSERT INTO docsapp_extdoc (body, fp) SELECT md5(g::text), "{EXT_SCHEMA}".minhash64(md5(g::text))'
                    " FROM generate_series(1, 20000) g")
        cur.execute("ANALYZE docsapp_extdoc")
    q = Minhash64(Value(MUSEUM), schema=EXT_SCHEMA)
    within = objects.filter(fp__within=(q, 9)).values_list("id", flat=True)
    assert list(within) == [2]
    assert "extdoc_fp_simhash" in within.explain()
    assert objects.annotate(d=Hamming("fp", q)).get(id=2).d == 0
    nearest = objects.order_by(Hamming("fp", q)).values_list("id", flat=True)[:1]
    assert "Index Scan using extdoc_fp_simhash" in nearest.explain() and list(nearest) == [2]
    assert type(objects.get(id=1).fp) is SimHash64


def _ext_minhash(conn, text):
    with conn.cursor() as cur:
        cur.execute(f'SELECT "{EXT_SCHEMA}".minhash64(%s)::text', [text])
        return SimHash64(cur.fetchone()[0])
