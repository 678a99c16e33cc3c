"""Reading a webhook delivery whose body is not valid JSON, as far as it can be read.

jellyfin-plugin-webhook renders the body from a user's Handlebars template. It
quote-escapes free-text values (`"` becomes `\\"`) and Handlebars then HTML-encodes
`{{Name}}` (`\\&quot;`), so one item name with a quote or a backslash makes the body
invalid JSON, and the plugin never retries a delivery. The fields mirror acts on are
safe in any template (an enum, a GUID, a class name), so they are read from such a body
directly. The HTML encoding is also what makes that safe: no rendered value can contain
a bare `"`, so a name cannot forge a `"ItemId": "..."` pair of its own.
"""

from __future__ import annotations

import html
import re
from typing import Any

from mirror.domain.item import ItemTitle, normalize_item_id

# The fields a notification is acted on by, plus the name for the log line.
FIELDS = ("NotificationType", "ItemId", "ItemType", "Name")
_PAIR = re.compile(r'"(' + "|".join(FIELDS) + r')"\s*:\s*"([^"]*)"')


def salvage_notification(text: str) -> dict[str, str] | None:
    """The readable `"Key": "value"` pairs of a broken body; None when none can be trusted.

    None without a NotificationType, or when a field appears twice with different values
    (which one would be meant cannot be told).
    """
    found: dict[str, str] = {}
    for key, value in _PAIR.findall(text):
        if key in found and found[key] != value:
            return None
        found[key] = value
    if "NotificationType" not in found:
        return None
    if "Name" in found:
        found["Name"] = unescape_plugin_text(found["Name"])
    return found


def unescape_plugin_text(value: str) -> str:
    """A `{{Name}}` as the plugin rendered it (`\\&quot;`), back to the item's name."""
    return html.unescape(value).replace('\\"', '"')


def title_of(notification: dict[str, Any]) -> ItemTitle:
    """What the delivery says the item is called (the plugin's Name, ItemType, SeriesName,
    SeasonNumber, EpisodeNumber, Year, SeriesId, SeasonId; whatever the template has).

    It names no library and no parent folder: the attempt fills in what `/Items/{id}`
    says. Names come HTML-encoded from a `{{Name}}` and are decoded here.
    """
    return ItemTitle(
        item_name=_text(notification.get("Name")),
        item_type=_text(notification.get("ItemType")),
        series_name=_text(notification.get("SeriesName")),
        season_number=_number(notification.get("SeasonNumber")),
        episode_number=_number(notification.get("EpisodeNumber")),
        year=_number(notification.get("Year")),
        series_id=_guid(notification.get("SeriesId")),
        season_id=_guid(notification.get("SeasonId")),
    )


def _text(value: Any) -> str | None:
    """The decoded text; ItemTitle makes it one storable line (trimmed, cut to length)."""
    return unescape_plugin_text(value) if isinstance(value, str) else None


def _number(value: Any) -> int | None:
    """An int, or the digits a quoted template placeholder renders (`"{{Year}}"`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 100_000 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        if len(value.strip()) > 5:
            return None
        return int(value.strip())
    return None


def _guid(value: Any) -> str | None:
    try:
        return normalize_item_id(value) if isinstance(value, str) else None
    except ValueError:
        return None
