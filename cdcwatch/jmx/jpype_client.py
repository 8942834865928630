"""Default JMX backend: one persistent JMX connection per target through JPype.

Connects once and reads each bean's attributes in one `getAttributes` call, the beans of a query in
parallel (one RMI round trip for all of them, not one per bean). The names a pattern matches are
listed once and kept until the MBean server announces a registration or unregistration (its
delegate's notifications) or the connection reports lost notifications, so a steady scrape costs
no listing round trip. A bean whose MBeanInfo is immutable (every standard MBean, Debezium's
included) is asked only for the wanted attributes it has: each one it lacks would cost the server
an exception on every read. The JVM's start time is read once per connection. Every open type
(`String[]`, TabularData maps, CompositeData, BigInteger) is converted to Python; any failure drops
the connection and the next query reconnects.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import jpype

from cdcwatch.config import JmxSettings
from cdcwatch.jmx.client import RUNTIME_BEAN, JmxError, JmxQuery, JmxValue, MBean
from cdcwatch.jmx.jvm import ca_file_problem, ensure_jvm, trust_ca_files, trusted_ca_files

__all__ = ["JpypeClient", "to_python"]

_DELEGATE = "JMImplementation:type=MBeanServerDelegate"
READ_THREADS = 8
"""Beans read at once per target (each read is one RMI call on its own pooled connection)."""
JVM_CONSTANTS = {(RUNTIME_BEAN, ("StartTime",))}
"""Queries whose answer holds for the life of the JVM: read once per connection (a restarted JVM breaks the
connection, and the new one reads them again)."""


@functools.cache
def _open_types() -> tuple[Any, Any, Any, Any]:
    """Java types `to_python` tells apart, resolved once (it runs for every attribute of every scrape)."""
    return (jpype.JClass("javax.management.openmbean.TabularData"), jpype.JClass("javax.management.openmbean.CompositeData"),
            jpype.JClass("java.util.Map"), jpype.JClass("java.util.Collection"))


def to_python(value: Any) -> JmxValue:
    """Convert a Java attribute value to plain Python data."""
    convert = _CONVERTERS.get(type(value))
    if convert is not None:
        return convert(value)
    if value is None or isinstance(value, str) or not hasattr(value, "getClass"):
        return cast(JmxValue, value)  # already plain Python
    convert = _CONVERTERS.setdefault(type(value), _converter(value))
    return convert(value)


_CONVERTERS: dict[type, Callable[[Any], JmxValue]] = {}
"""Python wrapper type of a Java class → its conversion, decided once per class (this runs for every attribute of
every scrape; asking Java for the class name each time cost more than the conversion)."""

_BOXED_INTEGRAL = {"java.lang.Long", "java.lang.Integer", "java.lang.Short", "java.lang.Byte"}
"""JPype makes these subclasses of Python's int (and Double, Float of float): converted without a call into Java."""


def _converter(value: Any) -> Callable[[Any], JmxValue]:
    cls = str(value.getClass().getName())
    if cls == "java.lang.Boolean":
        return bool
    if cls in _BOXED_INTEGRAL:
        return int
    if cls in ("java.lang.Double", "java.lang.Float"):
        return float
    if cls in ("java.util.concurrent.atomic.AtomicLong", "java.math.BigInteger"):
        return lambda v: int(str(v.toString()))
    if cls == "java.math.BigDecimal":
        return lambda v: float(str(v.toString()))
    if cls.startswith("["):
        return lambda v: [_scalar(item) for item in v]
    tabular, composite, java_map, java_collection = _open_types()
    if isinstance(value, tabular):
        return _tabular
    if isinstance(value, composite):
        return lambda v: {str(k): _scalar(v.get(k)) for k in v.getCompositeType().keySet()}
    if isinstance(value, java_map):
        return lambda v: {str(k): _scalar(item) for k, item in v.entrySet()}
    if isinstance(value, java_collection):
        return lambda v: [_scalar(item) for item in v]
    return lambda v: str(v.toString())


