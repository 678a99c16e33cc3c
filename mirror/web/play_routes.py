"""The player's routes in `mirror serve`: `/play/<item_id>`, its playlists and its files.

HTTP only: what is answered comes from `mirror.web.player`. With MIRROR_UI_PASSWORD set,
the page and the playlists (which hand out presigned URLs) go to logged-in browsers only.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

from mirror.web.auth import UiAuth
from mirror.web.player import ASSETS_ROUTE, HLSJS_LOCAL_ROUTE, Player, PlayerAnswer

LOGIN_FIRST_PAGE = '<!doctype html><p>Log in on <a href="/">the dashboard</a> to play items.</p>'


class PlayRoutes:
    """Handlers of the player's routes; `player` None: no bucket configured (404)."""

    def __init__(self, player: Player | None, auth: UiAuth | None) -> None:
        self.player = player
        self.auth = auth

    def rules(self) -> list[Rule]:
        get = ["GET"]
        return [
            Rule("/play/<item_id>", endpoint=self.page, methods=get),
            Rule("/play/<item_id>/<path:name>", endpoint=self.playlist, methods=get),
            Rule(HLSJS_LOCAL_ROUTE, endpoint=self.hlsjs, methods=get),
            Rule(ASSETS_ROUTE, endpoint=self.asset, methods=get),
        ]

    def page(self, request: Request, item_id: str) -> Response:
        if not self._may_play(request):
            return Response(LOGIN_FIRST_PAGE, 401, content_type="text/html; charset=utf-8")
        return self._played(lambda player: player.page(item_id))

    def playlist(self, request: Request, item_id: str, name: str) -> Response:
        """One of the item's playlists, media URIs presigned."""
        if not self._may_play(request):
            return _json({"error": "log in first: the playlists hand out presigned URLs"}, 401)
        return self._played(lambda player: player.playlist(item_id, name))

    def hlsjs(self, request: Request) -> Response:
        return self._played(lambda player: player.hlsjs())

    def asset(self, request: Request, name: str) -> Response:
        return self._played(lambda player: player.asset(name))

    def _may_play(self, request: Request) -> bool:
        return self.auth is None or not self.auth.enabled or self.auth.session(request) is not None

    def _played(self, answer: Callable[[Player], PlayerAnswer]) -> Response:
        if self.player is None:
            return _json({"error": "no bucket configured (MIRROR_S3_BUCKET)"}, 404)
        result = answer(self.player)
        response = Response(result.body, status=result.status, content_type=result.content_type)
        response.headers["Cache-Control"] = result.cache_control
        response.headers["X-Content-Type-Options"] = "nosniff"
        if result.csp is not None:
            response.headers["Content-Security-Policy"] = result.csp
            response.headers["Referrer-Policy"] = "no-referrer"
        return response


def _json(data: dict[str, str], status: int) -> Response:
    return Response(json.dumps(data) + "\n", status, content_type="application/json")
