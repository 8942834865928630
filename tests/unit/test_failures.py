"""Failures told apart on the exceptions the clients really raise (nothing listening, a name that does not resolve);
what needs a server (TLS, authentication, the JVM's exceptions) is in tests/unit/test_connect_client.py and
tests/integration/test_cli.py."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import psycopg
import pytest
from confluent_kafka import KafkaError, KafkaException

from cdcwatch.failures import FailureKind, TargetFailure, classify, describe
from cdcwatch.kafka.cluster import ClientErrors
from devstack.procs import free_port

NO_SUCH_HOST = "no-such-host.invalid"  # RFC 2606: never resolves


def raised(action) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


def test_a_closed_port_is_refused_whichever_client_tried() -> None:
    port = free_port()
    failures = [raised(lambda: socket.create_connection(("127.0.0.1", port), timeout=5)),
                raised(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)),
                raised(lambda: psycopg.connect(host="127.0.0.1", port=port, connect_timeout=5))]
    assert [classify(exc) for exc in failures] == [FailureKind.REFUSED] * 3


def test_a_name_that_does_not_resolve_is_an_unknown_host() -> None:
    failures = [raised(lambda: socket.getaddrinfo(NO_SUCH_HOST, 80)),
                raised(lambda: urllib.request.urlopen(f"http://{NO_SUCH_HOST}/", timeout=5)),
                raised(lambda: psycopg.connect(host=NO_SUCH_HOST, connect_timeout=5))]
    assert [classify(exc) for exc in failures] == [FailureKind.UNKNOWN_HOST] * 3


def test_librdkafka_transport_errors_explain_its_failed_request() -> None:
    """A failed request only says "Broker transport failure"; the error callback said why."""
    failed = KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure"))
    assert classify(failed) is FailureKind.OTHER
    for code, said, kind in [
        (KafkaError._TRANSPORT, "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused",
         FailureKind.REFUSED),
        (KafkaError._RESOLVE, "h:9092/bootstrap: Failed to resolve 'h:9092': Name or service not known",
         FailureKind.UNKNOWN_HOST),
        (KafkaError._SSL, "sasl_ssl://127.0.0.1:9/bootstrap: SSL handshake failed: certificate verify failed",
         FailureKind.TLS),
        (KafkaError._AUTHENTICATION, "sasl_ssl://127.0.0.1:9/bootstrap: SASL authentication error: Authentication "
         "failed during authentication due to invalid credentials", FailureKind.AUTHENTICATION),
    ]:
        errors = ClientErrors()
        errors.record(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
        errors.record(KafkaError(code, said))
        assert classify(errors.explain(failed)) is kind, said


def test_an_authentication_error_wins_over_the_transport_errors_around_it() -> None:
    errors = ClientErrors()
    errors.record(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed"))
    errors.record(KafkaError(KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:1 failed: Connection refused"))
    assert classify(errors.explain(TimeoutError("the Kafka collection deadline passed"))) is FailureKind.AUTHENTICATION


def test_a_deadline_is_a_timeout_and_anything_else_is_other() -> None:
    assert classify(TimeoutError("the Connect collection deadline passed")) is FailureKind.TIMEOUT
    assert classify(ValueError("GET /: the answer is no JSON")) is FailureKind.OTHER


def test_the_line_names_the_address_the_kind_the_cause_and_what_to_check() -> None:
    port = free_port()
    failure = describe(raised(lambda: psycopg.connect(host="127.0.0.1", port=port, connect_timeout=5)),
                       f"127.0.0.1:{port}", "PostgreSQL")
    assert failure.line.startswith(f"127.0.0.1:{port}: connection refused: connection failed: ")
    assert failure.line.endswith("; check that PostgreSQL is running and listening on this port")
    assert "\n" not in failure.line


def test_a_failure_described_by_the_collector_keeps_its_address() -> None:
    """A Connect worker whose REST API answered but whose JMX endpoint refused names the JMX endpoint."""
    inner = describe(ConnectionRefusedError(111, "Connection refused"), "127.0.0.1:9999", "the Connect worker")
    assert describe(inner, "http://127.0.0.1:8083", "the Connect worker") is inner
    assert isinstance(inner, TargetFailure) and classify(inner) is FailureKind.REFUSED


def test_an_http_401_is_an_authentication_failure() -> None:
    error = urllib.error.HTTPError("http://h/", 401, "Unauthorized", {}, None)  # type: ignore[arg-type]
    assert classify(error) is FailureKind.AUTHENTICATION
