"""The client's fingerprints and similarities equal the server's, bit for bit, on 100,000 texts of
every script (tests/python/texts.py): the texts go to the server in one COPY, every function's
values come back in one COPY, and each column is compared with the client's values."""

import random

import pytest

import pgsimhash
import texts as corpus

COUNT = 100_000


@pytest.fixture(scope="module")
def rows(db_params):
    import psycopg

    bodies = corpus.texts(COUNT)
    rng = random.Random(7)
    # the second text of each pair: an edit of the first, or another text
    others = [corpus.variant(rng, t) if i % 2 else bodies[(i * 7919) % COUNT] for i, t in enumerate(bodies)]
    with psycopg.connect(**db_params) as c, c.cursor() as cur:
        cur.execute("CREATE TEMP TABLE t (id int PRIMARY KEY, body text NOT NULL, other text NOT NULL)")
        with cur.copy("COPY t (id, body, other) FROM STDIN") as copy:
            for i, (body, other) in enumerate(zip(bodies, others)):
                copy.write_row((i, body, other))
        server = []
        with cur.copy(
            """COPY (SELECT simhash(body)::bigint, simhash(body, 5)::bigint, simhash_ngrams(body)::bigint,
                            simhash_ngrams(body, 2)::bigint, minhash64(body)::bigint, minhash64(body)::text,
                            minhash64(body, 5, 2)::bigint, simhash_fold(body),
                            simhash_similarity(body, other), simhash_containment(body, other, 2),
                            minhash64(body) <~> minhash64(other)
                       FROM t ORDER BY id) TO STDOUT"""
        ) as copy:
            copy.set_types(["int8", "int8", "int8", "int8", "int8", "text", "int8", "text", "float8", "float8", "int4"])
            server = list(copy.rows())
    assert len(server) == COUNT
    return bodies, others, server


def column(server, i):
    return [row[i] for row in server]


def signed(values):
    return [None if v is None else pgsimhash.to_signed(v) for v in values]


def first_difference(bodies, client, server):
    """None, or the first text where they differ (for the failure message)."""
    for body, a, b in zip(bodies, client, server):
        if a != b:
            return f"text {body[:80]!r}: client {a!r}, server {b!r}"
    return None


def check(bodies, client, server):
    assert len(client) == len(server)
    difference = first_difference(bodies, client, server)
    assert difference is None, difference


def test_simhash(rows):
    bodies, _, server = rows
    check(bodies, signed(pgsimhash.simhash_many(bodies)), column(server, 0))


def test_simhash_top_n(rows):
    bodies, _, server = rows
    check(bodies, signed(pgsimhash.simhash_many(bodies, top_n=5)), column(server, 1))


def test_simhash_ngrams(rows):
    bodies, _, server = rows
    check(bodies, signed(pgsimhash.simhash_ngrams_many(bodies)), column(server, 2))
    check(bodies, signed(pgsimhash.simhash_ngrams_many(bodies, n=2)), column(server, 3))


def test_minhash64(rows):
    bodies, _, server = rows
    check(bodies, signed(pgsimhash.minhash64_many(bodies)), column(server, 4))
    check(bodies, signed(pgsimhash.minhash64_many(bodies, n=5, hashes_per_bit=2)), column(server, 6))


def test_hex_form(rows):
    bodies, _, server = rows
    hexes = [None if fp is None else pgsimhash.to_hex(fp) for fp in pgsimhash.minhash64_many(bodies)]
    check(bodies, hexes, column(server, 5))
    for text in column(server, 5):
        if text is not None:
            assert pgsimhash.to_hex(pgsimhash.from_hex(text)) == text


def test_one_text_functions_equal_the_list_functions(rows):
    bodies, _, _ = rows
    sample = bodies[:2000] + [b for b in bodies if len(b) > 20_000][:5]
    assert [pgsimhash.minhash64(b) for b in sample] == pgsimhash.minhash64_many(sample)
    assert [pgsimhash.simhash(b) for b in sample] == pgsimhash.simhash_many(sample)
    assert [pgsimhash.simhash_ngrams(b, 4) for b in sample] == pgsimhash.simhash_ngrams_many(sample, 4)


