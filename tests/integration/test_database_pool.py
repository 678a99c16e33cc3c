"""The pool behind `database_url` (tests/fixtures/postgres.py) against real Postgres.

A reused database must be what a fresh copy of the template is; one a test changed in a
way a reset does not undo must be dropped; a connection the previous test left must not
reach the database under its next name. Each test uses a pool of its own (its databases
are `mirror_test_*`, dropped at its end), beside the session's.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine

from mirror.db import migrations
from tests.fixtures.postgres import (
    Admin,
    DatabasePool,
    TemplateState,
    connect,
    fingerprint,
    url_for,
)


@dataclass
class OwnPool(DatabasePool):
    """A pool that, when closed, also drops what a failed test left acquired."""

    acquired: set[str] = field(default_factory=set)

    def acquire(self) -> str:
        name = super().acquire()
        self.acquired.add(name)
        return name

    def release(self, name: str) -> None:
        self.acquired.discard(name)
        super().release(name)

    def close(self) -> None:
        while self.acquired:
            self.admin.drop(self.acquired.pop())
        super().close()


@pytest.fixture
def role(postgres_admin: Admin) -> Iterator[str]:
    """A login role of this test's own, dropped with its grants and settings afterwards
    (after `pool`, which depends on it, dropped the databases that name it)."""
    name = f"mirror_test_role_{uuid.uuid4().hex[:8]}"
    postgres_admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    postgres_admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
    postgres_admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def pool(
    postgres_admin: Admin, template_database: str, template_state: TemplateState, role: str
) -> Iterator[DatabasePool]:
    pool = OwnPool(postgres_admin, template_database, template_state)
    yield pool
    pool.close()


@pytest.fixture
def fresh_copy(postgres_admin: Admin, template_database: str) -> Iterator[str]:
    """A database copied from the template the old way (CREATE DATABASE ... TEMPLATE)."""
    name = f"mirror_test_copy_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    postgres_admin.execute(
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template_database)
        )
    )
    yield name
    postgres_admin.drop(name)


def oid_of(admin: Admin, database: str) -> int | None:
    """The database's OID: it survives a RENAME, so it tells a reused database."""
    rows = admin.fetch("SELECT oid FROM pg_database WHERE datname = %s", (database,))
    return int(rows[0][0]) if rows else None


def database_with_oid_exists(admin: Admin, oid: int) -> bool:
    return bool(admin.fetch("SELECT 1 FROM pg_database WHERE oid = %s", (oid,)))


