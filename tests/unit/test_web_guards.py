"""The login throttle and the trusted-proxy middleware: pure, no server."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.domain.errors import ConfigError
from mirror.settings import load_settings
from mirror.web.proxies import behind_proxies
from mirror.web.throttle import LoginThrottle

FORWARDED = {
    "HTTP_X_FORWARDED_PROTO": "https",
    "HTTP_X_FORWARDED_HOST": "mirror.example.org",
    "HTTP_X_FORWARDED_FOR": "203.0.113.9",
    "HTTP_FORWARDED": "for=203.0.113.9;proto=https",
}


def _seen_by_app(peer: str, proxies: list[str]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(environ)
        return []

    environ = {
        "REMOTE_ADDR": peer,
        "HTTP_HOST": "10.0.0.2:8080",
        "SERVER_NAME": "10.0.0.2",
        "SERVER_PORT": "8080",
        "wsgi.url_scheme": "http",
        **FORWARDED,
    }
    behind_proxies(app, proxies)(environ, lambda *args: None)  # type: ignore[arg-type]
    return seen


def test_a_trusted_proxy_sets_scheme_host_and_client() -> None:
    seen = _seen_by_app("10.0.0.5", ["10.0.0.0/24"])
    assert seen["wsgi.url_scheme"] == "https"
    assert seen["HTTP_HOST"] == "mirror.example.org"
    assert seen["REMOTE_ADDR"] == "203.0.113.9"


@pytest.mark.parametrize("proxies", [[], ["10.0.0.5"], ["192.168.0.0/16"]])
def test_forwarded_headers_from_anyone_else_are_dropped(proxies: list[str]) -> None:
    seen = _seen_by_app("10.0.0.66", proxies)
    assert seen["wsgi.url_scheme"] == "http" and seen["REMOTE_ADDR"] == "10.0.0.66"
    assert not set(FORWARDED) & set(seen)


def test_an_ipv4_mapped_peer_matches_its_ipv4_network() -> None:
    assert _seen_by_app("::ffff:10.0.0.5", ["10.0.0.0/24"])["wsgi.url_scheme"] == "https"


def test_five_failures_lock_a_client_out_until_the_window_passes() -> None:
    now = [1000.0]
    throttle = LoginThrottle(max_failures=5, window_s=60, clock=lambda: now[0])
    for _ in range(5):
        assert throttle.retry_after("a") is None
        throttle.failed("a")
        now[0] += 1
    assert throttle.retry_after("a") == 55
    assert throttle.retry_after("b") is None  # per client
    now[0] += 55
    assert throttle.retry_after("a") is None  # the first failure left the window


def test_a_success_forgets_the_failures_and_memory_stays_bounded() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=60, max_clients=3)
    throttle.failed("a")
    throttle.succeeded("a")
    throttle.failed("a")
    assert throttle.retry_after("a") is None
    for client in ("b", "c", "d", "e"):
        throttle.failed(client)
    assert len(throttle._failures) == 3


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    settings = load_settings(trusted_proxies="10.0.0.5, 172.16.0.0/12,::1")
    assert settings.trusted_proxies == ("10.0.0.5", "172.16.0.0/12", "::1")
    with pytest.raises(ConfigError, match=r"MIRROR_TRUSTED_PROXIES: 'proxy\.local' is not an IP"):
        load_settings(trusted_proxies="proxy.local")
    with pytest.raises(ConfigError, match="MIRROR_PUBLIC_URL: must start with http"):
        load_settings(public_url="mirror.example.org")
