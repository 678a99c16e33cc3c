"""The dashboard's Jellyfin endpoints under /api/ and the library page (mirror.web.libraries).

Reads need what every dashboard read needs (the login when MIRROR_UI_PASSWORD is set);
queueing needs what every action needs (a session and its CSRF token, same origin).
"""

from __future__ import annotations

from typing import Any

from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

from mirror.domain.errors import MirrorError
from mirror.domain.item import normalize_item_id
from mirror.web.api import Access, ApiError, DashboardApi, json_response, read_body
from mirror.web.libraries import LibraryBoard

MAX_TERM = 200


class LibraryApi:
    """Handlers of the search, sweep and library endpoints; guarded by DashboardApi."""

    def __init__(self, api: DashboardApi, board: LibraryBoard) -> None:
        self.api = api
        self.board = board

    def rules(self) -> list[Rule]:
        get, post, guard = ["GET"], ["POST"], self.api.guard
        return [
            Rule("/api/jellyfin/search", endpoint=guard(self.search), methods=get),
            Rule("/api/sweep", endpoint=guard(self.sweep, action=True), methods=post),
            Rule("/api/libraries", endpoint=guard(self.libraries), methods=get),
            Rule("/api/libraries/<ref>", endpoint=guard(self.library), methods=get),
            Rule(
                "/api/libraries/<ref>/mirror-rest",
                endpoint=guard(self.mirror_rest, action=True),
                methods=post,
            ),
        ]

    def search(self, request: Request, access: Access) -> Response:
        """`?q=title`: Jellyfin's items whose title contains it (movies, episodes,
        series, seasons), best match first."""
        term = request.args.get("q", "").strip()
        if not term or len(term) > MAX_TERM:
            raise ApiError(400, f"q: 1 to {MAX_TERM} characters of a title")
        return json_response({"items": [hit.to_json() for hit in self.board.search(term)]})

    def sweep(self, request: Request, access: Access) -> Response:
        """`{"parent_id": ...}`: queue every item under a series, season or library that
        is neither mirrored nor queued (`mirror enqueue --parent-id`)."""
        body = read_body(request)
        raw, priority = body.get("parent_id"), body.get("priority", 0)
        if not isinstance(raw, str):
            raise ApiError(400, "parent_id is missing")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ApiError(400, "priority must be an integer")
        try:
            parent_id = normalize_item_id(raw)
        except ValueError as error:
            raise ApiError(400, f"parent_id: {error}") from None
        result = self.board.sweep(parent_id, priority=priority)
        return json_response(result, 201 if result["queued"] else 200)

    def libraries(self, request: Request, access: Access) -> Response:
        """Every library with its counts (kept a minute; `?fresh=1` counts again)."""
        fresh = request.args.get("fresh") == "1"
        statuses = [self.board.status(lib, fresh=fresh) for lib in self.board.libraries()]
        return json_response({"libraries": [status.to_json() for status in statuses]})

    def library(self, request: Request, access: Access, ref: str) -> Response:
        fresh = request.args.get("fresh") == "1"
        return json_response(self.board.status(self.board.library(ref), fresh=fresh).to_json())

    def mirror_rest(self, request: Request, access: Access, ref: str) -> Response:
        """Queue the library's not mirrored and changed items, like `mirror sync`."""
        before = self.board.mirror_rest(self.board.library(ref))
        answer = {**before.to_json(), "queued": before.counts.jobs_created}
        return json_response(answer, 201 if before.counts.jobs_created else 200)


def library_page_context(board: LibraryBoard, *, fresh: bool) -> dict[str, Any]:
    """What templates/libraries.html shows: the statuses, or why there are none."""
    try:
        statuses = [board.status(lib, fresh=fresh) for lib in board.libraries()]
    except (ApiError, MirrorError) as error:
        return {"libraries": [], "problem": str(error)}
    return {"libraries": [status.to_json() for status in statuses], "problem": None}
