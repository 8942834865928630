"""The one in-process JVM the JPype backend talks through."""

from __future__ import annotations

import threading

import jpype

__all__ = ["ensure_jvm"]

_lock = threading.Lock()


def ensure_jvm(response_timeout_seconds: float) -> None:
    """Start the client JVM once; RMI calls that get no answer fail after `response_timeout_seconds`."""
    with _lock:
        if jpype.isJVMStarted():
            return
        millis = int(max(response_timeout_seconds, 1.0) * 1000)
        jpype.startJVM(
            "-Xmx128m",
            "-Xrs",
            "-Djava.awt.headless=true",
            f"-Dsun.rmi.transport.tcp.responseTimeout={millis}",
            f"-Dsun.rmi.transport.connectionTimeout={millis}",
            f"-Dsun.rmi.transport.tcp.handshakeTimeout={millis}",
            "-Dsun.rmi.dgc.client.gcInterval=3600000",
            convertStrings=True,
        )
