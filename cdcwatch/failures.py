"""Why a collection failed, in one line a user can act on; and the exception class a label may carry.

Every collector fails through a different client (JPype's JMX connector, jmxquery, librdkafka, urllib, psycopg,
PyMySQL), each with its own exception types and wording. `describe` reads any of them (the exception, its causes and
what a client wrapped) into one kind that says what the user checks first: nothing listens there (refused), the name
does not resolve (unknown host), no route to it (unreachable), no answer in time (timeout), the TLS handshake failed
(TLS), or the credentials were refused (authentication). The line names the target's address and the kind, then the
first thing to check, then the client's own first line. Only the standard library is imported here: the Spark
listener and the no-extras install use it too.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["FailureKind", "KnownExceptions", "TargetFailure", "classify", "describe", "exception_class"]


class FailureKind(Enum):
    """What failed, in the order a user rules causes out; the value is the words the error line uses."""

    UNKNOWN_HOST = "unknown host"
    REFUSED = "connection refused"
    UNREACHABLE = "no route to host"
    TLS = "TLS failed"
    AUTHENTICATION = "authentication failed"
    TIMEOUT = "timed out"
    OTHER = "failed"

    @property
    def label(self) -> str:
        """The value of the `failure` label (`cdcwatch_target_failure_info`): a word, not a phrase."""
        return self.name.lower()


_HINTS = {
    FailureKind.UNKNOWN_HOST: "check the host name's spelling and that it resolves from where cdcwatch runs",
    FailureKind.REFUSED: "check that {service} is running and listening on this port",
    FailureKind.UNREACHABLE: "check the address and the network route (firewall, VPN, security group)",
    FailureKind.TLS: "check the CA file in the config (ca_file, sslrootcert, ssl_ca) and that the endpoint speaks TLS",
    FailureKind.AUTHENTICATION: "check the user and password (and the variable the password reads) and the account's "
                                "grants",
    FailureKind.TIMEOUT: "check that {service} is up and not overloaded and that a firewall does not drop the "
                         "packets; or raise timeout_seconds",
    FailureKind.OTHER: "",
}

# what the clients say, as text: librdkafka's and libpq's messages, Java exceptions already turned into text
_TEXT_KINDS = (
    (FailureKind.UNKNOWN_HOST, re.compile(
        r"UnknownHost|name or service not known|nodename nor servname|failed to resolve|could not translate host "
        r"name|temporary failure in name resolution|no address associated|getaddrinfo|Errno -[23]\b", re.IGNORECASE)),
    (FailureKind.REFUSED, re.compile(r"connection refused|ConnectException|Errno 111\b", re.IGNORECASE)),
    (FailureKind.UNREACHABLE, re.compile(r"no route to host|network is unreachable|NoRouteToHost", re.IGNORECASE)),
    (FailureKind.TLS, re.compile(r"\bSSL\b|\bTLS\b|certificate|handshake|SSLException|PKIX", re.IGNORECASE)),
    (FailureKind.AUTHENTICATION, re.compile(
        r"authentication|access denied|password|unauthori[sz]ed|forbidden|HTTP 40[13]\b|SecurityException|"
        r"_AUTHENTICATION|SASL", re.IGNORECASE)),
    (FailureKind.TIMEOUT, re.compile(r"timed? ?out|timeout|deadline passed|_TIMED_OUT", re.IGNORECASE)),
)

_ERRNO_KINDS = {errno.ECONNREFUSED: FailureKind.REFUSED, errno.EHOSTUNREACH: FailureKind.UNREACHABLE,
                errno.ENETUNREACH: FailureKind.UNREACHABLE, errno.ETIMEDOUT: FailureKind.TIMEOUT}


class TargetFailure(Exception):
    """A failure already described: a collector raises it where it knows the failing part's address better than
    the target's (a Connect worker's JMX endpoint beside its REST API)."""

    def __init__(self, kind: FailureKind, address: str, detail: str, service: str = "the target",
                 hint: str | None = None) -> None:
        self.kind, self.address, self.detail, self.service, self.hint = kind, address, detail, service, hint
        super().__init__(self.line)

    @property
    def line(self) -> str:
        """`address: what failed: the client's words; first thing to check` (the kind's, unless the failure knows
        better)."""
        hint = self.hint if self.hint is not None else _HINTS[self.kind].format(service=self.service)
        return f"{self.address}: {self.kind.value}: {self.detail}" + (f"; {hint}" if hint else "")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and everything it wraps: causes, contexts, PyMySQL's `original_exception`, urllib's `reason`,
    a KafkaException's KafkaError (not an exception: read through its text)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for inner in (getattr(current, "original_exception", None), getattr(current, "reason", None),
                      current.__cause__, current.__context__):
            if isinstance(inner, BaseException):
                pending.append(inner)


def _typed_kind(exc: BaseException) -> FailureKind | None:
    """The kind the standard library's exception types say outright."""
    if isinstance(exc, TargetFailure):
        return exc.kind
    if isinstance(exc, socket.gaierror):
        return FailureKind.UNKNOWN_HOST
    if isinstance(exc, ConnectionRefusedError):
        return FailureKind.REFUSED
    if isinstance(exc, ssl.SSLError):
        return FailureKind.TLS
    if isinstance(exc, TimeoutError):
        return FailureKind.TIMEOUT
    if getattr(exc, "code", None) in (401, 403) and type(exc).__name__ == "HTTPError":
        return FailureKind.AUTHENTICATION
    if isinstance(exc, OSError) and exc.errno in _ERRNO_KINDS:
        return _ERRNO_KINDS[exc.errno]
    if str(getattr(exc, "sqlstate", "") or "").startswith("28"):  # PostgreSQL: invalid authorization
        return FailureKind.AUTHENTICATION
    if type(exc).__name__ == "OperationalError" and exc.args and exc.args[0] in (1044, 1045, 1698):  # MySQL
        return FailureKind.AUTHENTICATION
    return None


