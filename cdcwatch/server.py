"""`cdcwatch serve` once its flags are read: the HTTP(S) endpoint (`/metrics`, a landing page at `/`, the health
endpoints `/-/healthy` and `/-/ready`, 404 elsewhere; TLS and basic auth per web config) and what acts on it
while it runs: SIGHUP and the config file watcher reload the configuration, SIGTERM and SIGINT stop serving."""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from cdcwatch import __version__
from cdcwatch.config import Config
from cdcwatch.exporter import Exporter, budget_of, scrape_budget
from cdcwatch.exposition import ANSWER_PARTS, metrics_app
from cdcwatch.families import FamilyBuilder
from cdcwatch.reload import ConfigReloader
from cdcwatch.self_metrics import METRICS_RESPONSE_SECONDS_TOTAL, METRICS_RESPONSES_TOTAL
from cdcwatch.web import WebConfig, load_web_config, require_basic_auth, server_ssl_context

__all__ = ["HEALTHY_PATH", "READY_PATH", "AnswerStats", "ListenError", "Service", "build_app", "make_http_server", "serve",
           "tune_interpreter"]

log = logging.getLogger("cdcwatch")

_LANDING = f"""<!doctype html>
<html><head><title>cdcwatch</title></head>
<body><h1>cdcwatch {__version__}</h1>
<p>Prometheus exporter for change-data-capture pipelines.</p>
<p><a href="/metrics">Metrics</a></p></body></html>
""".encode()


HEALTHY_PATH = "/-/healthy"
"""200 while the process serves HTTP: a liveness probe. Touches no target (a scrape of /metrics asks every one)."""
READY_PATH = "/-/ready"
"""200 while a configuration is loaded and the endpoint answers scrapes, 503 once it is shutting down: a readiness
probe. Never depends on the targets: an exporter whose targets are down must still be scraped (`cdcwatch_up 0`)."""
HEALTH_PATHS = frozenset({HEALTHY_PATH, READY_PATH})
"""Exempt from basic auth (not from TLS): they say nothing but the status, and a Kubernetes probe cannot send a
password without writing it into the pod spec."""


def _text(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [text.encode()]


class AnswerStats:
    """How long the /metrics answers written so far took, by format and part (collect, render, compress, send): the
    whole scrape as the server sees it, where `cdcwatch_scrape_duration_seconds` is each target's collection alone.
    Served after the exporter's own metrics, so a scrape shows the answers before it; a format appears once answered
    (a few formats, four parts each: the series are bounded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[str, int] = {}
        self._seconds: dict[tuple[str, str], float] = {}

    def record(self, format: str, parts: dict[str, float]) -> None:
        with self._lock:
            self._answers[format] = self._answers.get(format, 0) + 1
            for part in ANSWER_PARTS:
                key = (format, part)
                self._seconds[key] = self._seconds.get(key, 0.0) + parts.get(part, 0.0)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        with self._lock:
            answers, seconds = dict(self._answers), dict(self._seconds)
        builder = FamilyBuilder()
        for format, count in sorted(answers.items()):
            builder.add_spec(METRICS_RESPONSES_TOTAL, float(count), format=format)
        for format in sorted(answers):
            for part in ANSWER_PARTS:
                builder.add_spec(METRICS_RESPONSE_SECONDS_TOTAL, seconds[(format, part)], format=format, part=part)
        return builder.families()


def build_app(exporter: Exporter, ready: Callable[[], bool] = lambda: True,
              stats: AnswerStats | None = None) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving the exporter's metrics, with the answers' own (`stats`), and the health endpoints; `ready()`
    is false while shutting down."""
    stats = stats if stats is not None else AnswerStats()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    registry.register(stats)
    metrics = metrics_app(registry, stats.record)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            with GC_PAUSED, scrape_budget(budget_of(environ.get("HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS"))):
                body: Iterable[bytes] = metrics(environ, start_response)
            return body
        if path == HEALTHY_PATH:
            return _text(start_response, "200 OK", "cdcwatch is healthy.\n")
        if path == READY_PATH:
            if ready():
                return _text(start_response, "200 OK", "cdcwatch is ready.\n")
            return _text(start_response, "503 Service Unavailable", "cdcwatch is shutting down.\n")
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [_LANDING]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; metrics are at /metrics\n"]

    return app


CLIENT_TIMEOUT_SECONDS = 30.0
"""How long one read or write to a client may wait: a client that stalls longer is disconnected."""


class _ConnectionsClosingServer(socketserver.ThreadingMixIn, WSGIServer):
    """A thread per connection, and `server_close()` closes the connections kept open between requests too."""

    daemon_threads = True  # threads not joined at close: ThreadingMixIn would otherwise keep every one in a list

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        with self.connections_lock:
            kept = list(self.connections)
        for connection in kept:  # their threads wake up to an ended connection and finish
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Http11ServerHandler(ServerHandler):
    """wsgiref's response writer, answering in HTTP/1.1 and saying whether the connection stays open.

    `complete`: the whole answer went out and said its length; else the connection must close (the client can
    only tell where such an answer ends, or that it was cut off, by the connection closing)."""

    http_version = "1.1"
    complete = False
    request_handler: _KeepAliveHandler

    def cleanup_headers(self) -> None:
        super().cleanup_headers()
        headers = self.headers  # type: ignore[attr-defined]
        requester = self.request_handler
        if "Content-Length" not in headers:
            requester.close_connection = True
        if requester.close_connection:
            headers["Connection"] = "close"
        elif requester.request_version == "HTTP/1.0":  # it asked to keep the connection: say it is kept
            headers["Connection"] = "keep-alive"

    def finish_response(self) -> None:
        super().finish_response()
        self.complete = True


class _KeepAliveHandler(WSGIRequestHandler):
    """wsgiref's request handler, which answers one request per connection, made to answer one after another on
    the same connection (HTTP/1.1 keep-alive, as Prometheus scrapes): a scrape then costs no new connection,
    thread or TLS handshake. The connection is closed, and the answer says so, when the client asks for it
    (HTTP/1.0 without keep-alive, `Connection: close`), after a request with a body (never read: it would be
    taken for the next request), a HEAD request (wsgiref answers it with a body), an answer without
    Content-Length or one cut off; and once the client sends nothing for `timeout` seconds, or the server
    closes."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: the body must not wait for an ACK

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: a scrape every few seconds would be most of the log."""

    def handle(self) -> None:
        self._answer()
        while not self.close_connection:
            try:
                self._answer()
            except OSError:  # the client went away or went quiet between requests: nothing to answer
                self.close_connection = True

    def _answer(self) -> None:
        self.close_connection = True  # until parse_request finds the client wants the connection kept
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline:
            return
        if len(self.raw_requestline) > 65536:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():  # it answered the error
            return
        if self.command == "HEAD" or self._has_body():
            self.close_connection = True
        handler = _Http11ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(),  # type: ignore[arg-type]
                                       multithread=True)
        handler.request_handler = self  # also wsgiref's back-pointer for logging
        handler.run(self.server.get_app())  # type: ignore[attr-defined]
        if not handler.complete:
            self.close_connection = True

    def _has_body(self) -> bool:
        """Whether the request may carry a body (or headers that do not parse, which could hide one)."""
        headers = self.headers
        return bool(headers.defects) or headers.get_all("Content-Length", ["0"]) != ["0"] or \
            "Transfer-Encoding" in headers


