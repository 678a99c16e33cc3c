"""Only mirror/wiring.py builds adapters (README: layout); the edges ask it for them."""

from __future__ import annotations

import ast
from pathlib import Path

import mirror

PACKAGE = Path(mirror.__file__).resolve().parent
# The constructors of the real adapters: Postgres, Jellyfin, S3.
ADAPTERS = {
    "make_engine",
    "create_engine",
    "JobRepository",
    "AttemptLog",
    "MirroredItems",
    "QueueStats",
    "DashboardQueries",
    "JobListener",
    "JellyfinClient",
    "S3Storage",
    "Bucket",
}
ALLOWED = {PACKAGE / "wiring.py", PACKAGE / "db" / "engine.py"}  # engine.py: make_engine itself


def _calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ADAPTERS:
                names.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}(...)")
    return names


def test_no_module_but_wiring_builds_an_adapter() -> None:
    built = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in ALLOWED
        for call in _calls(path)
    ]
    assert built == []