def _text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def classify(exc: BaseException) -> FailureKind:
    """What failed: the first kind a type in the chain says, else the first the chain's text says, else OTHER."""
    chain = list(_chain(exc))
    for current in chain:
        kind = _typed_kind(current)
        if kind is not None:
            return kind
    for kind, pattern in _TEXT_KINDS:
        if any(pattern.search(_text(current)) for current in chain):
            return kind
    return FailureKind.OTHER


def describe(exc: BaseException, address: str, service: str = "the target") -> TargetFailure:
    """The failure of a collection from `address`, described once; `service` is what the hint tells the user to check
    (the collector registry's words for its kind: `PostgreSQL`, `the Kafka broker`, ...)."""
    if isinstance(exc, TargetFailure):
        return exc
    detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return TargetFailure(classify(exc), address, detail, service)


OTHER = "other"
"""The `exception` label of a failure whose class could not be read."""

_QUALIFIED_CLASS = re.compile(r"([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+)")
_CLASS_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Exception|Error))\b")


@dataclass(frozen=True)
class KnownExceptions:
    """The fixed set of exception class names an `exception` label may take, so its values stay bounded."""

    names: frozenset[str]
    wrappers: frozenset[str] = frozenset()
    """Names that only wrap the cause (a Spark query's StreamingQueryException): read only when no other is named."""
    packages: Mapping[str, str] = field(default_factory=dict)
    """A package of exception classes → the name any class of it reads as (`psycopg.errors` → DatabaseError); a
    class of one of them wins over every name."""


def exception_class(text: str | None, known: KnownExceptions | None = None) -> str:
    """A bounded `exception` label value read from a failure's text, never free text; `other` when none is found.

    Without `known`: the first (outermost) fully qualified class of a Java stack trace, as Kafka Connect reports
    a task's. With `known`: a class of one of its packages, else the innermost of its names, wrappers only when
    nothing else is named, as a Spark query's failure nests its cause.
    """
    text = (text or "").strip()
    if known is None:
        match = _QUALIFIED_CLASS.match(text)
        return match.group(1)[:200] if match else OTHER
    for package, name in known.packages.items():
        if re.search(rf"\b{re.escape(package)}\.\w+", text):
            return name
    named: list[str] = [name for name in _CLASS_NAME.findall(text) if name in known.names]
    specific = [name for name in named if name not in known.wrappers]
    return (specific or named or [OTHER])[-1]
