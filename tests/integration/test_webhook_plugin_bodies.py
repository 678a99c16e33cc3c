"""Webhook bodies exactly as jellyfin-plugin-webhook renders them, odd item names included.

The plugin (v18+, read from its source) puts `item.Name.Escape()` in the template data,
where Escape replaces `"` with `\\"`; Handlebars.Net then HTML-encodes `{{Name}}`
(`& < > " ' ` =`), and `{{json_encode Name}}` writes .NET's JsonEncodedText.Encode of the
escaped value. ItemId is a Guid, rendered dashed. `render` below does the same.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from sqlalchemy import Engine
from werkzeug.test import Client

from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.web.serve import MirrorWeb, WebhookPolicy
from mirror.web.webhook_body import salvage_notification

SECRET = "s3cret"
# The README's recommended templates.
SAFE_TEMPLATE = (
    '{"NotificationType": "{{NotificationType}}", "ItemId": "{{ItemId}}", '
    '"ItemType": "{{ItemType}}"}'
)
JSON_ENCODE_TEMPLATE = (
    '{"NotificationType": "{{NotificationType}}", "ItemId": "{{ItemId}}", '
    '"ItemType": "{{ItemType}}", "Name": "{{json_encode Name}}"}'
)
# The template the README recommended before: a free-text field, HTML-encoded.
OLD_TEMPLATE = (
    '{"NotificationType": "{{NotificationType}}", "ItemId": "{{ItemId}}", '
    '"ItemType": "{{ItemType}}", "Name": "{{Name}}"}'
)
NAMES = [
    'The "Quoted" Movie',
    "Back\\slash \\ Movie",
    "Ends with a backslash \\",
    "Amélie & <Friends> 'n' `ticks` = fun",
    "千と千尋の神隠し",
    "Брат 2",
    "Emoji 🎬 Night",
    'Mixed \\"both\\" kinds',
]

_HTML = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&#x27;",
    "`": "&#x60;",
    "=": "&#x3D;",
}
# JavaScriptEncoder.Default, which JsonEncodedText.Encode uses: HTML-sensitive ASCII and
# everything outside Basic Latin becomes \\uXXXX.
_JSON_SENSITIVE = set("\"&'+<>`\\")


def _plugin_escape(value: str) -> str:
    return value.replace('"', '\\"')


def _html_encode(value: str) -> str:
    return "".join(_HTML.get(char, char) for char in value)


def _json_encoded_text(value: str) -> str:
    out = []
    for char in value:
        if char == "\\":
            out.append("\\\\")
        elif char in _JSON_SENSITIVE or ord(char) < 0x20 or ord(char) > 0x7E:
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(char))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def render(template: str, *, name: str, item_id: str, item_type: str = "Movie") -> str:
    values = {
        "NotificationType": "ItemAdded",
        "ItemId": str(uuid.UUID(item_id)),
        "ItemType": _plugin_escape(item_type),
        "Name": _plugin_escape(name),
    }

    def substitute(match: re.Match[str]) -> str:
        helper, field = match.group(1), match.group(2)
        if helper == "json_encode":
            return _json_encoded_text(values[field])
        return _html_encode(values[field])

    return re.sub(r"\{\{(?:(json_encode) )?(\w+)\}\}", substitute, template)


@pytest.fixture
def hook(engine: Engine) -> Client:
    web = MirrorWeb(
        JobRepository(engine),
        QueueStats(engine),
        WebhookPolicy(secret=SECRET, item_types=("Movie", "Episode")),
    )
    return Client(web)


def post(hook: Client, body: str) -> tuple[int, dict[str, object]]:
    response = hook.post(
        "/hooks/jellyfin",
        data=body.encode(),
        headers={"X-Mirror-Secret": SECRET, "Content-Type": "text/plain"},
    )
    return response.status_code, json.loads(response.get_data(as_text=True))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("template", [SAFE_TEMPLATE, JSON_ENCODE_TEMPLATE])
def test_the_documented_templates_queue_any_item_name(
    hook: Client, repo: JobRepository, template: str, name: str
) -> None:
    item_id = uuid.uuid4().hex
    body = render(template, name=name, item_id=item_id)
    json.loads(body)  # the recommended templates always render valid JSON
    status, answer = post(hook, body)
    assert (status, answer["status"], answer["item_id"]) == (202, "queued", item_id)
    assert repo.latest_for_item(item_id).status == "new"


@pytest.mark.parametrize("name", NAMES)
def test_a_body_broken_by_a_free_text_name_still_queues_the_item(
    hook: Client, repo: JobRepository, name: str
) -> None:
    item_id = uuid.uuid4().hex
    body = render(OLD_TEMPLATE, name=name, item_id=item_id)
    if name in NAMES[:3]:  # a quote, a backslash, a trailing backslash
        with pytest.raises(json.JSONDecodeError):
            json.loads(body)  # what made the endpoint answer 400 before
    status, answer = post(hook, body)
    assert (status, answer["status"], answer["item_id"]) == (202, "queued", item_id)


def test_json_encode_gives_back_the_escaped_name() -> None:
    body = render(JSON_ENCODE_TEMPLATE, name='A "B" \\ 千', item_id=uuid.uuid4().hex)
    assert json.loads(body)["Name"] == 'A \\"B\\" \\ 千'  # the plugin's own escape stays


def test_a_broken_body_gives_back_the_item_name_for_the_log() -> None:
    body = render(OLD_TEMPLATE, name='The "Quoted" <Movie>', item_id="ab" * 16)
    salvaged = salvage_notification(body)
    assert salvaged is not None
    assert salvaged["Name"] == 'The "Quoted" <Movie>'
    assert salvaged["ItemId"] == str(uuid.UUID("ab" * 16))


@pytest.mark.parametrize(
    "body",
    [
        "not json at all",
        '{"ItemId": "' + "ab" * 16 + '", "Name": "x\\&quot;"}',  # no NotificationType
        '{"NotificationType": "ItemAdded", "ItemId": "'
        + "ab" * 16
        + '", "ItemId": "'
        + "cd" * 16
        + '", "x": \\}',  # two different ItemIds
    ],
)
def test_a_broken_body_without_trustworthy_fields_is_400(hook: Client, body: str) -> None:
    status, answer = post(hook, body)
    assert status == 400
    assert "not JSON" in str(answer["error"])
