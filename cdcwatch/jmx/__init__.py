"""JMX access: one small client interface, two backends."""

from __future__ import annotations

from cdcwatch.config import JmxSettings
from cdcwatch.jmx.client import (
    RUNTIME_BEAN,
    JmxClient,
    JmxError,
    JmxQuery,
    JmxValue,
    MBean,
    jvm_start_time_seconds,
    parse_object_name,
    pattern_matches,
)

__all__ = ["RUNTIME_BEAN", "JmxClient", "JmxError", "JmxQuery", "JmxValue", "MBean", "jvm_start_time_seconds",
           "jmx_address", "make_client", "parse_object_name", "pattern_matches"]


def jmx_address(settings: JmxSettings) -> str:
    """Where a JMX endpoint is, as an error names it: `host:port`, or the service URL given instead."""
    return f"{settings.host}:{settings.port}" if settings.host else settings.service_url


def make_client(settings: JmxSettings, timeout_seconds: float) -> JmxClient:
    """The client for `settings.backend`."""
    if settings.backend == "jmxquery":
        from cdcwatch.jmx.jmxquery_client import JmxqueryClient

        return JmxqueryClient(settings, timeout_seconds)
    from cdcwatch.jmx.jpype_client import JpypeClient

    return JpypeClient(settings, timeout_seconds)
