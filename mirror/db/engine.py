"""Engine construction and the one-line answers to 'the database is not usable'."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from mirror.db.schema import JOBS
from mirror.domain.errors import ConfigError
from mirror.domain.jobs import DatabaseUnavailable

__all__ = [
    "DatabaseUnavailable",
    "SchemaProblem",
    "check_schema",
    "describe_database_error",
    "find_schema_problem",
    "make_engine",
]


_Class = TypeVar("_Class", bound=type)


def raises_unavailable(cls: _Class) -> _Class:
    """Make every public method of an adapter class raise `DatabaseUnavailable` in place of
    the driver's outage errors (a dropped or refused connection, a pool that stayed busy),
    so the core retries an outage without knowing SQLAlchemy or psycopg."""
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(method):
            continue
        setattr(cls, name, _translated(method))
    return cls


def _translated(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except DBAPIError as error:
            detail = describe_database_error(error)
            raise DatabaseUnavailable(f"database error: {detail}", detail) from error
        except PoolTimeout as error:
            detail = str(error).strip().splitlines()[0] if str(error).strip() else "pool timeout"
            raise DatabaseUnavailable(f"database error: {detail}", detail[:200]) from error

    return call


def make_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int | None = None,
    application_name: str = "mirror",
) -> Engine:
    """An engine that survives Postgres restarts: pre-ping replaces dead connections.

    At most `pool_size + max_overflow` connections (default twice `pool_size`); only
    `pool_size` of them stay open when idle, the others close as they are returned.
    """
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_recycle=1800,
        connect_args={"connect_timeout": 10, "application_name": application_name},
    )


def describe_database_error(error: DBAPIError) -> str:
    """First line of the driver's message; psycopg never echoes the password."""
    original = error.orig if error.orig is not None else error
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
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
