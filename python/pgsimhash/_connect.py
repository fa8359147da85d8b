"""pgsimhash-load's connection: asyncpg from a libpq connection string, a URI or libpq's
environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...; asyncpg reads them itself)."""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from ._input import LoadError

# libpq's keyword=value form: values bare or single-quoted, \' and \\ escaped.
_PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)*)")


def parse_keywords(dsn: str) -> Dict[str, str]:
    """``host=/tmp port=5432 dbname='my db'`` as a dict (libpq's connection string syntax)."""
    pairs: Dict[str, str] = {}
    position = 0
    while dsn[position:].strip():
        match = _PAIR.match(dsn, position)
        if match is None:
            raise LoadError(f"--dsn: cannot read the connection string at {dsn[position:]!r}")
        value = match.group(2)
        if value.startswith("'"):
            value = value[1:-1]
        pairs[match.group(1)] = re.sub(r"\\(.)", r"\1", value)
        position = match.end()
    return pairs


def connect_arguments(dsn: str) -> Tuple[Optional[str], Dict[str, Any]]:
    """asyncpg.connect's ``dsn`` and keyword arguments for the loader's ``--dsn``: a
    ``postgresql://`` URI as it is; a keyword=value string as a URI with those keywords as query
    parameters (asyncpg reads host, port, dbname, user, password, passfile, sslmode, ...; the
    others it sends as server settings, which is what application_name needs); empty: None,
    asyncpg then reads libpq's environment variables."""
    if not dsn.strip():
        return None, {}
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn, {}
    pairs = parse_keywords(dsn)
    kwargs: Dict[str, Any] = {}
    if "connect_timeout" in pairs:
        kwargs["timeout"] = float(pairs.pop("connect_timeout"))
    options = pairs.pop("options", "")
    if options:
        # -c name=value (or -cname=value), as libpq sends them
        settings = dict(
            s.split("=", 1) for s in re.findall(r"(?:^|\s)-c\s*(\S+=\S*)", options) if "=" in s
        )
        if not settings:
            raise LoadError(f"--dsn: options={options!r}: only -c name=value is understood")
        kwargs["server_settings"] = {k.replace("-", "_"): v for k, v in settings.items()}
    query = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
    return "postgresql://" + ("?" + query if query else ""), kwargs


async def connect(dsn: str):
    import asyncpg

    uri, kwargs = connect_arguments(dsn)
    try:
        return await asyncpg.connect(uri, **kwargs)
    except (OSError, asyncio.TimeoutError) as e:
        # (refused, no socket, no such host, a timeout: asyncpg's text alone names no server)
        raise LoadError(f"cannot connect to PostgreSQL ({'--dsn' if dsn.strip() else 'PGHOST, PGPORT, ...'}): {e or type(e).__name__}") from e
