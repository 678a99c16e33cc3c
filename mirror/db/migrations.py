"""Apply and check alembic migrations from code (`mirror db upgrade`, tests).

alembic is imported when a migration runs, not with this module: a worker never runs
one, and alembic with mako costs about 9 MB of its resident memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from mirror.db.engine import domain_errors

if TYPE_CHECKING:
    from alembic.config import Config

# The migrations live at the top of the source tree (README: Development), beside the package.
ALEMBIC_INI = Path(__file__).resolve().parents[2] / "alembic.ini"


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    if not ALEMBIC_INI.exists():
        raise FileNotFoundError(
            f"alembic.ini not found at {ALEMBIC_INI}; install mirror from its source tree"
        )
    config = Config(str(ALEMBIC_INI))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` inside one transaction."""
    from alembic import command

    config = alembic_config(engine)
    with domain_errors(), engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def check(engine: Engine) -> None:
    """Raise if the models and the migrations disagree (alembic's autogenerate diff)."""
    from alembic import command

    config = alembic_config(engine)
    with domain_errors(), engine.begin() as connection:
        config.attributes["connection"] = connection
        command.check(config)
