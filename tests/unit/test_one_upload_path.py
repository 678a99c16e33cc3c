"""One S3 upload engine: the streaming multipart path; s3transfer is neither used nor pinned.

boto3 still installs s3transfer for itself; what goes is our own use of it (a second
upload path with its own byte count) and the pin that use needed.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_no_module_of_mirror_imports_s3transfer() -> None:
    users = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "mirror").rglob("*.py"))
        if any(m.split(".")[0] == "s3transfer" for m in _imported_modules(path))
    ]
    assert users == []


def test_s3transfer_is_not_a_dependency_of_its_own() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [dep for dep in project["dependencies"] if dep.startswith("s3transfer")]