def test_simhash_fold(rows):
    bodies, _, server = rows
    check(bodies, [pgsimhash.simhash_fold(b) for b in bodies], column(server, 7))


def test_similarity_and_containment(rows):
    bodies, others, server = rows
    check(bodies, [pgsimhash.simhash_similarity(a, b) for a, b in zip(bodies, others)], column(server, 8))
    check(bodies, [pgsimhash.simhash_containment(a, b, 2) for a, b in zip(bodies, others)], column(server, 9))


def test_hamming(rows):
    bodies, others, server = rows
    a = pgsimhash.minhash64_many(bodies)
    b = pgsimhash.minhash64_many(others)
    client = [None if x is None or y is None else pgsimhash.hamming(x, y) for x, y in zip(a, b)]
    check(bodies, client, column(server, 10))


def test_features_and_weighted(conn):
    sample = corpus.texts(300)[14:]
    for text in sample[:100]:
        server = conn.execute(
            "SELECT feature, weight, hash::bigint FROM simhash_features(%s)", (text,)
        ).fetchall()
        client = [(f, w, pgsimhash.to_signed(h)) for f, w, h in pgsimhash.simhash_features(text)]
        assert client == server, text
    rng = random.Random(3)
    for _ in range(100):
        features = rng.sample(sample, rng.randint(1, 10))
        weights = [rng.uniform(-5, 20) for _ in features]
        server = conn.execute("SELECT simhash(%s::text[], %s::float8[])::bigint", (features, weights)).fetchone()[0]
        assert pgsimhash.to_signed(pgsimhash.simhash_weighted(features, weights)) == server


def test_golden_values():
    """Fixed inputs -> fixed outputs (a stored format), as in the core's and the SQL golden tests."""
    assert pgsimhash.simhash_weighted(["a"], [1.0]) == 0xAF63DC4C8601EC8C  # FNV-1a-64 of "a"
    assert pgsimhash.simhash("") is None and pgsimhash.minhash64("...") is None
    assert pgsimhash.to_hex(0xAB) == "00000000000000ab"
    assert pgsimhash.from_hex("0x00000000000000AB") == 0xAB
    assert pgsimhash.to_signed(2**64 - 1) == -1 and pgsimhash.to_unsigned(-1) == 2**64 - 1
    assert pgsimhash.hamming(-1, 0) == 64
    assert pgsimhash.simhash_segment(0x0123456789ABCDEF, 0) == 0x0123


def test_errors():
    with pytest.raises(ValueError):
        pgsimhash.minhash64("text", 0)
    with pytest.raises(ValueError):
        pgsimhash.minhash64("text", 3, pgsimhash.MAX_HASHES_PER_BIT + 1)
    with pytest.raises(ValueError):
        pgsimhash.simhash_ngrams("text", pgsimhash.MAX_SHINGLE + 1)
    with pytest.raises(ValueError):
        pgsimhash.simhash("text", 0)
    with pytest.raises(ValueError):
        pgsimhash.hamming(2**64, 0)
    with pytest.raises(ValueError):
        pgsimhash.from_hex("123")
    with pytest.raises(ValueError):
        pgsimhash.simhash_weighted(["a", "b"], [1.0])
    previous = pgsimhash.set_max_text_memory(1000)
    try:
        with pytest.raises(pgsimhash.TextTooLarge):
            pgsimhash.minhash64("x" * 200)  # 200 bytes x 6 > 1000
        with pytest.raises(MemoryError):
            pgsimhash.minhash64_many(["short", "x" * 2000])
        assert pgsimhash.minhash64("x" * 100) is not None
    finally:
        pgsimhash.set_max_text_memory(previous)
