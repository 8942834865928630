"""The one in-process JVM the JPype backend talks through."""

from __future__ import annotations

import threading

import jpype

__all__ = ["ensure_jvm", "set_response_timeout"]

_lock = threading.Lock()
_response_timeout_seconds = 10.0
IDLE_CONNECTION_SECONDS = 600
"""How long an idle RMI connection is kept for reuse: longer than any scrape interval, so a scrape does not
open new connections (RMI's default of 15 s is shorter than many intervals)."""


def set_response_timeout(seconds: float) -> None:
    """How long an unanswered RMI call may block (JVM-wide, fixed when the JVM starts)."""
    global _response_timeout_seconds
    _response_timeout_seconds = max(seconds, 1.0)


def ensure_jvm() -> None:
    """Start the client JVM once; RMI calls that get no answer fail after the response timeout."""
    with _lock:
        if jpype.isJVMStarted():
            return
        millis = int(_response_timeout_seconds * 1000)
        jpype.startJVM(
            "-Xmx128m",
            "-Xrs",
            "-Djava.awt.headless=true",
            f"-Dsun.rmi.transport.tcp.responseTimeout={millis}",
            f"-Dsun.rmi.transport.connectionTimeout={IDLE_CONNECTION_SECONDS * 1000}",
            f"-Dsun.rmi.transport.tcp.handshakeTimeout={millis}",
            "-Dsun.rmi.dgc.client.gcInterval=3600000",
            convertStrings=True,
        )
