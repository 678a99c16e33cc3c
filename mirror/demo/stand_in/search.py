"""Jellyfin's `searchTerm`, as the stand-in answers it.

Jellyfin matches the term against an item's CleanName (lower case, accents and
punctuation dropped) and puts the best matches first; so does this.
"""

from __future__ import annotations

import unicodedata
from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def search_by_name(items: list[T], term: str) -> list[T]:
    """The items whose name contains `term` once both are cleaned: exact matches first,
    then names that start with it, then the rest, each in the order given."""
    wanted = clean_name(term)
    if not wanted:
        return items
    found = [item for item in items if wanted in clean_name(item.name)]

    def rank(item: T) -> int:
        name = clean_name(item.name)
        return 0 if name == wanted else 1 if name.startswith(wanted) else 2

    return sorted(found, key=rank)


def clean_name(text: str) -> str:
    """Lower case, accents dropped, anything but letters and digits a single space."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = "".join(c if c.isalnum() else " " for c in decomposed if not unicodedata.combining(c))
    return " ".join(kept.split())
