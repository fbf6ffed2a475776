"""Who may read which chunk, enforced twice in PostgreSQL: every read names the caller's groups in
its WHERE clause (before any ranking, so k results are k visible ones), and row-level security on
the chunk table holds the same rule for the role reads run as.

A chunk's `access` column is its document version's access list: NULL is public, an array of
group names is visible to members of any of them, an empty array only to those who see
everything. Reads run in a transaction as READER_ROLE (no superuser, no BYPASSRLS) with the
caller's groups in two transaction-local settings; the policy reads those settings. A code path
that forgot the WHERE clause still returns only what the policy lets through, and a read whose
settings were never made sees public documents only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from grounded_agent.principals import EVERYONE, Viewer

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

READER_ROLE = "grounded_agent_reader"
"""The role every knowledge-base read runs as: it can select, and the row policy binds it."""

_SEE_ALL = "grounded_agent.see_all"
_GROUPS = "grounded_agent.groups"

POLICY_SQL = (
    f"current_setting('{_SEE_ALL}', true) = 'on' OR access IS NULL "
    f"OR access && string_to_array(current_setting('{_GROUPS}', true), ',')"
)
"""The row policy: the same rule as `access_sql`, from the transaction's settings."""


def access_sql(viewer: Viewer, alias: str = "") -> tuple[str, dict[str, Any]]:
    """The WHERE condition that keeps what `viewer` may read, and its parameters."""
    if viewer.groups is None:
        return "TRUE", {}
    p = f"{alias}." if alias else ""
    return (
        f"({p}access IS NULL OR {p}access && CAST(:viewer_groups AS text[]))",
        {"viewer_groups": list(viewer.groups)},
    )


def access_value(groups: Sequence[str] | None) -> list[str] | None:
    """What the access column stores for a document's groups (None: public)."""
    return None if groups is None else list(dict.fromkeys(groups))


@asynccontextmanager
async def reading(
    engine: AsyncEngine,
    viewer: Viewer = EVERYONE,
    *,
    role: str | None,
    options: Sequence[str] = (),
) -> AsyncIterator[AsyncConnection]:
    """A read-only transaction as `role` (None: row-level security is not set up) with the
    viewer's groups in the settings the row policy reads, and `options` SET LOCAL."""
    async with engine.connect() as conn, conn.begin():
        if role is not None:
            await conn.execute(text(f'SET LOCAL ROLE "{role}"'))
        await conn.execute(
            text(f"SELECT set_config('{_SEE_ALL}', :all, true), "
                 f"set_config('{_GROUPS}', :groups, true)"),
            {"all": "on" if viewer.sees_all else "off",
             "groups": ",".join(viewer.groups or ())},
        )
        for option in options:
            await conn.execute(text(f"SET LOCAL {option}"))
        yield conn


async def secure_table(conn: AsyncConnection, table: str, terms_table: str) -> str | None:
    """Creates the reader role, grants it reading, and puts the row policy on `table`; returns
    the role, or None where the database user may not create roles or policies (then only the
    WHERE clauses hold the rule, and a warning says so)."""
    policy = f"{table}_visible"
    try:
        async with conn.begin_nested():
            await conn.execute(text(
                "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                f"'{READER_ROLE}') THEN CREATE ROLE \"{READER_ROLE}\" NOLOGIN NOSUPERUSER "
                "NOBYPASSRLS NOINHERIT; END IF; END $$"
            ))
            member = (await conn.execute(text(
                f"SELECT pg_has_role(current_user, '{READER_ROLE}', 'MEMBER')"
            ))).scalar()
            if not member:
                await conn.execute(text(f'GRANT "{READER_ROLE}" TO CURRENT_USER'))
            await conn.execute(text(f'GRANT USAGE ON SCHEMA public TO "{READER_ROLE}"'))
            await conn.execute(text(
                f'GRANT SELECT ON "{table}", "{terms_table}" TO "{READER_ROLE}"'
            ))
            await conn.execute(text(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY'))
            await conn.execute(text(f'DROP POLICY IF EXISTS "{policy}" ON "{table}"'))
            await conn.execute(text(
                f'CREATE POLICY "{policy}" ON "{table}" FOR SELECT TO "{READER_ROLE}" '
                f"USING ({POLICY_SQL})"
            ))
    except Exception as exc:
        log.warning(
            "row-level security not set up on %s (the database user may not create roles or "
            "policies: %s); document access is enforced by each query's filter only",
            table, type(exc).__name__,
        )
        return None
    return READER_ROLE


async def reader_role(conn: AsyncConnection, table: str) -> str | None:
    """READER_ROLE where `table` has its row policy and this user may act as the role."""
    row = (await conn.execute(text(
        "SELECT c.relrowsecurity AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :r) "
        "AND pg_has_role(current_user, :r, 'MEMBER') "
        "FROM pg_class c WHERE c.oid = to_regclass(:t)"
    ), {"r": READER_ROLE, "t": f'public."{table}"'})).first()
    return READER_ROLE if row is not None and row[0] else None
