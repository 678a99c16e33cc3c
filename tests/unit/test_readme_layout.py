"""README's development layout lists exactly the packages and modules of `mirror/`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mirror"


def _layout_bullets() -> dict[str, str]:
    """`db/` -> its bullet's text ("" for the core, `mirror/`)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("The layout of `mirror/`", 1)[1].split("Outside the package", 1)[0]
    bullets: dict[str, str] = {}
    for bullet in section.split("\n- ")[1:]:
        match = re.match(r"`([a-z0-9_/]+/)`", bullet)
        assert match is not None, f"a layout bullet that names no package: {bullet[:60]!r}"
        name = match.group(1)
        bullets["" if name == "mirror/" else name] = bullet
    return bullets


def _packages() -> dict[str, set[str]]:
    """`db/` -> its modules ("" for `mirror/` itself), from the tree."""
    packages: dict[str, set[str]] = {}
    for init in PACKAGE.rglob("__init__.py"):
        directory = init.parent
        name = "" if directory == PACKAGE else f"{directory.relative_to(PACKAGE).as_posix()}/"
        packages[name] = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
    return packages


def test_every_package_has_a_bullet_and_every_bullet_a_package() -> None:
    assert sorted(_layout_bullets()) == sorted(_packages())


def test_each_bullet_lists_exactly_its_package_modules() -> None:
    packages = _packages()
    for name, bullet in _layout_bullets().items():
        listed = set(re.findall(r"`([a-z0-9_]+)`:", bullet))
        assert listed == packages[name], f"README layout of mirror/{name}"
