"""Python for the simhash PostgreSQL extension.

The fingerprint and similarity functions here are the server's, computed in the client by the same
Rust code (the extension's core crate, compiled as ``pgsimhash._core``): ``minhash64(text)`` in
Python equals ``minhash64(text)`` in SQL bit for bit, so a pipeline can fingerprint before it loads,
or without a database. Each function has the SQL function's name, parameters and defaults, and
returns ``None`` where SQL returns NULL.

Fingerprints are ``int`` from 0 to 2**64 - 1, the 64 bits of a ``simhash64`` (bit 0 the least
significant). ``to_hex(fp)`` is the server's text form (16 lower-case hex digits, what
``fp::text`` prints); ``to_signed(fp)`` is what the server's ``fp::bigint`` cast gives (the same
bits, two's complement, so fingerprints from 2**63 on are negative) and ``to_unsigned`` reverses
it. Functions taking a fingerprint accept either form.

Parameters out of range raise ``ValueError`` (the server's SQLSTATE 22023); a text that would need
more memory than ``set_max_text_memory(bytes)`` allows (default 1 GB, as the server's
``simhash.max_text_memory``) raises ``TextTooLarge``, a ``MemoryError`` (the server's 54000).
Long texts are fingerprinted with the GIL released; ``minhash64_many(texts)`` and the other
``*_many`` functions fingerprint a list with the GIL released once.

Modules: ``pgsimhash.loader`` (the ``pgsimhash-load`` command), ``pgsimhash.psycopg``,
``pgsimhash.asyncpg``, ``pgsimhash.sqlalchemy``, ``pgsimhash.django``.
"""

from ._core import (
    MAX_HASHES_PER_BIT,
    MAX_SHINGLE,
    TextTooLarge,
    from_hex,
    hamming,
    max_text_memory,
    minhash64,
    minhash64_many,
    preload,
    set_max_text_memory,
    simhash,
    simhash_containment,
    simhash_features,
    simhash_fold,
    simhash_many,
    simhash_ngrams,
    simhash_ngrams_many,
    simhash_segment,
    simhash_similarity,
    simhash_weighted,
    to_hex,
    to_signed,
    to_unsigned,
)

from .value import SimHash64

__version__ = "0.8.0"

__all__ = [
    "SimHash64",
    "MAX_HASHES_PER_BIT",
    "MAX_SHINGLE",
    "TextTooLarge",
    "from_hex",
    "hamming",
    "max_text_memory",
    "minhash64",
    "minhash64_many",
    "preload",
    "set_max_text_memory",
    "simhash",
    "simhash_containment",
    "simhash_features",
    "simhash_fold",
    "simhash_many",
    "simhash_ngrams",
    "simhash_ngrams_many",
    "simhash_segment",
    "simhash_similarity",
    "simhash_weighted",
    "to_hex",
    "to_signed",
    "to_unsigned",
]
