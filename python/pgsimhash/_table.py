"""pgsimhash-load's view of the table: its near-duplicate constraint (from the trigger's
arguments) and the columns it can fill (read through an asyncpg connection)."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple


@dataclasses.dataclass
class Constraint:
    """The table's near-duplicate constraint, read from its trigger's arguments."""

    trigger: str
    column: str
    k: int
    action: str
    report_table: Optional[str]
    verify: Optional[str]
    deferred: bool


async def find_constraint(conn, table: str) -> Optional[Constraint]:
    """The first near-duplicate constraint of the table (by trigger name), if any."""
    row = await conn.fetchrow(
        """SELECT t.tgname, t.tgargs, (t.tgtype OPERATOR(pg_catalog.&) 2) OPERATOR(pg_catalog.=) 0 AS after
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
             JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND d.objid OPERATOR(pg_catalog.=) p.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'
             JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                  AND e.extname OPERATOR(pg_catalog.=) 'simhash'
            WHERE t.tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.regclass
              AND p.proname OPERATOR(pg_catalog.=) 'simhash_dedup_trigger'
              AND NOT t.tgisinternal AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'
            ORDER BY t.tgname LIMIT 1""",
        table,
    )
    if row is None:
        return None
    name, raw, after = row
    args = [a.decode() for a in bytes(raw).split(b"\0")[:-1]]
    positional = [a for a in args if "=" not in a]
    options = dict(a.split("=", 1) for a in args if "=" in a)
    return Constraint(
        trigger=name,
        column=positional[0],
        k=int(positional[1]) if len(positional) > 1 else 3,
        action=positional[2].lower() if len(positional) > 2 else "error",
        report_table=positional[3] if len(positional) > 3 else None,
        verify=options.get("verify"),
        deferred=bool(after),
    )


async def table_columns(conn, table: str) -> Dict[str, Tuple[str, bool]]:
    """The columns one can insert into (not generated, not dropped) -> (their type, whether it is
    the extension's simhash64)."""
    rows = await conn.fetch(
        """SELECT a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod),
                  t.typname OPERATOR(pg_catalog.=) 'simhash64' AND e.oid IS NOT NULL
             FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
             LEFT JOIN pg_catalog.pg_extension e ON e.extname OPERATOR(pg_catalog.=) 'simhash'
                  AND e.extnamespace OPERATOR(pg_catalog.=) t.typnamespace
            WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.regclass AND a.attnum OPERATOR(pg_catalog.>) 0
              AND NOT a.attisdropped AND a.attgenerated OPERATOR(pg_catalog.=) '' ORDER BY a.attnum""",
        table,
    )
    return {name: (kind, fingerprint) for name, kind, fingerprint in rows}
