"""`mirror pause [--drain]` and `mirror resume`: every worker of the fleet at once.

Registered onto the app of `mirror.cli.commands` by `register`, with its
`mirror.cli.context.Context` (they never import that module). Their lines come from
mirror.fleet_views.
"""

from __future__ import annotations

import getpass
import socket
from typing import Annotated

import typer

from mirror.cli.context import Context
from mirror.domain.jobs import FleetMode
from mirror.fleet_views import MAX_REASON, change_line


def register(app: typer.Typer, ctx: Context) -> None:
    """Add `pause` and `resume` to the `mirror` command."""

    @app.command()
    def pause(
        drain: Annotated[
            bool,
            typer.Option("--drain", help="Let running jobs finish instead of releasing them."),
        ] = False,
        reason: Annotated[
            str | None,
            typer.Option("--reason", metavar="TEXT", help="Why, shown with the pause."),
        ] = None,
    ) -> None:
        """Stop every worker of the fleet from claiming jobs, until `mirror resume`.

        Without --drain, running jobs go back to the queue at their next heartbeat
        (MIRROR_HEARTBEAT_INTERVAL): status `new`, no attempt used, the partial download
        kept for the next attempt, as a worker's shutdown does. With --drain they finish.
        Pausing again is harmless (the first pause's time and author stay). Prints one
        line: what changed and what runs now.
        """
        if reason is not None and len(reason) > MAX_REASON:
            raise ctx.usage_error(f"--reason: at most {MAX_REASON} characters")
        mode = FleetMode.DRAINING if drain else FleetMode.PAUSED
        change = ctx.database().jobs.set_fleet_mode(
            mode, changed_by=who_am_i(), reason=(reason or "").strip() or None
        )
        typer.echo(change_line(change))

    @app.command()
    def resume() -> None:
        """Let the fleet claim jobs again after `mirror pause`; idle workers wake at once.

        Workers outside their MIRROR_ACTIVE_HOURS still wait for them.
        """
        change = ctx.database().jobs.set_fleet_mode(FleetMode.RUNNING, changed_by=who_am_i())
        typer.echo(change_line(change))


def who_am_i() -> str:
    """`user@host` of this command, recorded with the pause."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container user without a passwd entry
        user = "?"
    return f"{user}@{socket.gethostname()}"
