"""pgsimhash-load's view of the table: its near-duplicate constraint (from the trigger's
arguments) and the columns it can fill."""

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


def find_constraint(cur, table: str) -> Optional[Constraint]:
    """The first near-duplicate constraint of the table (by trigger name), if any."""
    cur.execute(
        """SELECT t.tgname, t.tgargs, (t.tgtype & 2) = 0 AS after
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
             JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'simhash'
            WHERE t.tgrelid = %s::pg_catalog.regclass AND p.proname = 'simhash_dedup_trigger'
              AND NOT t.tgisinternal AND t.tgenabled <> 'D'
            ORDER BY t.tgname LIMIT 1""",
        (table,),
    )
    row = cur.fetchone()
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


def table_columns(cur, table: str) -> Dict[str, Tuple[str, bool]]:
    """The columns one can insert into (not generated, not dropped) -> (their type, whether it is
    the extension's simhash64)."""
    cur.execute(
        """SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),
                  t.typname = 'simhash64' AND e.oid IS NOT NULL
             FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
             LEFT JOIN pg_catalog.pg_extension e ON e.extname = 'simhash' AND e.extnamespace = t.typnamespace
            WHERE a.attrelid = %s::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped
              AND a.attgenerated = '' ORDER BY a.attnum""",
        (table,),
    )
    return {name: (kind, fingerprint) for name, kind, fingerprint in cur.fetchall()}
