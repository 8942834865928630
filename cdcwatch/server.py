"""The HTTP(S) endpoint: `/metrics`, a landing page at `/`, 404 elsewhere; TLS and basic auth per web config."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

from cdcwatch import __version__
from cdcwatch.exporter import Exporter
from cdcwatch.exposition import metrics_app
from cdcwatch.web import WebConfig, require_basic_auth, server_ssl_context

__all__ = ["build_app", "make_http_server"]

_LANDING = f"""<!doctype html>
<html><head><title>cdcwatch</title></head>
<body><h1>cdcwatch {__version__}</h1>
<p>Prometheus exporter for change-data-capture pipelines.</p>
<p><a href="/metrics">Metrics</a></p></body></html>
""".encode()


def build_app(exporter: Exporter) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving the exporter's metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    metrics = metrics_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body: Iterable[bytes] = metrics(environ, start_response)
            return body
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [_LANDING]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; metrics are at /metrics\n"]

    return app


def make_http_server(address: str, port: int, exporter: Exporter, web: WebConfig | None = None,
                     web_dir: Path | None = None) -> WSGIServer:
    """A threaded HTTP server bound to address:port (IPv4 or IPv6); HTTPS and basic auth per `web`."""
    family, _, _, _, sockaddr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    app = build_app(exporter)
    if web is not None and web.basic_auth_users:
        app = require_basic_auth(app, web.basic_auth_users)
    server = make_server(str(sockaddr[0]), port, app, Server, handler_class=_SilentHandler)
    if web is not None and web.tls_server_config is not None:
        context = server_ssl_context(web.tls_server_config, web_dir or Path("."))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    return server
