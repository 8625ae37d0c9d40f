"""The /metrics endpoint: prometheus_client's exposition on an HTTP(S) server thread of its own.

With TLS the scraper must present a certificate from the site's CA, and only `admin:` and
`monitor:` identities may read (vnode_sync.security.authorization.authorize_metrics_reader): the
page names every user and its rates, which a `user:` may not see. Each connection's TLS handshake
runs on that connection's thread with a deadline, so a client that stalls holds no other scrape.
"""

import http.server
import logging
import socket
import ssl
import threading
from urllib.parse import urlparse

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.exposition import MetricsHandler

from vnode_sync.errors import Unavailable, VNodeSyncError
from vnode_sync.security.authorization import authorize_metrics_reader
from vnode_sync.security.identity import parse_common_name
from vnode_sync.security.tls import TlsFiles, server_ssl_context

log = logging.getLogger(__name__)

PATH = "/metrics"
# Counters and histograms would each add a `_created` series (when it was made): noise here, and twice the series.
disable_created_metrics()
# A connection that has not finished its handshake or request in this long is closed.
CONNECTION_TIMEOUT_SECONDS = 10.0


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    ssl_context: ssl.SSLContext | None = None

    def __init__(self, address: tuple[str, int], handler, family: int):
        self.address_family = family
        super().__init__(address, handler)

    def finish_request(self, request, client_address) -> None:
        request.settimeout(CONNECTION_TIMEOUT_SECONDS)
        if self.ssl_context is not None:
            try:
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                log.info("metrics: TLS handshake with %s failed: %s", client_address[0], e)
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:
        log.debug("metrics: connection from %s ended with an error", client_address[0], exc_info=True)


class _Handler(MetricsHandler):
    def do_GET(self) -> None:
        if urlparse(self.path).path != PATH:
            self._refuse(404, f"not found: the metrics are at {PATH}")
            return
        reason = self._refusal()
        if reason:
            self._refuse(403, reason)
            return
        super().do_GET()

    def _refusal(self) -> str | None:
        if not isinstance(self.connection, ssl.SSLSocket):
            return None
        subject = dict(pair for rdn in (self.connection.getpeercert() or {}).get("subject", ()) for pair in rdn)
        peer = f"{self.client_address[0]}:{self.client_address[1]}"
        try:
            authorize_metrics_reader(parse_common_name(subject.get("commonName", ""), peer))
        except VNodeSyncError as e:
            return str(e)
        return None

    def _refuse(self, code: int, reason: str) -> None:
        body = (reason + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class MetricsEndpoint:
    """Serves `registry` at http(s)://`address`/metrics on a daemon thread; `port` is the bound port."""

    def __init__(self, address: str, registry: CollectorRegistry, tls: TlsFiles | None = None):
        host, port = _split(address)
        try:
            family, *_, sockaddr = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
            self._server = _Server(sockaddr[:2], _Handler.factory(registry), family)
        except OSError as e:
            raise Unavailable(f"metrics: cannot listen on {address!r}: {e.strerror or e}") from None
        self._server.ssl_context = server_ssl_context(tls) if tls is not None else None
        self.port = self._server.server_address[1]
        self.address = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def start(self) -> "MetricsEndpoint":
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
