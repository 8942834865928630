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
           "make_client", "parse_object_name", "pattern_matches"]


def make_client(settings: JmxSettings, timeout_seconds: float) -> JmxClient:
    """The client for `settings.backend`."""
    if settings.backend == "jmxquery":
        from cdcwatch.jmx.jmxquery_client import JmxqueryClient

        return JmxqueryClient(settings, timeout_seconds)
    from cdcwatch.jmx.jpype_client import JpypeClient

    return JpypeClient(settings, timeout_seconds)
