"""The JPype backend lists bean names once and lists again only when the MBean server announces a change,
asks a standard MBean only for the attributes it has, and reads the JVM's start time once per connection.

A real JMX connector server (RMI) runs in the in-process JVM; the test registers and unregisters
MBeans on it and counts the `queryNames` calls that reach it: a steady scrape lists nothing, a
registered bean is seen on a following scrape, an unregistered one disappears.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jpype
import pytest

from cdcwatch.config import JmxSettings
from cdcwatch.jmx import RUNTIME_BEAN
from cdcwatch.jmx.jpype_client import JpypeClient
from cdcwatch.jmx.jvm import ensure_jvm
from devstack.procs import free_port, wait_for

PATTERN = "cdcwatchtest.names:type=connector-metrics,*"
ATTRIBUTES = ("NbNotifications",)  # an attribute of the Timer MBeans registered below


class _CountingServer:
    """The MBean server behind the connector server, counting the name listings clients ask for."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.listings = 0
        self.asked: list[tuple[str, list[str]]] = []
        """The bean and attribute names of each getAttributes call."""

    def queryNames(self, name: Any, query: Any) -> Any:  # noqa: N802 (Java interface)
        self.listings += 1
        return self.server.queryNames(name, query)

    def getAttributes(self, name: Any, attributes: Any) -> Any:  # noqa: N802
        self.asked.append((str(name), [str(a) for a in attributes]))
        return self.server.getAttributes(name, attributes)

    def getMBeanServer(self) -> Any:  # noqa: N802
        return self.server

    def setMBeanServer(self, server: Any) -> None:  # noqa: N802
        self.server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)


@pytest.fixture(scope="module")
def jmx_server() -> Iterator[tuple[int, _CountingServer]]:
    ensure_jvm()
    port = free_port()
    jpype.JClass("java.rmi.registry.LocateRegistry").createRegistry(port)
    platform = jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer()
    url = jpype.JClass("javax.management.remote.JMXServiceURL")(f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi")
    server = jpype.JClass("javax.management.remote.JMXConnectorServerFactory").newJMXConnectorServer(url, None, platform)
    counting = _CountingServer(platform)
    server.setMBeanServerForwarder(jpype.JProxy("javax.management.remote.MBeanServerForwarder", inst=counting))
    server.start()
    yield port, counting
    server.stop()


def _register(name: str) -> None:
    platform = jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer()
    platform.registerMBean(jpype.JClass("javax.management.timer.Timer")(), jpype.JClass("javax.management.ObjectName")(name))


def _unregister(name: str) -> None:
    platform = jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer()
    platform.unregisterMBean(jpype.JClass("javax.management.ObjectName")(name))


def _contexts(client: JpypeClient) -> list[str]:
    return [bean.keys["context"] for bean in client.query(PATTERN, ATTRIBUTES)]


def test_names_are_listed_again_only_after_the_server_announces_a_change(jmx_server) -> None:
    port, counting = jmx_server
    snapshot = "cdcwatchtest.names:type=connector-metrics,context=snapshot,server=s"
    streaming = "cdcwatchtest.names:type=connector-metrics,context=streaming,server=s"
    _register(snapshot)
    client = JpypeClient(JmxSettings(host="127.0.0.1", port=port), timeout_seconds=5)
    try:
        assert _contexts(client) == ["snapshot"]
        listed = counting.listings
        for _ in range(5):
            beans = client.query(PATTERN, ATTRIBUTES)
            assert [b.attributes for b in beans] == [{"NbNotifications": 0}]
        assert counting.listings == listed, "a steady scrape listed the bean names again"

        _register(streaming)
        wait_for(lambda: _contexts(client) == ["snapshot", "streaming"], 10, "the registered bean in a scrape")
        _unregister(snapshot)
        wait_for(lambda: _contexts(client) == ["streaming"], 10, "the unregistered bean gone from a scrape")
    finally:
        client.close()
        for name in (snapshot, streaming):
            if jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer().isRegistered(
                    jpype.JClass("javax.management.ObjectName")(name)):
                _unregister(name)


def test_a_standard_bean_is_asked_only_for_the_attributes_it_has(jmx_server) -> None:
    """Each attribute a bean lacks costs the server an exception on every read: a bean with an immutable
    MBeanInfo (a standard MBean or MXBean that sends no notifications, as Debezium's are) is asked for the
    wanted attributes it has, and nothing it has is lost. (A Timer itself, a notification broadcaster, keeps
    being asked for everything, as the test above shows.)"""
    port, counting = jmx_server
    name = "cdcwatchtest.attributes:type=connector-metrics,context=streaming,server=s"
    standard = jpype.JClass("javax.management.StandardMBean")(  # a Timer that is not a notification broadcaster
        jpype.JClass("javax.management.timer.Timer")(), jpype.JClass("javax.management.timer.TimerMBean").class_)
    jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer().registerMBean(
        standard, jpype.JClass("javax.management.ObjectName")(name))
    client = JpypeClient(JmxSettings(host="127.0.0.1", port=port), timeout_seconds=5)
    try:
        beans = client.query("cdcwatchtest.attributes:*", ("NoSuchAttribute", "NbNotifications", "Active"))
        assert [b.attributes for b in beans] == [{"NbNotifications": 0, "Active": False}]
        assert counting.asked[-1] == (name, ["NbNotifications", "Active"])
    finally:
        client.close()
        _unregister(name)


def test_the_jvm_start_time_is_read_once_per_connection(jmx_server) -> None:
    port, counting = jmx_server
    client = JpypeClient(JmxSettings(host="127.0.0.1", port=port), timeout_seconds=5)
    started = jpype.JClass("java.lang.management.ManagementFactory").getRuntimeMXBean().getStartTime()

    def read_start_time() -> int:
        [bean] = client.query_many([(RUNTIME_BEAN, ("StartTime",))])[0]
        return int(bean.attributes["StartTime"])  # type: ignore[arg-type]

    def reads() -> int:
        return sum(1 for name, _ in counting.asked if name == RUNTIME_BEAN)

    try:
        before = reads()
        assert [read_start_time() for _ in range(3)] == [started] * 3
        assert reads() == before + 1
        client._drop()  # as after a failed read: the next query connects again (to what may be a new JVM)
        assert read_start_time() == started
        assert reads() == before + 2
    finally:
        client.close()
