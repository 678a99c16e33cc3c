"""Forwarded headers, believed only from the proxies MIRROR_TRUSTED_PROXIES names.

Behind an https reverse proxy `mirror serve` sees plain http from the proxy's address;
the browser's scheme and host arrive in X-Forwarded-Proto/-Host/-Port and its address
in X-Forwarded-For. werkzeug's ProxyFix applies them (one proxy hop: the last value of
each), but only to requests whose peer is a trusted proxy: anyone else could send those
headers to pass the login's Origin check or dodge the per-client login throttle, so
from anyone else they are removed (waitress's own clearing is turned off in favour of
this: it trusts one address or all, no networks).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from werkzeug.middleware.proxy_fix import ProxyFix

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_FORWARDED = ("HTTP_X_FORWARDED_", "HTTP_FORWARDED")


class TrustedProxies:
    """A WSGI middleware: ProxyFix for requests from `networks`; from any other peer the
    forwarded headers are dropped."""

    def __init__(self, app: WSGIApplication, networks: Sequence[Network]) -> None:
        self.app = app
        self.fixed = ProxyFix(app, x_for=1, x_proto=1, x_host=1, x_port=1)
        self.networks = networks

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self.trusts(environ.get("REMOTE_ADDR", "")):
            return self.fixed(environ, start_response)
        for name in [n for n in environ if n.startswith(_FORWARDED)]:
            del environ[name]
        return self.app(environ, start_response)

    def trusts(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)


def behind_proxies(app: WSGIApplication, proxies: Sequence[str]) -> TrustedProxies:
    """`app` honouring the forwarded headers of `proxies` (IPs or CIDRs) and no one else's."""
    networks = [ipaddress.ip_network(proxy, strict=False) for proxy in proxies]
    return TrustedProxies(app, networks)
