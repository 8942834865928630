"""The one in-process JVM the JPype backend talks through, and the trust its TLS connections use.

JMX over TLS goes through `javax.rmi.ssl.SslRMIClientSocketFactory`, for the RMI registry (the factory cdcwatch
passes) and for the connector server (the factory the server's stub carries). That factory takes no settings:
it uses the JVM-wide default `SSLContext`, and keeps the first socket factory it got for the life of the JVM.
So cdcwatch installs one default SSLContext when the JVM starts, whose trust manager delegates to a trust
store it can swap: the JVM's default CAs plus the certificates of every `jmx.ca_file` configured (all targets'
CA files are trusted for every TLS JMX target: one JVM, one trust store). A configuration reload swaps it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterable
from typing import Any, cast

import jpype

__all__ = ["ca_file_problem", "ensure_jvm", "set_response_timeout", "trust_ca_files", "trusted_ca_files"]

_lock = threading.Lock()
_response_timeout_seconds = 10.0
IDLE_CONNECTION_SECONDS = 600
"""How long an idle RMI connection is kept for reuse: longer than any scrape interval, so a scrape does not
open new connections (RMI's default of 15 s is shorter than many intervals)."""
_delegate: list[Any] = []
"""The trust manager the default SSLContext delegates to (one element, swapped whole)."""
_ca_files: frozenset[str] = frozenset()
_ca_problems: dict[str, str] = {}
_override = cast("Callable[[Callable[..., Any]], Callable[..., Any]]", jpype.JOverride)


def set_response_timeout(seconds: float) -> None:
    """How long an unanswered RMI call may block (JVM-wide, fixed when the JVM starts)."""
    global _response_timeout_seconds
    _response_timeout_seconds = max(seconds, 1.0)


def ensure_jvm() -> None:
    """Start the client JVM once; RMI calls that get no answer fail after the response timeout. Its default
    SSLContext trusts what `trust_ca_files` last set (the JVM's default CAs until then). A small heap that
    grows as needed, collected by the serial collector: a JMX client's heap stays small, and G1's own
    structures cost the exporter's RSS 15–40 MiB more at 10 targets."""
    with _lock:
        if jpype.isJVMStarted():
            return
        millis = int(_response_timeout_seconds * 1000)
        jpype.startJVM(
            "-Xms8m",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-Xrs",
            "-Djava.awt.headless=true",
            f"-Dsun.rmi.transport.tcp.responseTimeout={millis}",
            f"-Dsun.rmi.transport.connectionTimeout={IDLE_CONNECTION_SECONDS * 1000}",
            f"-Dsun.rmi.transport.tcp.handshakeTimeout={millis}",
            "-Dsun.rmi.dgc.client.gcInterval=3600000",
            convertStrings=True,
        )
        _unlink_garbage_collectors()
        _install_default_context()


def _unlink_garbage_collectors() -> None:
    """Stop JPype running a full Python garbage collection after every Java one.

    JPype links the two collectors: its reference-queue thread notices each Java collection and then runs
    `gc.collect()` under the GIL, unless a flag says one is pending, which its callback in `gc.callbacks` clears
    at every Python collection. A JMX client collects young garbage every few scrapes, and a full collection of
    an exporter's Python objects took 30 ms of CPU, during which no other thread ran: 40 % of the client's CPU
    per scrape. Without the callback the flag stays set after the first one, so Java collections no longer
    set off Python ones; Python's own collector runs as before. (JPype's sources, native/common/jp_gc.cpp.)"""
    linked = getattr(getattr(jpype, "_jpype", None), "_collect", None)
    gc.callbacks[:] = [callback for callback in gc.callbacks if callback is not linked]


def trust_ca_files(ca_files: Iterable[str]) -> None:
    """Trust the JVM's default CAs and the certificates (PEM) in `ca_files`, for every TLS connection of the JVM
    from now on (connections already open stay). A file that cannot be read is left out and remembered:
    `ca_file_problem` tells why."""
    global _ca_files
    ensure_jvm()
    wanted = frozenset(ca_files)
    with _lock:
        if wanted == _ca_files and _delegate:
            return
        problems: dict[str, str] = {}
        _delegate[:] = [_trust_manager(sorted(wanted), problems)]
        _ca_files = wanted
        _ca_problems.clear()
        _ca_problems.update(problems)


def trusted_ca_files() -> frozenset[str]:
    """The CA files `trust_ca_files` last set (readable or not)."""
    with _lock:
        return _ca_files


def ca_file_problem(ca_file: str) -> str | None:
    """Why `ca_file` is not trusted (it is not among the trusted files, or cannot be read), or None if it is."""
    with _lock:
        if ca_file not in _ca_files:
            return "it is not among the CA files the exporter's JVM trusts"
        return _ca_problems.get(ca_file)


def _trust_manager(ca_files: list[str], problems: dict[str, str]) -> Any:
    KeyStore = jpype.JClass("java.security.KeyStore")
    CertificateFactory = jpype.JClass("java.security.cert.CertificateFactory")
    FileInputStream = jpype.JClass("java.io.FileInputStream")
    store = KeyStore.getInstance("PKCS12")
    store.load(None, None)
    for index, issuer in enumerate(_x509(_factory(None)).getAcceptedIssuers()):
        store.setCertificateEntry(f"default-{index}", issuer)
    for path in ca_files:
        try:
            stream = FileInputStream(path)
            try:
                certificates = list(CertificateFactory.getInstance("X.509").generateCertificates(stream))
            finally:
                stream.close()
            if not certificates:
                raise ValueError("no certificate in it")
        except (jpype.JException, ValueError) as exc:
            problems[path] = _one_line(exc)
            continue
        for index, certificate in enumerate(certificates):
            store.setCertificateEntry(f"{path}#{index}", certificate)
    return _x509(_factory(store))


def _factory(store: Any) -> Any:
    TrustManagerFactory = jpype.JClass("javax.net.ssl.TrustManagerFactory")
    factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm())
    factory.init(jpype.JObject(store, jpype.JClass("java.security.KeyStore")))
    return factory


def _x509(factory: Any) -> Any:
    X509TrustManager = jpype.JClass("javax.net.ssl.X509TrustManager")
    return next(m for m in factory.getTrustManagers() if isinstance(m, X509TrustManager))


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, jpype.JException):
        message = exc.getMessage()
        text = f"{exc.getClass().getSimpleName()}: {message}" if message else str(exc.getClass().getSimpleName())
    else:
        text = str(exc)
    return (text.splitlines() or ["unknown error"])[0][:300]


def _install_default_context() -> None:
    """Make the JVM's default SSLContext trust whatever `_delegate` holds (called once, before any TLS use)."""

    @jpype.JImplements("javax.net.ssl.X509TrustManager")
    class DelegatingTrustManager:
        @_override
        def checkClientTrusted(self, chain: Any, auth_type: Any) -> None:
            _delegate[0].checkClientTrusted(chain, auth_type)

        @_override
        def checkServerTrusted(self, chain: Any, auth_type: Any) -> None:
            _delegate[0].checkServerTrusted(chain, auth_type)

        @_override
        def getAcceptedIssuers(self) -> Any:
            return _delegate[0].getAcceptedIssuers()

    if not _delegate:
        _delegate.append(_x509(_factory(None)))
    SSLContext = jpype.JClass("javax.net.ssl.SSLContext")
    TrustManager = jpype.JClass("javax.net.ssl.TrustManager")
    context = SSLContext.getInstance("TLS")
    context.init(None, jpype.JArray(TrustManager)([DelegatingTrustManager()]), None)
    SSLContext.setDefault(context)
