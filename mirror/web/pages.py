"""The dashboard's HTML: `GET /` and `GET /jobs/<id>`, server-rendered with Jinja2.

The pages carry the first figures and a small script of ours (no third-party code, no
build step) that polls the JSON API and redraws with textContent, never innerHTML. A
strict Content-Security-Policy allows only our own script and stylesheet.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from importlib import resources

from jinja2 import Environment, PackageLoader, select_autoescape
from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

from mirror.domain.durations import format_bytes, format_duration
from mirror.domain.jobs import JobNotFound
from mirror.domain.redact import redact
from mirror.views import detail_rows
from mirror.web.api import DashboardApi, item_name, job_json
from mirror.web.libraries import LibraryBoard
from mirror.web.library_api import library_page_context

STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class DashboardPages:
    def __init__(self, api: DashboardApi, board: LibraryBoard | None = None) -> None:
        self.api = api
        self.board = board
        self.templates = Environment(
            loader=PackageLoader("mirror.web", "templates"),
            autoescape=select_autoescape(["html"]),
        )
        self.templates.filters["bytes"] = format_bytes
        self.templates.filters["duration"] = lambda s: format_duration(float(s))

    def rules(self) -> list[Rule]:
        libraries = (
            []
            if self.board is None
            else [Rule("/libraries", endpoint=self.libraries_page, methods=["GET"])]
        )
        return [
            *libraries,
            Rule("/", endpoint=self.dashboard, methods=["GET"]),
            Rule("/jobs/<uuid:job_id>", endpoint=self.job_page, methods=["GET"]),
            Rule("/static/<name>", endpoint=self.static, methods=["GET"]),
        ]

    def _html(self, template: str, status: int = 200, **context: object) -> Response:
        body = self.templates.get_template(template).render(**context)
        response = Response(redact(body), status, content_type="text/html; charset=utf-8")
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    def dashboard(self, request: Request) -> Response:
        access = self.api.access(request)
        if not access.can_read:
            return self._html("login.html", 401)
        view = self.api.queries.overview()
        return self._html(
            "dashboard.html",
            overview=self.api.overview_json(view, access),
            access=access,
        )

    def libraries_page(self, request: Request) -> Response:
        """Per library: items, mirrored, queued, failed, not mirrored, changed; counted
        on request (one listing walk per library) and kept a minute (`?fresh=1`)."""
        access = self.api.access(request)
        if not access.can_read:
            return self._html("login.html", 401)
        assert self.board is not None
        context = library_page_context(self.board, fresh=request.args.get("fresh") == "1")
        return self._html("libraries.html", access=access, **context)

    def job_page(self, request: Request, job_id: uuid.UUID) -> Response:
        access = self.api.access(request)
        if not access.can_read:
            return self._html("login.html", 401)
        try:
            record = self.api.jobs.get(job_id)
        except JobNotFound:
            return self._html("missing.html", 404, job_id=job_id)
        now = datetime.now(UTC)
        return self._html(
            "job.html",
            job=job_json(record, now),
            name=item_name(record),
            rows=detail_rows(record, now),
            attempts=[a.to_json() for a in self.api.attempts.attempts_of(job_id)],
            access=access,
        )

    def static(self, request: Request, name: str) -> Response:
        if name not in STATIC:
            raise NotFound()
        body = resources.files("mirror.web").joinpath("templates", name).read_bytes()
        response = Response(body, 200, content_type=STATIC[name])
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "max-age=300"
        return response
