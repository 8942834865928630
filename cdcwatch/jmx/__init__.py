"""JMX access: one small client interface, two backends."""

from __future__ import annotations

from cdcwatch.config import JmxSettings
from cdcwatch.jmx.client import JmxClient, JmxError, JmxValue, MBean, parse_object_name

__all__ = ["JmxClient", "JmxError", "JmxValue", "MBean", "make_client", "parse_object_name"]


def make_client(settings: JmxSettings, timeout_seconds: float) -> JmxClient:
    """The client for `settings.backend`."""
    if settings.backend == "jmxquery":
        from cdcwatch.jmx.jmxquery_client import JmxqueryClient

        return JmxqueryClient(settings, timeout_seconds)
    from cdcwatch.jmx.jpype_client import JpypeClient

    return JpypeClient(settings, timeout_seconds)
