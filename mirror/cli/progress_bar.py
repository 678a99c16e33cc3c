"""The progress bar of the long commands (sync, verify, import-manifests)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)


class ProgressBar:
    """A progress bar on stderr, drawn only on a terminal (scripts get the result alone)."""

    def __init__(self, label: str, total: int | None = None, *, in_bytes: bool = False) -> None:
        console = Console(stderr=True)
        counter = DownloadColumn() if in_bytes else MofNCompleteColumn()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            counter,
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.task = self.progress.add_task(label, total=total)

    def __enter__(self) -> tuple[Progress, Any]:
        self.progress.__enter__()
        return self.progress, self.task

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)
