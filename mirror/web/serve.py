"""`mirror serve`: health, Prometheus metrics and the Jellyfin webhook over HTTP.

A small WSGI app (werkzeug) served by waitress. It holds no state of its own: health and
metrics read Postgres, the webhook enqueues into it, so any number of these can run.
Webhook deliveries are hints (late, duplicated, or lost: the plugin never retries), so
the webhook only ever enqueues with `skip_mirrored` and a library sweep reconciles.
"""

from __future__ import annotations

import hmac
import json
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from prometheus_client import Counter
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from mirror.db.removals import HELD_BACK
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.domain.active_hours import ActiveHours, TimeOfDayClock, local_time_of_day
from mirror.domain.errors import ConfigError, MirrorError
from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import DatabaseUnavailable, Status
from mirror.domain.logs import get_logger
from mirror.domain.redact import redact
from mirror.web import metrics
from mirror.web.api import DashboardApi
from mirror.web.dashboard import dashboard_api, dashboard_rules, library_board
from mirror.web.libraries import LibraryBoard
from mirror.web.play_routes import PlayRoutes
from mirror.web.player import Player
from mirror.web.proxies import behind_proxies
from mirror.web.removed_items import (
    STILL_THERE,
    UNCHECKED,
    ItemRemover,
    item_remover,
    jellyfin_presence,
)
from mirror.web.webhook_body import salvage_notification, title_of

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from mirror.settings import Settings
    from mirror.wiring import Database

MAX_BODY_BYTES = 64 * 1024  # a webhook body is a few hundred bytes, "all properties" a few KiB
SECRET_HEADER = "X-Mirror-Secret"
ADDED = "ItemAdded"
DELETED = "ItemDeleted"

log = get_logger("mirror.web")


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """What the webhook accepts: the shared secret and which item types it mirrors."""

    secret: str = field(repr=False)  # never in a log line or a traceback
    item_types: tuple[str, ...]
    max_attempts: int = 3
    delete_removed: bool = False  # MIRROR_DELETE_REMOVED: act on ItemDeleted, not just log

    def wants(self, item_type: str) -> bool:
        return item_type.casefold() in {t.casefold() for t in self.item_types}


class BadDelivery(ValueError):
    """The body is not a webhook notification we can read: 400 with this message."""


