"""The StreamingQueryListener that feeds `SparkMetrics`, and its `/metrics` endpoint in the driver.

    from spark_listeners import CdcMetricsListener, decode_events, instrument
    listener = CdcMetricsListener.attach(spark, port=10122)      # /metrics on every interface, port 10122
    events = instrument(decode_events(kafka_records))             # same rows, observed
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server
from pyspark.sql.streaming.listener import StreamingQueryListener

from cdcwatch.spark import DEFAULT_METRICS_ADDRESS, PUSH_JOB
from spark_listeners.instrument import OBSERVATION, SUMMARIES
from spark_listeners.metrics import SparkMetrics
from spark_listeners.observation import merge_summaries

__all__ = ["CdcMetricsListener"]

log = logging.getLogger("cdcwatch.spark")


class CdcMetricsListener(StreamingQueryListener):
    """Records query starts, progress (with the cdcwatch observation) and terminations."""

    def __init__(self, metrics: SparkMetrics | None = None, pushgateway: str | None = None,
                 push_job: str = PUSH_JOB, push_instance: str | None = None) -> None:
        self.metrics = metrics or SparkMetrics()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.metrics)
        self._names: dict[str, str] = {}
        self._pushgateway = pushgateway
        self._push_job = push_job
        self._push_group = {"instance": push_instance} if push_instance else {}
        """The Pushgateway group besides the job: each push replaces its whole group, so the drivers of two
        applications pushing under one job alone would replace each other's metrics."""
        self._push_pending = threading.Event()
        if pushgateway:
            threading.Thread(target=self._pusher, args=(pushgateway,), name="cdcwatch-push", daemon=True).start()

    @classmethod
    def attach(cls, spark: Any, port: int | None = None, address: str = DEFAULT_METRICS_ADDRESS,
               pushgateway: str | None = None, metrics: SparkMetrics | None = None,
               push_job: str = PUSH_JOB) -> CdcMetricsListener:
        """A listener added to `spark.streams`, serving /metrics on address:port when a port is given (by default
        on every interface, so Prometheus can scrape the driver from another host; "127.0.0.1" or the driver's
        own address restricts it), and pushing to `pushgateway` (host:port or URL) when given, under `push_job` and
        the application's name (`spark.app.name`) as `instance`."""
        conf = getattr(spark, "conf", None)
        listener = cls(metrics, pushgateway, push_job, conf.get("spark.app.name", None) if conf is not None else None)
        if port is not None:
            start_http_server(port, addr=address, registry=listener.registry)
        spark.streams.addListener(listener)
        return listener

    def _name(self, event: Any) -> str:
        key = str(event.id)
        name = getattr(event, "name", None)
        if name:
            self._names[key] = name
        return self._names.get(key, key)

    def onQueryStarted(self, event: Any) -> None:
        self.metrics.started(self._name(event))
        self._push()

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        observed_row = progress.observedMetrics.get(OBSERVATION) if progress.observedMetrics else None
        observed = merge_summaries(observed_row[SUMMARIES]) if observed_row is not None else None
        self.metrics.progress(self._name(progress), json.loads(progress.json), observed)
        self._push()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.metrics.terminated(self._name(event), event.exception)
        self._push()

    def _push(self) -> None:
        if self._pushgateway:
            self._push_pending.set()

    def _pusher(self, gateway: str) -> None:
        """Pushes off the listener thread; a slow or down Pushgateway never holds up Spark."""
        while True:
            self._push_pending.wait()
            self._push_pending.clear()
            try:
                push_to_gateway(gateway, job=self._push_job, grouping_key=self._push_group, registry=self.registry,
                                timeout=5)
            except Exception as exc:  # the next progress pushes again
                log.warning("push to %s failed: %s", gateway, exc)
