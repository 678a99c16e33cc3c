"""One address per name, and job statuses compared as `Status`, never as strings.

A name imported from a module that only re-exports it is a second address: readers
cannot tell which one is the home, and the two drift (issue 22, point 4). A package's
`__init__` may gather its own modules' names (`mirror.transcode`, `mirror.hls`), but the
words of `domain/` are imported from their module alone.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

from mirror.domain.jobs import Status

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mirror"
STATUS_TEXTS = {status.value for status in Status}


@cache
def _trees() -> dict[Path, ast.Module]:
    paths = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "bench").rglob("*.py"),
    ]
    return {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in paths}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names - {"__all__", "log"}


@cache
def _defined() -> tuple[dict[str, set[str]], dict[str, set[str]], set[str]]:
    """module -> the names it defines; name -> its home modules; the packages."""
    defined: dict[str, set[str]] = {}
    homes: dict[str, set[str]] = defaultdict(set)
    packages: set[str] = set()
    for path, tree in _trees().items():
        if PACKAGE not in path.parents:
            continue
        module = _module_name(path)
        defined[module] = _top_level_names(tree)
        if path.name == "__init__.py":
            packages.add(module)
            continue
        for name in defined[module]:
            homes[name].add(module)
    return defined, homes, packages


def _second_address(module: str, name: str) -> bool:
    defined, homes, packages = _defined()
    if name in defined.get(module, ()) or f"{module}.{name}" in defined or name not in homes:
        return False
    # A package's facade over its own modules is fine, except for the words of domain/.
    return not (
        module in packages
        and all(home.startswith(f"{module}.") for home in homes[name])
        and not any(home.startswith("mirror.domain.") for home in homes[name])
    )


def test_every_name_is_imported_from_its_home() -> None:
    _, homes, _ = _defined()
    strays = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} from {node.module}"
        f" (home: {', '.join(sorted(homes[alias.name]))})"
        for path, tree in _trees().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
        if node.module is not None and node.module.split(".")[0] == "mirror"
        for alias in node.names
        if _second_address(node.module, alias.name)
    ]
    assert strays == []


def test_no_module_re_exports_a_name_from_another() -> None:
    """`__all__` lists only what the module defines (package facades aside)."""
    defined, _, packages = _defined()
    strays = []
    for path, tree in _trees().items():
        module = _module_name(path)
        if PACKAGE not in path.parents or module in packages:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
            ):
                listed = ast.literal_eval(node.value)
                strays += [f"{module}: {name}" for name in listed if name not in defined[module]]
    assert strays == []


def _status_texts(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and node.value in STATUS_TEXTS:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [text for element in node.elts for text in _status_texts(element)]
    return []


def test_statuses_are_compared_as_the_enum() -> None:
    """`job.status == Status.DONE`, not `== "done"` (SQL keeps its text: a StrEnum equals
    the column's value)."""
    literals = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for path, tree in _trees().items()
        if PACKAGE in path.parents
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        if any(_status_texts(operand) for operand in (node.left, *node.comparators))
    ]
    assert literals == []
