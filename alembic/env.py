"""Alembic environment: our schema only, version table inside it.

The URL comes from the caller (`mirror db upgrade` passes a connection or URL through
`config.attributes`) or else from MIRROR_DATABASE_URL.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, text

from mirror.db.models import SCHEMA, Base
from mirror.settings import load_settings

config = context.config
target_metadata = Base.metadata


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Look only at our schema, so other tables in a shared database are left alone."""
    if type_ == "schema":
        return name == SCHEMA
    return True


# Expression indexes whose text Postgres reflects in its own spelling (casts, parentheses,
# the operator class), which autogenerate cannot compare: their migration owns them, and
# tests/integration/test_titles_migration.py checks them.
UNCOMPARED_INDEXES = frozenset({"ix_jobs_title_search"})


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    return not (type_ == "index" and name in UNCOMPARED_INDEXES)


def run_with(connection: Connection) -> None:
    connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_schemas=True,
        include_name=include_name,
        include_object=include_object,
        version_table_schema=SCHEMA,
        compare_server_default=False,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    url = config.attributes.get("url") or load_settings().database_url_required
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            run_with(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
