"""Prometheus, Alertmanager and a webhook receiver on 127.0.0.1 (Debian's packages), stopped by PID."""

from __future__ import annotations

import http.server
import json
import math
import subprocess
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devstack.procs import ServerProcess, free_port, port_open, require_binary

__all__ = ["AlertmanagerServer", "Notification", "PrometheusServer", "Pushgateway", "Scrape", "WebhookReceiver"]


class _Process:
    dir: Path
    port: int
    server: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.server.process if self.server else None

    def _spawn(self, command: Sequence[str], log_name: str, what: str, ready_path: str, timeout: float = 60) -> None:
        import urllib.request

        def ready() -> bool:
            if not port_open(self.port):
                return False
            with urllib.request.urlopen(self.url + ready_path, timeout=2) as response:
                return response.status == 200

        self.dir.mkdir(parents=True, exist_ok=True)
        self.server = ServerProcess(what, self.dir / log_name)
        self.server.start(command, ready, timeout, cwd=self.dir)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(20)


@dataclass(frozen=True)
class Scrape:
    """One scrape of one target as Prometheus itself recorded it: the series it writes for every scrape."""

    instance: str
    timestamp: float
    """When the scrape started (the samples' timestamp, Unix seconds to the millisecond)."""
    up: float
    duration: float
    """`scrape_duration_seconds`: the request until the whole answer was read (and decompressed)."""
    samples: float
    """`scrape_samples_scraped`."""


class PrometheusServer(_Process):
    """Scrapes `jobs` (job name → host:port targets) every `interval`, evaluates `rule_files`, alerts `alertmanager`.

    The scrape timeout is the interval, unless `default_timeout`: then the configuration leaves it out and Prometheus'
    own default applies (10 s, or the interval where that is shorter: Prometheus refuses a timeout longer than the
    interval). Every other scrape setting is Prometheus' default, its Accept header included."""

    def __init__(self, state_dir: Path, jobs: dict[str, list[str]], rule_files: Sequence[Path] = (),
                 alertmanager: str | None = None, interval: str = "1s", default_timeout: bool = False) -> None:
        self.dir = state_dir
        self.port = free_port()
        self.config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval,
                       **({} if default_timeout else {"scrape_timeout": interval})},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]} for job, targets in jobs.items()],
        }
        if alertmanager:
            self.config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}

    def _write_config(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config), encoding="utf-8")
        return config

    def start(self) -> None:
        binary = require_binary("prometheus", "prometheus")
        config = self._write_config()
        self._spawn([binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle"],
                    "prometheus.log", "Prometheus", "/-/ready")

    def set_jobs(self, jobs: dict[str, list[str]]) -> None:
        """Scrape `jobs` from now on instead (the other settings kept): the configuration written again and, when
        Prometheus runs, reloaded (`/-/reload` answers once the new configuration is applied; jobs left out stop
        being scraped, their series marked stale)."""
        self.config["scrape_configs"] = [{"job_name": job, "static_configs": [{"targets": targets}]}
                                         for job, targets in jobs.items()]
        self._write_config()
        if self.server is not None and self.server.alive:
            request = urllib.request.Request(self.url + "/-/reload", data=b"", method="POST")
            with urllib.request.urlopen(request, timeout=60) as response:
                if response.status != 200:
                    raise RuntimeError(f"Prometheus did not reload its configuration: {response.status}")

    def raw(self, selector: str, since: float) -> dict[frozenset[tuple[str, str]], list[tuple[float, float]]]:
        """Every sample of the series `selector` picks with a timestamp at or after `since` (Unix seconds), as
        stored (a range selector evaluated now: no interpolation, no lookback), by the series' labels."""
        from cdcwatch.promapi import PrometheusApi

        now = time.time()
        seconds = max(1, math.ceil(now - since) + 1)
        result = PrometheusApi(self.url).get("/api/v1/query", query=f"{selector}[{seconds}s]", time=f"{now:.3f}")["result"]
        return {frozenset(series["metric"].items()): [(float(t), float(v)) for t, v in series["values"] if float(t) >= since]
                for series in result}

    def scrapes(self, job: str, since: float) -> list[Scrape]:
        """The scrapes of `job`'s targets that started at or after `since`, oldest first, each with the `up`,
        `scrape_duration_seconds` and `scrape_samples_scraped` Prometheus wrote for it."""
        found: dict[tuple[str, float], dict[str, float]] = {}
        for metric in ("up", "scrape_duration_seconds", "scrape_samples_scraped"):
            for labels, points in self.raw(f'{metric}{{job="{job}"}}', since).items():
                instance = dict(labels)["instance"]
                for timestamp, number in points:
                    found.setdefault((instance, timestamp), {})[metric] = number
        return sorted((Scrape(instance, timestamp, got.get("up", math.nan), got.get("scrape_duration_seconds", math.nan),
                              got.get("scrape_samples_scraped", math.nan))
                       for (instance, timestamp), got in found.items()), key=lambda s: (s.timestamp, s.instance))


class AlertmanagerServer(_Process):
    """Routes every alert to one webhook, at once (group_wait 1s), resolved notifications included."""

    def __init__(self, state_dir: Path, webhook_url: str, inhibit_rules: list[dict[str, Any]] | None = None) -> None:
        self.dir = state_dir
        self.port = free_port()
        self.webhook_url = webhook_url
        self.inhibit_rules = inhibit_rules or []

    def start(self) -> None:
        binary = require_binary("prometheus-alertmanager", "prometheus-alertmanager")
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "alertmanager.yml"
        config.write_text(yaml.safe_dump({
            "route": {"receiver": "webhook", "group_by": ["alertname"], "group_wait": "1s", "group_interval": "1s",
                      "repeat_interval": "1h"},
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": self.webhook_url, "send_resolved": True}]}],
            "inhibit_rules": self.inhibit_rules,
        }), encoding="utf-8")
        self._spawn([binary, f"--config.file={config}", f"--storage.path={self.dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
                    "alertmanager.log", "Alertmanager", "/-/ready")


class Pushgateway(_Process):
    """Prometheus' Pushgateway, in memory only."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.port = free_port()

    def start(self) -> None:
        binary = require_binary("prometheus-pushgateway", "prometheus-pushgateway")
        self._spawn([binary, f"--web.listen-address=127.0.0.1:{self.port}", "--persistence.file="],
                    "pushgateway.log", "Pushgateway", "/-/ready")


@dataclass
class Notification:
    """One alert of one webhook notification."""

    received: float
    status: str  # firing | resolved
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records Alertmanager webhook notifications (and appends them to `log`)."""

    def __init__(self, log: Path | None = None) -> None:
        self.notifications: list[Notification] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver._record(json.loads(body or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.log = log
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/alerts"

    def _record(self, body: dict[str, Any]) -> None:
        now = time.time()
        with self._lock:
            for alert in body.get("alerts", []):
                notification = Notification(now, alert.get("status", ""), alert.get("labels", {}), alert.get("annotations", {}))
                self.notifications.append(notification)
                if self.log is not None:
                    with open(self.log, "a", encoding="utf-8") as out:
                        out.write(json.dumps(notification.__dict__) + "\n")

    def find(self, status: str, **labels: str) -> Notification | None:
        with self._lock:
            return next((n for n in self.notifications
                         if n.status == status and all(n.labels.get(k) == v for k, v in labels.items())), None)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
