"""The commands that make the mirror converge: `sync`, `verify`, `db import-manifests`.

Each lives in a module of its own (`sync_command`, `verify_command`, `import_manifests`)
and takes its settings and adapters from the `Context` mirror.cli.commands lends.
"""

from __future__ import annotations

import typer

from mirror.cli import import_manifests, sync_command, verify_command
from mirror.cli.context import Context


def register(app: typer.Typer, db_app: typer.Typer, ctx: Context) -> None:
    """Add `sync`, `verify` and `db import-manifests` to the `mirror` command."""
    sync_command.register(app, ctx)
    verify_command.register(app, ctx)
    import_manifests.register(db_app, ctx)
