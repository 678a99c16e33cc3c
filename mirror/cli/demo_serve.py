"""`mirror demo --serve`: the dashboard and the player over the demo's stack, until Ctrl-C.

The demo and the web app are separate edges (neither imports the other); this command
module puts them together: `run_demo` calls `serve_demo` once the jobs are done, with
the services still up, and tears everything down after it returns.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import SecretStr
from rich.console import Console

if TYPE_CHECKING:
    from mirror.settings import Settings
    from mirror.wiring import Database

LOCALHOST = "127.0.0.1"  # the demo's servers are for this machine's browser only


def demo_server(console: Console, port: int) -> Callable[[Settings, Database, list[str]], None]:
    """A `ServeDemo` that serves on LOCALHOST:port (0: a free one) and prints the URLs."""

    def serve_demo(settings: Settings, db: Database, item_ids: list[str]) -> None:
        from mirror.web import serve as web

        # The webhook is not used here, but `mirror serve` refuses to run without a secret.
        secret = SecretStr(secrets.token_urlsafe(24))
        app = web.web_app(settings.model_copy(update={"webhook_secret": secret}), db)
        server = web.listen(app, host=LOCALHOST, port=port)
        base = web.listening(server)[0]
        console.print()
        console.print(f"[bold]dashboard[/]  {base}/", highlight=False, soft_wrap=True)
        for item_id in item_ids:
            console.print(
                f"[bold]play[/]       {base}/play/{item_id}", highlight=False, soft_wrap=True
            )
        console.print("[dim]serving until Ctrl-C, which stops and removes everything[/]")
        try:
            server.run()  # returns on Ctrl-C (and on SIGTERM, which the demo turns into one)
        finally:
            server.close()

    return serve_demo