class MirrorWeb:
    """The WSGI application: routes requests to the three endpoints."""

    def __init__(
        self,
        jobs: JobRepository,
        stats: QueueStats,
        webhook: WebhookPolicy,
        remover: ItemRemover | None = None,
        dashboard: DashboardApi | None = None,
        player: Player | None = None,
        metrics_token: str | None = None,
        library: LibraryBoard | None = None,
        active_hours: ActiveHours | None = None,
        time_of_day: TimeOfDayClock = local_time_of_day,
    ) -> None:
        self.jobs = jobs
        self.metrics_token = metrics_token
        self.player = player
        self.dashboard = dashboard
        self.stats = stats
        self.webhook = webhook
        self.remover = remover
        self.registry = metrics.build_registry(stats, active_hours, time_of_day)
        self.deletions = Counter(
            "mirror_webhook_item_deleted",
            "ItemDeleted deliveries by what was done: noted, removed, cancelled, held back, "
            "already removed, not mirrored, still in Jellyfin, not checked.",
            ["action"],
            registry=self.registry,
        )
        self.routes = Map(
            [
                Rule("/healthz", endpoint=self.healthz, methods=["GET"]),
                Rule("/metrics", endpoint=self.metrics, methods=["GET"]),
                Rule("/hooks/jellyfin", endpoint=self.jellyfin_hook, methods=["POST"]),
                *(dashboard_rules(dashboard, library) if dashboard is not None else []),
                *PlayRoutes(player, dashboard.auth if dashboard else None).rules(),
            ]
        )

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        request.max_content_length = MAX_BODY_BYTES
        try:
            endpoint, args = self.routes.bind_to_environ(environ).match()
            handler: Callable[..., Response] = endpoint
            response = handler(request, **args)
        except HTTPException as error:
            response = _json({"error": error.name.lower()}, error.code or 500)
            for name, value in error.get_headers():
                if name.lower() == "allow":  # 405 says which methods would work
                    response.headers[name] = value
        return response(environ, start_response)

    def _may_scrape(self, request: Request) -> bool:
        if self.metrics_token is not None:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(
                given.strip().encode(), self.metrics_token.encode()
            ):
                return True
        auth = self.dashboard.auth if self.dashboard is not None else None
        if auth is not None and auth.enabled:
            return auth.session(request) is not None
        return self.metrics_token is None

    def healthz(self, request: Request) -> Response:
        """200 when Postgres answers and the job table exists, else 503 naming the problem."""
        problem = self.stats.database_problem()
        if problem is not None:
            return _json({"status": "unavailable", "database": problem}, 503)
        return _json({"status": "ok", "database": "ok"}, 200)

    def metrics(self, request: Request) -> Response:
        """Open without a UI password or token; else the token (Prometheus) or a login."""
        if not self._may_scrape(request):
            response = _json({"error": "log in, or send MIRROR_METRICS_TOKEN as a bearer"}, 401)
            response.headers["WWW-Authenticate"] = 'Bearer realm="mirror metrics"'
            return response
        body, content_type = metrics.render(self.registry, request.headers.get("Accept"))
        return Response(body, 200, content_type=content_type)

    def jellyfin_hook(self, request: Request) -> Response:
        """jellyfin-plugin-webhook's Generic destination; the secret rides in a header."""
        remote = request.remote_addr or "?"
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.webhook.secret.encode()):
            log.bind(remote=remote).warning("webhook rejected: %s", _secret_problem(given))
            return _json({"error": f"missing or wrong {SECRET_HEADER} header"}, 401)
        try:
            notification = _read_notification(request)
            verdict = self._act_on(notification)
        except RequestEntityTooLarge:
            log.bind(remote=remote).warning("webhook rejected: body over %d bytes", MAX_BODY_BYTES)
            return _json({"error": f"body larger than {MAX_BODY_BYTES} bytes"}, 413)
        except BadDelivery as error:
            log.bind(remote=remote).warning("webhook rejected: %s", error)
            return _json({"error": str(error)}, 400)
        except (RecursionError, ValueError) as error:  # past the JSON parser's own limits
            reason = _unreadable(error)
            log.bind(remote=remote).warning("webhook rejected: %s", reason)
            return _json({"error": reason}, 400)
        except DatabaseUnavailable as error:
            log.bind(remote=remote).error("webhook failed: database: %s", error.detail)
            return _json({"error": "database unavailable"}, 503)
        context = {
            "remote": remote,
            "notification": _loggable(notification.get("NotificationType")),
            "item_type": _loggable(notification.get("ItemType")),
            "name": _loggable(notification.get("Name")),
            "item": verdict.get("item_id"),
            "job": verdict.get("job_id"),
        }
        log.bind(**context).info("webhook %s", verdict["status"])
        return _json(verdict, 503 if verdict["status"] == UNCHECKED else 202)

    def _act_on(self, notification: dict[str, Any]) -> dict[str, Any]:
        """Enqueue an added item of a wanted type; everything else is acknowledged, ignored."""
        kind = _text_field(notification, "NotificationType")
        if kind == DELETED:
            return self._item_deleted(notification)
        if kind != ADDED:
            return {"status": "ignored", "reason": f"NotificationType {kind!r} is not {ADDED}"}
        item_type = _text_field(notification, "ItemType")
        try:
            item_id = normalize_item_id(_text_field(notification, "ItemId"))
        except ValueError as error:
            raise BadDelivery(f"ItemId: {error}") from None
        if not self.webhook.wants(item_type):
            wanted = ",".join(self.webhook.item_types)
            return {
                "status": "ignored",
                "item_id": item_id,
                "reason": f"ItemType {item_type!r} is not one of {wanted}",
            }
        results = self.jobs.enqueue(
            [item_id],
            max_attempts=self.webhook.max_attempts,
            skip_mirrored=True,
            titles={item_id: title_of(notification)},
        )
        if not results:
            return {"status": "already mirrored", "item_id": item_id}
        result = results[0]
        status = "queued" if result.created else "already queued"
        return {"status": status, "item_id": item_id, "job_id": str(result.job.id)}

    def _item_deleted(self, notification: dict[str, Any]) -> dict[str, Any]:
        """A removed item: only logged and counted unless MIRROR_DELETE_REMOVED is on,
        and then only marked once Jellyfin says it is gone (see `item_remover`).

        Off by default because a delivery is a hint, and deleting on a hint is not
        undoable; `mirror sync --delete` checks with Jellyfin first.
        """
        try:
            item_id = normalize_item_id(_text_field(notification, "ItemId"))
        except ValueError as error:
            raise BadDelivery(f"ItemId: {error}") from None
        if not self.webhook.delete_removed or self.remover is None:
            self.deletions.labels("noted").inc()
            return {
                "status": "removal noted",
                "item_id": item_id,
                "reason": "MIRROR_DELETE_REMOVED is off: objects kept (mirror sync --delete)",
            }
        marked = self.remover(item_id)
        self.deletions.labels(marked.outcome).inc()
        verdict: dict[str, Any] = {"status": marked.outcome, "item_id": item_id}
        if marked.outcome in (Status.REMOVED, Status.CANCELLED, HELD_BACK):
            verdict["items"] = marked.items  # a Series or Season: the items under it
        if marked.outcome == STILL_THERE:
            verdict["reason"] = (
                "Jellyfin still has this item (a file replaced in place keeps its id, and "
                "the plugin may send its ItemDeleted after the ItemAdded): mirror kept"
            )
        elif marked.outcome == UNCHECKED:
            log.bind(item=item_id).warning(
                "ItemDeleted not acted on: %s; the plugin does not retry, so run "
                "`mirror sync --delete` once Jellyfin answers",
                marked.reason,
            )
            verdict["reason"] = (
                f"{marked.reason}: objects kept; the plugin does not retry, run "
                "`mirror sync --delete` once Jellyfin answers"
            )
        elif marked.outcome == HELD_BACK:
            log.bind(item=item_id).warning(
                "ItemDeleted held back: %s (a library emptied by an offline mount?); "
                "`mirror sync --delete` checks with Jellyfin",
                marked.reason,
            )
            verdict["reason"] = f"{marked.reason}: run `mirror sync --delete` to check"
        elif marked.outcome in (Status.REMOVED, Status.CANCELLED):
            verdict["reason"] = (
                "marked removed: its objects are deleted by `mirror sync --delete` once it "
                "has been gone for MIRROR_DELETE_GRACE"
            )
        return verdict


