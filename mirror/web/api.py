"""The dashboard's JSON API under /api/ and its login, for `mirror serve`.

Reads go through `DashboardQueries` (indexed, fast at a million jobs), actions through
`JobRepository`, the same operations as `mirror cancel`, `mirror retry` and `mirror
enqueue`. Every answer passes through `redact`; the lease token never leaves the row.
The fleet's pause (`/api/fleet`, `.../pause`, `.../resume`) is `mirror pause` and
`mirror resume`. Errors: 400 bad input, 401 no login, 403 read-only or CSRF, 404 unknown
job, 409 the job's status forbids the action.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import BadCursor, DashboardQueries, Overview
from mirror.db.repository import JobRepository
from mirror.domain.active_hours import ActiveHours, TimeOfDayClock, local_time_of_day
from mirror.domain.jobs import (
    STATUSES,
    FleetMode,
    FleetState,
    JobNotFound,
    JobRecord,
    JobStateError,
    Status,
)
from mirror.domain.redact import redact
from mirror.fleet_views import MAX_REASON, change_line
from mirror.fleet_views import banner as fleet_banner
from mirror.views import phase_eta, speed_text
from mirror.web.auth import (
    CSRF_HEADER,
    Session,
    UiAuth,
    clear_session_cookie,
    set_session_cookie,
)

MAX_LIMIT = 500
Handler = Callable[..., Response]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def json_response(data: Any, status: int = 200) -> Response:
    # Answers never quote a secret, even one an error message might carry.
    response = Response(redact(json.dumps(data)) + "\n", status, content_type="application/json")
    response.headers["Cache-Control"] = "no-store"
    return response


def item_name(record: JobRecord) -> str:
    """The item's title ("Series S01E02 Name", "Name (Year)") once known; before that
    a name a heartbeat or the source recorded, else the item id."""
    if record.title:
        return record.title
    data = record.heartbeat_data or {}
    if isinstance(data.get("name"), str) and data["name"]:
        return str(data["name"])
    path = (record.source or {}).get("path")
    if isinstance(path, str) and path:
        return path.replace("\\", "/").rsplit("/", 1)[-1]
    return record.item_id


def job_json(record: JobRecord, now: datetime) -> dict[str, Any]:
    """The row (no lease token) plus what a person wants to read off it."""
    data = record.heartbeat_data or {}
    running = record.status == Status.PROCESSING
    elapsed = (now - record.taken_at).total_seconds() if record.taken_at else None
    age = (now - record.heartbeat_at).total_seconds() if running and record.heartbeat_at else None
    eta = phase_eta(data, elapsed if data.get("phase") == "download" else None)
    return {
        **record.to_json(),
        "name": item_name(record),
        "phase": data.get("phase"),
        "percent": data.get("percent"),
        "speed": speed_text(data) or None,
        "eta_s": None if eta is None or not running else round(eta, 1),
        "heartbeat_age_s": None if age is None else round(max(0.0, age), 1),
        # The video encoder of the worker running it (MIRROR_VIDEO_ENCODER, from its beats).
        "encoder": data.get("encoder") if running else None,
    }


@dataclass(frozen=True, slots=True)
class Access:
    """What this request may do: read, act, and the CSRF token its page must send."""

    login_required: bool
    session: Session | None

    @property
    def can_read(self) -> bool:
        return not self.login_required or self.session is not None

    @property
    def can_act(self) -> bool:
        return self.session is not None


class DashboardApi:
    """Handlers of /api/...; `MirrorWeb` routes to them."""

    def __init__(
        self,
        jobs: JobRepository,
        queries: DashboardQueries,
        attempts: AttemptLog,
        auth: UiAuth,
        *,
        stale_timeout_s: float,
        max_attempts: int = 3,
        active_hours: ActiveHours | None = None,
        time_of_day: TimeOfDayClock = local_time_of_day,
    ) -> None:
        self.jobs = jobs
        self.active_hours = active_hours or ActiveHours()
        self.time_of_day = time_of_day
        self.queries = queries
        self.attempts = attempts
        self.auth = auth
        self.stale_timeout_s = stale_timeout_s
        self.max_attempts = max_attempts

    def rules(self) -> list[Rule]:
        get, post = ["GET"], ["POST"]
        return [
            Rule("/api/session", endpoint=self.guard(self.session_info, public=True), methods=get),
            Rule("/api/login", endpoint=self.login, methods=post),
            Rule("/api/logout", endpoint=self.logout, methods=post),
            Rule("/api/overview", endpoint=self.guard(self.overview), methods=get),
            Rule("/api/jobs", endpoint=self.guard(self.list_jobs), methods=get),
            Rule("/api/search", endpoint=self.guard(self.search), methods=get),
            Rule("/api/jobs/<uuid:job_id>", endpoint=self.guard(self.job), methods=get),
            Rule("/api/jobs/<job_id>", endpoint=self.guard(self.not_a_job), methods=get),
            Rule(
                "/api/jobs/<uuid:job_id>/cancel",
                endpoint=self.guard(self.cancel, action=True),
                methods=post,
            ),
            Rule(
                "/api/jobs/<uuid:job_id>/retry",
                endpoint=self.guard(self.retry, action=True),
                methods=post,
            ),
            Rule("/api/enqueue", endpoint=self.guard(self.enqueue, action=True), methods=post),
            Rule("/api/fleet", endpoint=self.guard(self.fleet), methods=get),
            Rule("/api/fleet/pause", endpoint=self.guard(self.pause, action=True), methods=post),
            Rule("/api/fleet/resume", endpoint=self.guard(self.resume, action=True), methods=post),
        ]

    def access(self, request: Request) -> Access:
        return Access(login_required=self.auth.enabled, session=self.auth.session(request))

    def guard(self, handler: Handler, *, action: bool = False, public: bool = False) -> Handler:
        """Login, read-only and CSRF rules around a handler, and JSON for every error."""

        def guarded(request: Request, **args: Any) -> Response:
            access = self.access(request)
            try:
                if not public and not access.can_read:
                    raise ApiError(401, "log in first (POST /api/login)")
                if action:
                    if not access.login_required:
                        raise ApiError(403, "read-only: set MIRROR_UI_PASSWORD to allow actions")
                    if access.session is None:
                        raise ApiError(401, "log in first (POST /api/login)")
                    if not self.auth.csrf_ok(request, access.session):
                        raise ApiError(403, f"missing or wrong {CSRF_HEADER} header (CSRF)")
                return handler(request, access=access, **args)
            except ApiError as error:
                return json_response({"error": str(error)}, error.status)
            except JobNotFound as error:
                return json_response({"error": str(error)}, 404)
            except JobStateError as error:
                return json_response({"error": str(error)}, 409)

        return guarded

    # -- session ------------------------------------------------------------------------

    def session_info(self, request: Request, access: Access) -> Response:
        return json_response(
            {
                "login_required": access.login_required,
                "logged_in": access.session is not None,
                "can_act": access.can_act,
                "csrf_token": access.session.csrf_token if access.session else None,
            }
        )

    def login(self, request: Request) -> Response:
        """`{"password": ...}` (JSON or a form): a session cookie and the CSRF token."""
        if not self.auth.enabled:
            return json_response({"error": "no login: MIRROR_UI_PASSWORD is not set"}, 403)
        if not self.auth.same_origin(request):
            return json_response({"error": "cross-site login refused (CSRF)"}, 403)
        try:
            body = read_body(request)
        except ApiError as error:
            return json_response({"error": str(error)}, error.status)
        password = body.get("password")
        if not isinstance(password, str):
            return json_response({"error": "password is missing"}, 400)
        result = self.auth.login(password, client=request.remote_addr or "?")
        if result.retry_after_s is not None:
            response = json_response(
                {"error": f"too many wrong passwords: try again in {result.retry_after_s} s"},
                429,
            )
            response.headers["Retry-After"] = str(result.retry_after_s)
            return response
        if result.cookie is None:
            return json_response({"error": "wrong password"}, 401)
        session = self.auth.session(_with_cookie(request, result.cookie))
        assert session is not None
        response = json_response({"logged_in": True, "csrf_token": session.csrf_token})
        set_session_cookie(response, result.cookie, secure=self.auth.secure(request))
        return response

    def logout(self, request: Request) -> Response:
        """Ends the session on the server too: its cookie, copied or kept, is refused."""
        if not self.auth.same_origin(request):
            return json_response({"error": "cross-site logout refused (CSRF)"}, 403)
        self.auth.end(request)
        response = json_response({"logged_in": False})
        clear_session_cookie(response, secure=self.auth.secure(request))
        return response

    # -- reads --------------------------------------------------------------------------

    def overview(self, request: Request, access: Access) -> Response:
        return json_response(self.overview_json(self.queries.overview(), access))

    def overview_json(self, view: Overview, access: Access) -> dict[str, Any]:
        return {
            "jobs_by_status": view.jobs_by_status,
            "due": view.due,
            "oldest_due_age_s": round(view.oldest_due_age_s, 1),
            "last_hour": {
                "jobs_done": view.done_last_hour,
                "bytes_downloaded": view.bytes_downloaded_last_hour,
                "bytes_uploaded": view.bytes_uploaded_last_hour,
            },
            "stale_timeout_s": self.stale_timeout_s,
            "running": [job_json(r, view.now) for r in view.running],
            "failures": [job_json(r, view.now) for r in view.failures],
            "fleet": self.fleet_json(),
            "can_act": access.can_act,
            "login_required": access.login_required,
        }

    def fleet_json(self, state: FleetState | None = None) -> dict[str, Any]:
        """The fleet's mode (`mirror pause`) and this process's MIRROR_ACTIVE_HOURS."""
        state = state if state is not None else self.jobs.fleet_state()
        hours = self.active_hours
        now = self.time_of_day()
        return {
            **state.to_json(),
            "active_hours": None if hours.always else str(hours),
            "active_hours_open": None if hours.always else hours.is_open(now),
            "banner": fleet_banner(state, hours, now),
        }

    def fleet(self, request: Request, access: Access) -> Response:
        return json_response({"fleet": self.fleet_json()})

    def list_jobs(self, request: Request, access: Access) -> Response:
        """`?status=&limit=&cursor=&q=`: `q` keeps jobs whose series or item name holds it."""
        status = request.args.get("status") or None
        if status is not None and status not in STATUSES:
            raise ApiError(400, f"status must be one of {', '.join(STATUSES)}")
        limit = _int_arg(request, "limit", 50, 1, MAX_LIMIT)
        search = request.args.get("q", "").strip() or None
        if search is not None and len(search) > 200:
            raise ApiError(400, "q: at most 200 characters (part of a title)")
        try:
            records, cursor = self.queries.page(
                status=status,
                limit=limit,
                cursor=request.args.get("cursor") or None,
                search=search,
            )
        except BadCursor as error:
            raise ApiError(400, str(error)) from None
        now = datetime.now(UTC)
        return json_response({"jobs": [job_json(r, now) for r in records], "next_cursor": cursor})

    def search(self, request: Request, access: Access) -> Response:
        query = request.args.get("q", "").strip()
        if not query or len(query) > 200:
            raise ApiError(400, "q: 1 to 200 characters (an item id or part of a title)")
        now = datetime.now(UTC)
        return json_response({"jobs": [job_json(r, now) for r in self.queries.search(query)]})

    def job(self, request: Request, access: Access, job_id: uuid.UUID) -> Response:
        record = self.jobs.get(job_id)
        attempts = [a.to_json() for a in self.attempts.attempts_of(job_id)]
        for attempt in attempts:
            attempt.pop("lease_token", None)
        return json_response({"job": job_json(record, datetime.now(UTC)), "attempts": attempts})

    def not_a_job(self, request: Request, access: Access, job_id: str) -> Response:
        raise ApiError(404, f"no job with id {job_id[:64]!r}")

    # -- actions ------------------------------------------------------------------------

    def cancel(self, request: Request, access: Access, job_id: uuid.UUID) -> Response:
        return json_response({"job": job_json(self.jobs.cancel(job_id), datetime.now(UTC))})

    def retry(self, request: Request, access: Access, job_id: uuid.UUID) -> Response:
        return json_response({"job": job_json(self.jobs.retry(job_id), datetime.now(UTC))})

    def pause(self, request: Request, access: Access) -> Response:
        """`{"drain": false, "reason": "..."}`: as `mirror pause [--drain] [--reason]`."""
        body = read_body(request)
        drain, reason = body.get("drain", False), body.get("reason")
        if not isinstance(drain, bool):
            raise ApiError(400, "drain must be true or false")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise ApiError(400, f"reason must be text of at most {MAX_REASON} characters")
        mode = FleetMode.DRAINING if drain else FleetMode.PAUSED
        return self._set_fleet(request, mode, (reason or "").strip() or None)

    def resume(self, request: Request, access: Access) -> Response:
        """As `mirror resume`: claims go on, idle workers wake."""
        return self._set_fleet(request, FleetMode.RUNNING, None)

    def _set_fleet(self, request: Request, mode: FleetMode, reason: str | None) -> Response:
        by = f"dashboard ({request.remote_addr or '?'})"
        change = self.jobs.set_fleet_mode(mode, changed_by=by, reason=reason)
        return json_response(
            {
                "changed": change.changed,
                "message": change_line(change),
                "fleet": self.fleet_json(change.state),
            }
        )

    def enqueue(self, request: Request, access: Access) -> Response:
        """`{"item_id": ..., "priority": 0}`: a new job, or the item's active one."""
        body = read_body(request)
        item_id, priority = body.get("item_id"), body.get("priority", 0)
        if not isinstance(item_id, str):
            raise ApiError(400, "item_id is missing")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ApiError(400, "priority must be an integer")
        try:
            result = self.jobs.enqueue([item_id], priority=priority, max_attempts=self.max_attempts)
        except ValueError as error:
            raise ApiError(400, f"item_id: {error}") from None
        status = "queued" if result[0].created else "already queued"
        job = job_json(result[0].job, datetime.now(UTC))
        return json_response({"status": status, "job": job}, 201 if result[0].created else 200)


def read_body(request: Request) -> dict[str, Any]:
    if request.mimetype == "application/json":
        try:
            data = json.loads(request.get_data(cache=True) or b"{}")
        except (ValueError, RecursionError):
            raise ApiError(400, "body is not JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "body must be a JSON object")
        return data
    return dict(request.form)


def _int_arg(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be between {low} and {high}")
    return value


def _with_cookie(request: Request, cookie: str) -> Request:
    from mirror.web.auth import COOKIE

    environ = dict(request.environ)
    environ["HTTP_COOKIE"] = f"{COOKIE}={cookie}"
    return Request(environ)