def make_http_server(address: str, port: int, exporter: Exporter, web: WebConfig | None = None,
                     web_dir: Path | None = None, client_timeout: float = CLIENT_TIMEOUT_SECONDS,
                     ready: Callable[[], bool] = lambda: True) -> WSGIServer:
    """A threaded HTTP server bound to address:port (IPv4 or IPv6); HTTPS and basic auth per `web` (the health
    endpoints answer without basic auth, over the same TLS).

    Every connection has its own thread, and the TLS handshake happens there too (not in the accepting
    thread), so a client that stalls, in the handshake, the request or reading the answer, holds up only
    itself, and only for `client_timeout`.
    """
    family, _, _, _, sockaddr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(_ConnectionsClosingServer):
        address_family = family

    class Handler(_KeepAliveHandler):
        timeout = client_timeout

    app = build_app(exporter, ready)
    if web is not None and web.basic_auth_users:
        app = _health_exempt(app, require_basic_auth(app, web.basic_auth_users))
    server = make_server(str(sockaddr[0]), port, app, Server, handler_class=Handler)
    if web is not None and web.tls_server_config is not None:
        context = server_ssl_context(web.tls_server_config, web_dir or Path("."))
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


def _health_exempt(app: Callable[..., Iterable[bytes]], guarded: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """`guarded` (behind basic auth), but `app` itself for the health endpoints."""

    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        return (app if environ.get("PATH_INFO") in HEALTH_PATHS else guarded)(environ, start_response)

    return dispatch


class ListenError(Exception):
    """The endpoint cannot listen where it was told to (address taken, no permission, no such address)."""


_Handler = Callable[[int, FrameType | None], Any] | int | None


class Service:
    """The exporter behind its HTTP endpoint, with the configuration reloader beside it.

    Construction reads the web config (ConfigError) and binds the endpoint (ListenError), so a bad setup fails
    before anything serves. `run()` serves until `shutdown()`, which SIGTERM and SIGINT call; SIGHUP reloads the
    configuration file, and so does a change of its content when `watch_interval` is not 0 (see ConfigReloader).
    """

    def __init__(self, config_path: str | Path, config: Config, address: str, port: int,
                 web_config_file: str | None = None, watch_interval: float = 0.0) -> None:
        web = load_web_config(web_config_file) if web_config_file else None
        self.config_path = Path(config_path)
        self.watch_interval = watch_interval
        self.exporter = Exporter.from_config(config)
        self.stopping = threading.Event()
        try:
            self.server = make_http_server(address, port, self.exporter, web,
                                           Path(web_config_file).parent if web_config_file else None,
                                           ready=lambda: not self.stopping.is_set())
        except OSError as exc:
            self.exporter.close()
            raise ListenError(f"cannot listen on {address}:{port}: {exc.strerror}") from None
        self.address = address
        self.reloader = ConfigReloader(config_path, self.exporter, config)

    @property
    def port(self) -> int:
        """The port listened on (the one asked for, or the one the system chose for 0)."""
        return int(self.server.server_port)

    def reload(self) -> None:
        """Reload the configuration file in the background (a signal handler must not block)."""
        threading.Thread(target=self.reloader.reload, name="cdcwatch-reload", daemon=True).start()

    def shutdown(self) -> None:
        """Stop serving: `run()` returns once the request in progress is answered. Safe from a signal handler."""
        self.stopping.set()
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self.reload()
        else:
            self.shutdown()

    def run(self) -> None:
        """Serve until shut down, with the signal handlers installed meanwhile (this must be the main thread);
        then close the endpoint and the exporter and put the previous handlers back."""
        previous: dict[signal.Signals, _Handler] = {}
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[signum] = signal.signal(signum, self._on_signal)
        try:
            if self.watch_interval:
                threading.Thread(target=self.reloader.watch, args=(self.stopping, self.watch_interval),
                                 name="cdcwatch-config-watch", daemon=True).start()
            host = f"[{self.address}]" if ":" in self.address else self.address
            log.info("cdcwatch %s serving http://%s:%d/metrics (reload: SIGHUP%s)", __version__, host, self.port,
                     f" or edit {self.config_path}" if self.watch_interval else "")
            self.server.serve_forever(poll_interval=0.5)
        finally:
            self.stopping.set()
            for restored, handler in previous.items():
                signal.signal(restored, handler)
            self.server.server_close()
            self.exporter.close()


GC_THRESHOLDS = (10_000, 10, 10)
"""The cyclic garbage collector's thresholds while serving (Python's default: 700, 10, 10), for the work done between
scrapes (a scrape pauses the collector: GcPause). At the default, a large scrape (41,000 series) set off one or two
full collections, 50–130 ms each. Memory is freed by reference counting either way; only cycles wait longer."""


class GcPause:
    """Keeps the cyclic garbage collector off while any /metrics answer is being made, and on again once none is.

    A scrape allocates tens of thousands of short-lived objects (a large Kafka cluster's commits, rows, label sets),
    none of them in a cycle: reference counting frees them all, and the collections they set off (two or three per
    scrape of 10,000 group partitions, about 10 ms of its CPU) find nothing to free. A cycle made meanwhile waits
    for the first collection after the answers are written. Concurrent answers share one pause; a collector
    someone else turned off stays off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if not self._answers:
                self._resume = gc.isenabled()
                gc.disable()
            self._answers += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._answers -= 1
            if not self._answers and self._resume:
                gc.enable()


GC_PAUSED = GcPause()

SWITCH_INTERVAL_SECONDS = 0.0005
"""How long a thread holding the GIL keeps it while another waits (Python's default: 5 ms). A collection's threads
mostly wait on a server (the Kafka message reads, JMX, SQL), and each time an answer arrives the thread needs the
GIL back: while another collection's Python work runs, that took up to 5 ms each, several times per read (about
10 ms of a Kafka scrape of 10,000 group partitions with offsets moving)."""


MALLOC_ARENAS = 2
"""How many malloc arenas glibc may keep (its default: 8 per core). Every thread that allocates gets an arena of its
own while there are fewer than that, and each keeps the memory it once held: the librdkafka clients' threads (a
dozen per cluster), the collections' and the connections' threads. Two arenas cut the resident memory at 10,000
group partitions by about 3 MiB; the threads mostly wait on servers, so they seldom contend for an arena. The
environment's MALLOC_ARENA_MAX, where set, is left as it is."""
_M_ARENA_MAX = -8  # glibc's malloc.h


def tune_interpreter() -> None:
    """The garbage collector's thresholds, the GIL's switch interval and the malloc arenas cdcwatch serves with (see
    above); before any collector starts its threads."""
    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    if "MALLOC_ARENA_MAX" not in os.environ and sys.platform == "linux":
        try:
            ctypes.CDLL(None).mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
        except (OSError, AttributeError):  # not glibc (musl has no mallopt arenas): nothing to tune
            pass


def serve(config_path: str | Path, config: Config, address: str, port: int, web_config_file: str | None = None,
          watch_interval: float = 0.0) -> None:
    """`cdcwatch serve`: serve `config` until SIGTERM or SIGINT (see Service); ConfigError or ListenError first
    when the web config is bad or the address cannot be bound."""
    tune_interpreter()
    Service(config_path, config, address, port, web_config_file, watch_interval).run()