def contents(database: str) -> dict[str, Any]:
    """Every user table's rows (sorted, as JSON) and every sequence's state, read apart
    from the pool's own capture."""
    with connect(database, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables"
            " WHERE table_type = 'BASE TABLE'"
            " AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        ).fetchall()
        sequences = conn.execute(
            "SELECT format('%I.%I', sequence_schema, sequence_name)"
            " FROM information_schema.sequences ORDER BY 1"
        ).fetchall()
        found: dict[str, Any] = {}
        for (table,) in tables:
            query = sql.SQL("SELECT to_jsonb(t)::text FROM {} t ORDER BY 1").format(sql.SQL(table))
            found[table] = [row[0] for row in conn.execute(query).fetchall()]
        for (sequence,) in sequences:
            query = sql.SQL("SELECT last_value, is_called FROM {}").format(sql.SQL(sequence))
            found[sequence] = conn.execute(query).fetchone()
        return found


def test_a_reused_database_holds_the_template_rows_and_none_of_the_previous_tests(
    pool: DatabasePool, postgres_admin: Admin, fresh_copy: str
) -> None:
    first = pool.acquire()
    oid = oid_of(postgres_admin, first)
    with connect(first, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO media_mirror.jobs (item_id) SELECT md5(n::text)"
            " FROM generate_series(1, 5) n"
        )  # its trigger counts them in media_mirror.counters
        conn.execute("UPDATE media_mirror.fleet SET mode = 'paused', reason = 'previous test'")
        conn.execute("UPDATE media_mirror.alembic_version SET version_num = '0001'")
        conn.execute("SELECT nextval('media_mirror.download_slots_slot_seq')")
    pool.release(first)

    second = pool.acquire()
    assert oid_of(postgres_admin, second) == oid  # the same database, not a new copy
    reused = contents(second)
    assert reused == contents(fresh_copy)
    assert reused["media_mirror.jobs"] == reused["media_mirror.counters"] == []
    fleet = ['{"id": 1, "mode": "running", "reason": null, "changed_at": null, "changed_by": null}']
    assert reused["media_mirror.fleet"] == fleet
    assert reused["media_mirror.alembic_version"] == ['{"version_num": "0012"}']
    assert reused["media_mirror.download_slots_slot_seq"] == (1, False)
    pool.release(second)


def test_a_table_that_grew_is_truncated_back_to_its_template_size(
    pool: DatabasePool, postgres_admin: Admin, fresh_copy: str
) -> None:
    """Rows only deleted would leave their space behind, reuse after reuse."""
    size = "SELECT pg_total_relation_size('media_mirror.jobs')"
    first = pool.acquire()
    with connect(first, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO media_mirror.jobs (item_id) SELECT md5(n::text)"
            " FROM generate_series(1, 3000) n"
        )
    pool.release(first)

    second = pool.acquire()
    with connect(second) as conn, connect(fresh_copy) as fresh:
        assert conn.execute(size).fetchone() == fresh.execute(size).fetchone()
    assert contents(second) == contents(fresh_copy)
    pool.release(second)


Mutation = Callable[[psycopg.Connection[Any], Admin, str, str], None]


def _drop_schema(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("DROP SCHEMA media_mirror CASCADE")  # as tests/e2e/test_converge.py


def _role_setting(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    admin.execute(
        sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = locked").format(
            sql.Identifier(role), sql.Identifier(db)
        )
    )  # as tests/integration/test_titles.py


def _database_grant(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    admin.execute(
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
            sql.Identifier(db), sql.Identifier(role)
        )
    )


def _database_setting(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    admin.execute(
        sql.SQL("ALTER DATABASE {} SET statement_timeout = '1s'").format(sql.Identifier(db))
    )


def _downgrade_and_upgrade(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    """The same schema again, made anew (tests/integration/test_migrations.py)."""
    from alembic import command

    engine = create_engine(url_for(db))
    try:
        with engine.begin() as connection:
            config = migrations.alembic_config(engine)
            config.attributes["connection"] = connection
            command.downgrade(config, "0011")
        migrations.upgrade(engine)
    finally:
        engine.dispose()


def _dropped_index(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("DROP INDEX media_mirror.ix_jobs_stale")


def _disabled_trigger(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("ALTER TABLE media_mirror.jobs DISABLE TRIGGER jobs_counted_insert")


def _changed_default(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("ALTER TABLE media_mirror.fleet ALTER COLUMN mode SET DEFAULT 'paused'")


def _table_grant(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute(sql.SQL("GRANT SELECT ON media_mirror.jobs TO {}").format(sql.Identifier(role)))


def _new_table(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("CREATE TABLE public.left_behind (n int)")


def _new_sequence(conn: psycopg.Connection[Any], admin: Admin, db: str, role: str) -> None:
    conn.execute("CREATE SEQUENCE media_mirror.left_behind")


MUTATIONS: dict[str, Mutation] = {
    "dropped schema": _drop_schema,
    "role setting in the database": _role_setting,
    "grant on the database": _database_grant,
    "database setting": _database_setting,
    "downgrade and upgrade": _downgrade_and_upgrade,
    "dropped index": _dropped_index,
    "disabled trigger": _disabled_trigger,
    "changed column default": _changed_default,
    "grant on a table": _table_grant,
    "new table": _new_table,
    "new sequence": _new_sequence,
}


@pytest.mark.parametrize("mutation", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_a_database_changed_beyond_its_rows_is_dropped_not_reused(
    pool: DatabasePool,
    postgres_admin: Admin,
    template_state: TemplateState,
    role: str,
    mutation: Mutation,
) -> None:
    name = pool.acquire()
    oid = oid_of(postgres_admin, name)
    assert oid is not None
    with connect(name, autocommit=True) as conn:
        assert fingerprint(conn) == template_state.fingerprint
        mutation(conn, postgres_admin, name, role)
    with connect(name, autocommit=True) as conn:
        assert fingerprint(conn) != template_state.fingerprint

    pool.release(name)
    assert pool.free == []
    assert not database_with_oid_exists(postgres_admin, oid)


def test_a_database_that_refuses_connections_is_dropped(
    pool: DatabasePool, postgres_admin: Admin
) -> None:
    """The reset cannot even connect: dropped, not kept unchecked."""
    name = pool.acquire()
    oid = oid_of(postgres_admin, name)
    assert oid is not None
    postgres_admin.execute(
        sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name))
    )
    pool.release(name)
    assert pool.free == []
    assert not database_with_oid_exists(postgres_admin, oid)


def test_the_previous_tests_connection_is_cut_and_cannot_reach_the_reused_database(
    pool: DatabasePool, postgres_admin: Admin
) -> None:
    first = pool.acquire()
    oid = oid_of(postgres_admin, first)
    leftover = connect(first, autocommit=True)
    try:
        leftover.execute("SELECT pg_advisory_lock(42)")
        leftover.execute("LISTEN mirror_test_pool")
        pool.release(first)
        with pytest.raises(psycopg.OperationalError):
            leftover.execute("SELECT 1")
    finally:
        leftover.close()

    second = pool.acquire()
    assert oid_of(postgres_admin, second) == oid  # reused, under a new name
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        connect(first).close()  # a process of the previous test connecting again
    with connect(second, autocommit=True) as conn:
        assert conn.execute("SELECT pg_try_advisory_lock(42)").fetchone() == (True,)
    pool.release(second)


def test_the_admin_connection_comes_back_after_postgres_cut_it_off() -> None:
    admin = Admin()
    try:
        pid = admin.fetch("SELECT pg_backend_pid()")[0][0]
        with connect(admin.database, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        assert admin.fetch("SELECT 1") == [(1,)]
        assert admin.fetch("SELECT pg_backend_pid()")[0][0] != pid
    finally:
        admin.close()


def test_the_database_url_fixture_hands_out_a_database_in_the_template_state(
    database_url: str, template_state: TemplateState
) -> None:
    name = database_url.rsplit("/", 1)[1]
    assert name.startswith(f"mirror_test_{os.getpid()}_")
    with connect(name, autocommit=True) as conn:
        assert fingerprint(conn) == template_state.fingerprint
        fleet = conn.execute("SELECT id, mode FROM media_mirror.fleet").fetchall()
        assert fleet == [(1, "running")]
        assert conn.execute("SELECT count(*) FROM media_mirror.jobs").fetchone() == (0,)
