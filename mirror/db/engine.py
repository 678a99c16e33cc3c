"""Engine construction and the one-line answers to 'the database is not usable'."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DataError, DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from mirror.db.schema import JOBS
from mirror.domain.errors import ConfigError
from mirror.domain.jobs import DatabaseUnavailable, ValuesRefused

__all__ = [
    "SchemaProblem",
    "check_schema",
    "describe_database_error",
    "domain_errors",
    "find_schema_problem",
    "make_engine",
    "raises_unavailable",
    "translates_driver_errors",
]


_Class = TypeVar("_Class", bound=type)
# What the drivers raise when Postgres cannot serve a statement: SQLAlchemy's wrapper of
# psycopg's errors, a pool that stayed busy, and psycopg's own (its raw connections).
_DRIVER_ERRORS = (DBAPIError, PoolTimeout, psycopg.Error)
_TRANSLATES = "__mirror_translates_driver_errors__"


@contextlib.contextmanager
def domain_errors() -> Iterator[None]:
    """Raise the domain's `DatabaseUnavailable` (`ValuesRefused` for a value Postgres
    refused) in place of the driver's errors, so nothing above mirror.db catches or even
    imports SQLAlchemy's or psycopg's."""
    try:
        yield
    except (DataError, psycopg.DataError) as error:
        detail = describe_database_error(error)
        raise ValuesRefused(f"database error: {detail}", detail) from error
    except _DRIVER_ERRORS as error:
        detail = describe_database_error(error)
        raise DatabaseUnavailable(f"database error: {detail}", detail) from error


def raises_unavailable(cls: _Class) -> _Class:
    """Run every public method of an adapter class inside `domain_errors`, so the core
    retries an outage and the edges report it without knowing SQLAlchemy or psycopg."""
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(method):
            continue
        setattr(cls, name, _translated(method))
    return cls


def translates_driver_errors(method: object) -> bool:
    """Whether `raises_unavailable` wrapped this method (tests/integration check it)."""
    return bool(getattr(method, _TRANSLATES, False))


def _translated(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):  # its statements run while it is iterated

        @functools.wraps(method)
        def iterate(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with domain_errors():
                yield from method(*args, **kwargs)

        setattr(iterate, _TRANSLATES, True)
        return iterate

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with domain_errors():
            return method(*args, **kwargs)

    setattr(call, _TRANSLATES, True)
    return call


def make_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int | None = None,
    application_name: str = "mirror",
    transaction_pooling: bool = False,
) -> Engine:
    """An engine that survives Postgres restarts: pre-ping replaces dead connections.

    At most `pool_size + max_overflow` connections (default twice `pool_size`); only
    `pool_size` of them stay open when idle, the others close as they are returned.
    With `transaction_pooling` (PgBouncer in transaction mode) psycopg never prepares a
    statement: the next transaction may run on another server connection, where the
    prepared statement does not exist (PgBouncer 1.18 does not track them).
    """
    connect_args: dict[str, Any] = {"connect_timeout": 10, "application_name": application_name}
    if transaction_pooling:
        connect_args["prepare_threshold"] = None
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_recycle=1800,
        connect_args=connect_args,
    )


# SQLSTATEs of a prepared statement missing or doubled on the server connection: what
# psycopg meets behind a pooler in transaction mode unless it prepares nothing.
_POOLER_SQLSTATES = frozenset({"26000", "42P05"})
POOLER_HINT = "behind PgBouncer's transaction pooling? set MIRROR_PGBOUNCER=transaction"


def describe_database_error(error: Exception) -> str:
    """First line of the driver's message; psycopg never echoes the password. A prepared
    statement error says what it most likely means: a transaction pooler in between."""
    original = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    if getattr(original, "sqlstate", None) in _POOLER_SQLSTATES:
        return f"{first_line} ({POOLER_HINT})"
    return first_line or type(original).__name__


NO_JOB_TABLE = "the job table does not exist yet: run `mirror db upgrade` first"


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why the database cannot be used: Postgres did not answer, or it has no job table."""

    reachable: bool
    detail: str  # the driver's first line (never the password), or NO_JOB_TABLE


def find_schema_problem(engine: Engine) -> SchemaProblem | None:
    """None when Postgres answers and the job table exists (the one schema check)."""
    try:
        with engine.connect() as conn:
            present = conn.execute(text(f"SELECT to_regclass('{JOBS}')")).scalar()
    except DBAPIError as error:
        return SchemaProblem(reachable=False, detail=describe_database_error(error))
    except SQLAlchemyError as error:  # e.g. every pooled connection busy
        return SchemaProblem(reachable=False, detail=type(error).__name__)
    return None if present is not None else SchemaProblem(reachable=True, detail=NO_JOB_TABLE)


def check_schema(engine: Engine) -> None:
    """Fail fast with a clear line when Postgres is down or migrations were not applied."""
    problem = find_schema_problem(engine)
    if problem is None:
        return
    if problem.reachable:
        raise ConfigError(problem.detail)
    host = engine.url.render_as_string(hide_password=True)
    raise DatabaseUnavailable(f"cannot connect to Postgres at {host}: {problem.detail}")