def _read_notification(request: Request) -> dict[str, Any]:
    """The JSON object of the body, whatever the Content-Type (the plugin sends text/plain)."""
    body = request.get_data(cache=False)  # raises RequestEntityTooLarge past the limit
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadDelivery("body is not JSON: not UTF-8 text (check the webhook template)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # A free-text field in the template breaks the JSON on a `"` or `\` in a name;
        # the plugin never retries, so act on the fields that can still be read.
        salvaged = salvage_notification(text)
        if salvaged is None:
            raise BadDelivery("body is not JSON (check the webhook template)") from None
        log.warning(
            "webhook body is not valid JSON (a free-text field such as {{Name}} in the "
            "template?); acting on its readable fields: use the template in mirror's README"
        )
        return dict(salvaged)
    if not isinstance(data, dict):
        raise BadDelivery(f"body must be a JSON object, got {type(data).__name__}")
    return data


def _unreadable(error: RecursionError | ValueError) -> str:
    """Why the parser gave up on a body: nesting too deep, or a number too long."""
    if isinstance(error, RecursionError):
        return "body is not JSON a webhook sends: nested too deeply"
    return f"body is not JSON a webhook sends: {str(error).split(':')[0][:100]}"


def _text_field(notification: dict[str, Any], name: str) -> str:
    value = notification.get(name)
    if value is None or value == "":
        raise BadDelivery(f"{name} is missing (add it to the webhook template)")
    if not isinstance(value, str):
        raise BadDelivery(f"{name} must be a string, got {type(value).__name__}")
    return value


def _loggable(value: Any) -> str | None:
    """A sender-chosen value made safe for a one-line log: short, quoted if odd."""
    if value is None or value == "":
        return None
    text = str(value)[:80]
    return text if text.isprintable() and " " not in text else repr(text)


def _secret_problem(given: str) -> str:
    return f"no {SECRET_HEADER} header" if not given else f"wrong {SECRET_HEADER} header"


def _json(data: dict[str, Any], status: int) -> Response:
    # Answers never quote a secret, even one a database error might carry.
    return Response(redact(json.dumps(data)) + "\n", status, content_type="application/json")


# -- serving ----------------------------------------------------------------------------


def webhook_policy(settings: Settings) -> WebhookPolicy:
    """The webhook's settings; a missing secret is a configuration error (exit 2)."""
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
    if not secret.strip():
        raise ConfigError(
            "MIRROR_WEBHOOK_SECRET is not set: `mirror serve` needs it to accept Jellyfin's "
            f"webhook (sent in the {SECRET_HEADER} header)"
        )
    return WebhookPolicy(
        secret=secret,
        item_types=settings.webhook_item_types,
        max_attempts=settings.max_attempts,
        delete_removed=settings.delete_removed,
    )


def web_app(settings: Settings, db: Database) -> WSGIApplication:
    """Every route of `mirror serve` over `db`, behind MIRROR_TRUSTED_PROXIES."""
    from mirror import wiring

    policy = webhook_policy(settings)
    remover = (
        item_remover(db.removals, jellyfin_presence(settings)) if policy.delete_removed else None
    )
    player = None
    if settings.s3_bucket:
        store = wiring.s3_storage(settings)
        link = wiring.object_links(settings, store.client)
        player = Player(db.jobs, store.client, settings.s3_bucket, link, settings.hlsjs_path)
    dashboard = dashboard_api(settings, db.jobs, db.dashboard, db.attempts, db.sessions)
    # Search and library pages ask Jellyfin while a person waits: two tries, not five;
    # a client per request, closed after it (this app has no end to close one at).
    has_jellyfin = settings.jellyfin_url and settings.jellyfin_api_key
    jellyfin = (
        (lambda: wiring.jellyfin_client(settings, retry_attempts=2)) if has_jellyfin else None
    )
    library = library_board(settings, db, jellyfin)
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    web = MirrorWeb(
        db.jobs,
        db.stats,
        policy,
        remover,
        dashboard,
        player,
        token,
        library,
        active_hours=settings.active_windows,
    )
    return behind_proxies(web, settings.trusted_proxies)


def listen(app: WSGIApplication, *, host: str, port: int, threads: int = 4) -> Any:
    """A waitress server bound to host:port (0: a free port); `listening` names its URLs."""
    from waitress.server import create_server

    # waitress buffers whole bodies before the app runs; keep that bounded too.
    try:
        return create_server(
            app,
            host=host,
            port=port,
            threads=threads,
            max_request_body_size=4 * MAX_BODY_BYTES,
            clear_untrusted_proxy_headers=False,  # mirror.web.proxies decides whom to trust
        )
    except OSError as error:  # port taken, unknown host name, no permission
        raise MirrorError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def serve(settings: Settings, *, host: str, port: int, threads: int = 4) -> None:
    """Serve until SIGINT or SIGTERM; port 0 picks a free port (logged)."""
    from mirror import wiring

    webhook_policy(settings)  # a missing secret fails before anything is opened
    db = wiring.database(settings, check=False)  # /healthz reports it
    try:
        server = listen(web_app(settings, db), host=host, port=port, threads=threads)
    except BaseException:
        db.dispose()
        raise
    if settings.ui_password and not settings.session_secret:
        log.info("sessions end when this process stops (MIRROR_SESSION_SECRET is not set)")
    problem = db.stats.database_problem()
    if problem is not None:
        log.warning("database not ready (GET /healthz says 503 until it is): %s", problem)
    for url in listening(server):
        log.info(
            "serving on %s (GET / dashboard, /api/, /healthz, /metrics, /play/<item_id>,"
            " /hooks/jellyfin)",
            url,
        )

    def stop(signum: int, frame: object) -> NoReturn:
        raise SystemExit(0)  # waitress's loop ends its worker threads on SystemExit

    signal.signal(signal.SIGTERM, stop)
    try:
        server.run()  # returns after SIGINT or SIGTERM, its threads shut down
    finally:
        server.close()
        db.dispose()
    log.info("stopped")


def listening(server: Any) -> list[str]:
    """The URLs a waitress server listens on (a host name can resolve to several)."""
    pairs = getattr(server, "effective_listen", None) or [
        (server.effective_host, server.effective_port)
    ]
    return [f"http://[{h}]:{p}" if ":" in str(h) else f"http://{h}:{p}" for h, p in pairs]
