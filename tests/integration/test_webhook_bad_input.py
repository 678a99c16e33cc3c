"""Whatever a sender posts to the webhook, a bad body is a 4xx answer, never a 500."""

from __future__ import annotations

import pytest

from tests.integration import test_web
from tests.integration.test_web import SECRET, Served

# test_web's fixtures (a waitress server on real Postgres), shared by name.
serve_app = test_web.serve_app
served = test_web.served

MOVIE = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
BAD_BODIES = {
    # each under the 64 KiB limit, so they reach the JSON parser
    "nested lists": "[" * 30_000 + "]" * 30_000,
    "nested objects": '{"a":' * 10_000 + "1" + "}" * 10_000,
    "unclosed nesting": "[" * 60_000,
    "a 5000-digit number": "1" * 5_000,
    "a 5000-digit ItemId": '{"NotificationType": "ItemAdded", "ItemId": ' + "9" * 5_000 + "}",
    "invalid UTF-8": b'{"NotificationType": "\xff\xfe"}',
    "a lone surrogate ItemId": '{"NotificationType": "ItemAdded", "ItemType": "Movie", '
    '"ItemId": "\\ud800"}',
    "NaN ItemId": '{"NotificationType": "ItemAdded", "ItemType": "Movie", "ItemId": NaN}',
    "a list NotificationType": '{"NotificationType": ["ItemAdded"]}',
    "a NUL in ItemType": '{"NotificationType": "ItemAdded", "ItemType": "Mo\\u0000vie", '
    f'"ItemId": "{MOVIE}x"}}',
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_a_bad_body_is_answered_4xx_with_a_json_reason(served: Served, body: str | bytes) -> None:
    response = served.client.post(
        "/hooks/jellyfin", content=body, headers={"X-Mirror-Secret": SECRET}
    )
    assert 400 <= response.status_code < 500, response.text[:300]
    assert response.json()["error"]
    assert served.repo.list() == []


def test_odd_but_readable_names_are_still_queued(served: Served) -> None:
    body = (
        '{"NotificationType": "ItemAdded", "ItemType": "Movie", '
        f'"ItemId": "{MOVIE}", "Name": "\\ud800\\u0000 {"x" * 1000}"}}'
    )
    response = served.client.post(
        "/hooks/jellyfin", content=body, headers={"X-Mirror-Secret": SECRET}
    )
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "queued"