def _tabular(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in value.values():
        keys = list(row.getCompositeType().keySet())
        if "key" in keys and "value" in keys:
            out[str(row.get("key"))] = _scalar(row.get("value"))
    return out


def _scalar(value: Any) -> Any:
    converted = to_python(value)
    return converted if not isinstance(converted, (list, dict)) else str(converted)


def _describe(exc: BaseException) -> str:
    """One safe line: the root Java exception's class and the first line of its message; a TLS failure says so."""
    if not isinstance(exc, jpype.JException):
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    SSLException = jpype.JClass("javax.net.ssl.SSLException")
    root, tls = exc, isinstance(exc, SSLException)
    while root.getCause() is not None and root.getCause() is not root:
        root = root.getCause()
        tls = tls or isinstance(root, SSLException)
    message = root.getMessage()
    text = f"{root.getClass().getSimpleName()}: {message}" if message else str(root.getClass().getSimpleName())
    text = (text.splitlines() or ["unknown error"])[0].split("; nested exception is")[0][:300]
    if tls:
        untrusted = "certification path" in text or "CertPath" in text
        return ("TLS handshake failed" + (" (the JMX endpoint's certificate is not signed by a trusted CA: see jmx.ca_file)"
                                          if untrusted else "") + f": {text}")
    return text


@jpype.JImplements("javax.management.NotificationListener", deferred=True)
class _NamesChanged:
    """Marks the client's bean names stale on any MBean (un)registration or connection notification."""

    def __init__(self, client: JpypeClient) -> None:
        self._client = client

    @jpype.JOverride  # type: ignore[untyped-decorator]
    def handleNotification(self, notification: Any, handback: Any) -> None:  # noqa: N802 (Java interface)
        self._client.names_changed()


@dataclass(frozen=True, slots=True)
class _Listed:
    """A listed bean: its name, parsed once, and the attribute names to ask it for."""

    name: Any
    """The javax.management.ObjectName."""
    canonical: str
    domain: str
    keys: dict[str, str]
    wanted: Any
    """String[]: the query's attributes, only those the bean has where its MBeanInfo is immutable."""


def _listed(connection: Any, name: Any, attributes: Sequence[str]) -> _Listed:
    info = connection.getMBeanInfo(name)
    if str(info.getDescriptor().getFieldValue("immutableInfo")) == "true":
        readable = {str(a.getName()) for a in info.getAttributes() if a.isReadable()}
        attributes = [a for a in attributes if a in readable]
    keys = {str(k): str(v) for k, v in name.getKeyPropertyList().entrySet()}
    return _Listed(name, str(name.getCanonicalName()), str(name.getDomain()), keys,
                   jpype.JArray(jpype.JString)(list(attributes)))


class JpypeClient:
    """A persistent JMX connection to one JVM."""

    def __init__(self, settings: JmxSettings, timeout_seconds: float) -> None:
        self._settings = settings
        self._timeout = timeout_seconds
        self._lock = threading.Lock()
        self._connector: Any = None
        self._connection: Any = None
        self._names: dict[tuple[str, tuple[str, ...]], tuple[int, list[_Listed]]] = {}
        self._constants: dict[tuple[str, tuple[str, ...]], list[MBean]] = {}
        """Answers to JVM_CONSTANTS queries, for the current connection."""
        self._generation = 0  # advanced by every announced change
        self._pool: ThreadPoolExecutor | None = None

    def names_changed(self) -> None:
        """Forget the listed bean names: the next query lists them again."""
        self._generation += 1

    def _connect(self) -> Any:
        ensure_jvm()
        HashMap = jpype.JClass("java.util.HashMap")
        JMXServiceURL = jpype.JClass("javax.management.remote.JMXServiceURL")
        JMXConnectorFactory = jpype.JClass("javax.management.remote.JMXConnectorFactory")
        ObjectName = jpype.JClass("javax.management.ObjectName")
        env = HashMap()
        if self._settings.username is not None and self._settings.password is not None:
            credentials = jpype.JArray(jpype.JString)([self._settings.username, self._settings.password.get_secret_value()])
            env.put("jmx.remote.credentials", credentials)
        if self._settings.ssl:
            self._trust()
            env.put("com.sun.jndi.rmi.factory.socket", jpype.JClass("javax.rmi.ssl.SslRMIClientSocketFactory")())
        self._connector = JMXConnectorFactory.connect(JMXServiceURL(self._settings.service_url), env)
        connection = self._connector.getMBeanServerConnection()
        listener = _NamesChanged(self)
        self._connector.addConnectionNotificationListener(listener, None, None)
        connection.addNotificationListener(ObjectName(_DELEGATE), listener, None, None)
        self.names_changed()
        self._connection = connection
        return connection

    def _trust(self) -> None:
        """Make sure the JVM trusts this target's CA file (normally done for all targets when the config loads)."""
        ca_file = self._settings.ca_file
        if ca_file is None:
            return
        if ca_file_problem(ca_file) is not None:
            trust_ca_files(trusted_ca_files() | {ca_file})
        problem = ca_file_problem(ca_file)
        if problem is not None:
            raise JmxError(f"TLS: jmx.ca_file {ca_file} cannot be used: {problem}")

    def query(self, pattern: str, attributes: Sequence[str]) -> list[MBean]:
        return self.query_many([(pattern, attributes)])[0]

    def query_many(self, queries: Sequence[JmxQuery]) -> list[list[MBean]]:
        with self._lock:
            try:
                connection = self._connection or self._connect()
                keys = [(pattern, tuple(attributes)) for pattern, attributes in queries]
                reads = [(index, listed) for index, key in enumerate(keys) if key not in self._constants
                         for listed in self._listed(connection, key)]
                if not reads:  # every answer was known (no bean listed, or constants): ask the JVM it still answers
                    connection.getMBeanCount()
                beans = self._read_all(connection, [listed for _, listed in reads])
                answers: list[list[MBean]] = [[] for _ in queries]
                for (index, _), bean in zip(reads, beans, strict=True):
                    if bean is None:
                        self.names_changed()  # it went away: list again next time
                    else:
                        answers[index].append(bean)
                for index, key in enumerate(keys):
                    if key in self._constants:
                        answers[index] = self._constants[key]
                    elif key in JVM_CONSTANTS and answers[index]:
                        self._constants[key] = answers[index]
                return [sorted(found, key=lambda b: b.name) for found in answers]
            except JmxError:
                self._drop()
                raise
            except Exception as exc:  # any failure: drop the connection, report one line
                self._drop()
                raise JmxError(_describe(exc)) from None

    def _listed(self, connection: Any, query: tuple[str, tuple[str, ...]]) -> list[_Listed]:
        """The beans the query's pattern matches, listed once (with their MBeanInfo) until the server announces
        a change."""
        generation = self._generation
        pattern, attributes = query
        listed = self._names.get(query)
        if listed is not None and listed[0] == generation:
            return listed[1]
        beans = []
        for name in connection.queryNames(jpype.JClass("javax.management.ObjectName")(pattern), None):
            try:
                beans.append(_listed(connection, name, attributes))
            except jpype.JException as exc:
                if str(exc.getClass().getSimpleName()) != "InstanceNotFoundException":
                    raise
                self.names_changed()  # it went away between the listing and its MBeanInfo
        self._names[query] = (generation, beans)  # a change announced meanwhile has advanced the generation
        return beans

    def _read_all(self, connection: Any, beans: list[_Listed]) -> list[MBean | None]:
        """Each bean's attributes, read at once: the first in this thread, the others in the pool meanwhile (one
        bean, the common case of a single connector's context, costs no hand-over between threads)."""
        if not beans:
            return []
        rest: list[Future[MBean | None]] = []
        if len(beans) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(READ_THREADS - 1, thread_name_prefix="cdcwatch-jmx")
            rest = [self._pool.submit(self._read, connection, bean) for bean in beans[1:]]
        try:
            return [self._read(connection, beans[0]), *(future.result() for future in rest)]
        except BaseException:
            for future in rest:  # the connection is about to be dropped: no more reads on it
                future.cancel()
            raise

    @staticmethod
    def _read(connection: Any, bean: _Listed) -> MBean | None:
        try:
            values = connection.getAttributes(bean.name, bean.wanted)
        except jpype.JException as exc:
            if str(exc.getClass().getSimpleName()) == "InstanceNotFoundException":
                return None  # the bean went away between the listing and the read
            raise
        # iterated as a Java array (in C), not through the List view (a Python iterator: about 10 % of the CPU)
        attributes = {str(a.getName()): to_python(a.getValue()) for a in values.toArray()}
        return MBean(bean.canonical, bean.domain, dict(bean.keys), attributes)

    def _drop(self) -> None:
        connector, self._connector, self._connection = self._connector, None, None
        self._constants = {}
        if connector is not None:
            try:
                connector.close()
            except Exception:  # closing a broken connection may fail too; nothing to keep
                pass

    def close(self) -> None:
        self._drop()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
