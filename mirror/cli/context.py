"""What mirror.cli.commands lends the commands registered from other modules.

`sync`, `verify`, `db import-manifests`, `pause` and `resume` live in modules of their
own and take their settings and adapters from this `Context`, never by importing
mirror.cli.commands: run as `python -m mirror.cli.commands`, that module is `__main__`,
and a second import would register them on an app nobody runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from mirror import wiring
from mirror.domain.item import normalize_item_id
from mirror.settings import Settings


@dataclass(frozen=True)
class Context:
    """The settings and adapters (built once, on first use), the usage error (exit 2)
    and the console of mirror.cli.commands."""

    settings: Callable[[], Settings]
    database: Callable[[], wiring.Database]
    usage_error: Callable[[str], Exception]
    stdout: Console

    def item_id(self, raw: str) -> str:
        """`raw` as an item id, or a usage error saying why not."""
        try:
            return normalize_item_id(raw)
        except ValueError as error:
            raise self.usage_error(str(error)) from None


def print_json(data: Any) -> None:
    """`--json`: indented, as is, on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
