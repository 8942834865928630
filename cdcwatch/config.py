"""The configuration's models, and the one YAML loader (`load_yaml_model`) every configuration file is read with
(this one, the web config, the mixin config): `${ENV}`-interpolated, validated into typed objects.

The models know no collector: what depends on the kinds of target (a section to scrape, names unique within a
section, static labels a target's collector sets itself) is checked against the collector registry by
`cdcwatch.validation`, whose `load_config` and `parse_config` read the exporter's configuration.

Every problem is reported as one line naming its key path (``debezium[1].jmx.port: expected an
integer``); values are never echoed, so secrets cannot leak through an error message.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from cdcwatch.spark import FRESHNESS_SECONDS

__all__ = [
    "DEFAULT_PORT",
    "MIXIN_SECTIONS",
    "WATCH_INTERVAL_SECONDS",
    "Config",
    "ConfigError",
    "ConnectWorkerConfig",
    "JmxSettings",
    "KafkaClusterConfig",
    "ListenSettings",
    "MysqlSourceConfig",
    "NameFilter",
    "PostgresSourceConfig",
    "DeltaReconcileSide",
    "ReconcileConfig",
    "ReconcileJobConfig",
    "ReconcileSideConfig",
    "SparkReconcileConfig",
    "TableConfig",
    "CLIENT_SECRETS",
    "CanaryColumn",
    "CanaryConfig",
    "StatusSettings",
    "StrictModel",
    "DebeziumTargetConfig",
    "DELTA_URI_DESCRIPTION",
    "DeltaTableLocation",
    "check_labels",
    "check_name",
    "check_table_uri",
    "literal_secrets",
    "load_yaml_model",
    "parse_yaml_model",
]

DEFAULT_PORT = 10121
"""Default port of `/metrics`; see docs/install.md "Port" for why this number."""

WATCH_INTERVAL_SECONDS = 2.0
"""How often `serve` checks its config file for changes (`--config-watch-interval`)."""

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SECRET_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
"""A secret's only safe form: one reference, without a default (a default would be the secret, written here)."""
CLIENT_SECRETS = (r"^(sasl\.password|sasl\.jaas\.config|sasl\.oauthbearer\.client\.secret|sasl\.oauthbearer\.config|"
                  r"sasl\.oauthbearer\.assertion\.private\.key\.(pem|passphrase)|ssl\.key\.(password|pem)|"
                  r"ssl\.keystore\.password|ssl\.truststore\.password|ssl_key)$")
"""Kafka client (librdkafka) properties that carry a credential or a key themselves."""
_SECRET_KEY = re.compile(rf"(?i)password|secret|{CLIENT_SECRETS}")
"""A key whose value is a secret: one naming a password or a secret, or a Kafka client credential."""


class ConfigError(Exception):
    """A configuration file (or flag) that cannot be used; `problems` holds one line per fault, each naming its
    key path, and the message is a header naming the file followed by those lines. The one error type of every
    configuration cdcwatch reads: the commands exit 2 with its message, without a traceback."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"invalid configuration in {source}:\n" + "\n".join(f"  {p}" for p in problems))


class StrictModel(BaseModel):
    """Base of every config file's models (exporter, mixin, web): an unknown key is an error, not ignored, and a
    loaded config cannot change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_host(host: str) -> str:
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not _HOSTNAME.match(host):
        raise ValueError("not a valid host name or IP address")
    return host


class ListenSettings(StrictModel):
    """Where `/metrics` is served."""

    address: str = Field("127.0.0.1", description="Bind address (use 0.0.0.0 to listen on all interfaces).")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="TCP port of the HTTP endpoint.")
    web_config_file: str | None = Field(None, description=(
        "Web config (exporter-toolkit format): TLS and basic auth for `/metrics`; `--web.config.file` overrides."))

    _address = field_validator("address")(_check_host)


class JmxSettings(StrictModel):
    """How to reach one JVM's MBean server."""

    host: str | None = Field(None, description="JMX host; give `host` + `port`, or `url`.")
    port: int | None = Field(None, ge=1, le=65535, description="JMX (RMI registry) port.")
    url: str | None = Field(None, description="Full JMX service URL, e.g. `service:jmx:rmi:///jndi/rmi://h:9010/jmxrmi`.")
    username: str | None = Field(None, description="JMX user (for a password-protected agent).")
    password: SecretStr | None = Field(None, description="JMX password; use `${ENV_VAR}`, never a literal.")
    ssl: bool = Field(False, description=(
        "Connect over TLS (`com.sun.management.jmxremote.ssl`, and `registry.ssl` with the jpype backend), trusting "
        "the JVM's default CAs and every configured `ca_file`."))
    ca_file: str | None = Field(None, description=(
        "PEM file of the CA(s) that signed the JMX endpoint's certificate (a private CA); needs `ssl: true` and the "
        "jpype backend. JMX TLS uses one trust store per exporter JVM, so the CA files of all targets are trusted for "
        "every TLS JMX target."))
    backend: Literal["jpype", "jmxquery"] = Field(
        "jpype", description="`jpype`: persistent in-process client (default). `jmxquery`: one JVM per scrape, no Map/array values."
    )

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return None if value is None else _check_host(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("service:jmx:"):
            raise ValueError("must start with 'service:jmx:'")
        return value

    @model_validator(mode="after")
    def _address(self) -> JmxSettings:
        if self.url is None and (self.host is None or self.port is None):
            raise ValueError("give either host and port, or url")
        if self.url is not None and (self.host is not None or self.port is not None):
            raise ValueError("give either host and port, or url, not both")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        if self.ca_file is not None and not self.ssl:
            raise ValueError("ca_file needs ssl: true")
        if self.ca_file is not None and self.backend == "jmxquery":
            raise ValueError("ca_file needs the jpype backend (jmxquery cannot be given a trust store)")
        return self

    @property
    def service_url(self) -> str:
        """The JMX service URL this target is reached at."""
        if self.url is not None:
            return self.url
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"service:jmx:rmi:///jndi/rmi://{host}:{self.port}/jmxrmi"


def check_name(value: str) -> str:
    if not _TARGET_NAME.match(value):
        raise ValueError("use letters, digits, '_', '.', ':' or '-'")
    return value


def check_labels(value: dict[str, str]) -> dict[str, str]:
    """Prometheus label names. Whether a name is one the target's collector sets itself is the registry's to say
    (`cdcwatch.validation`)."""
    for name in value:
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"label name {name!r} is not a valid Prometheus label name")
    return value


_HTTP_URL = re.compile(r"^https?://[^/?#\s@]+([/?#]|$)")
"""An http(s) URL with a host and no credentials (user:password@) before it."""


def check_http_url(value: str, fix: str) -> str:
    """An http:// or https:// URL; credentials in it are refused with `fix`: they would show in logs, errors and the
    chart's ConfigMap."""
    if re.match(r"^https?://[^/?#\s]*@", value):
        raise ValueError(f"credentials do not belong in the URL (it shows in logs, errors and the chart's ConfigMap): {fix}")
    if not _HTTP_URL.match(value):
        raise ValueError("must be an http:// or https:// URL")
    return value


def check_table_uri(value: str) -> str:
    """A Delta table's root: a path or an object store URL, without credentials in it."""
    if not value.strip():
        raise ValueError("give the table's root directory (the one holding _delta_log/) or its URL")
    scheme, _, rest = value.partition("://")
    if rest and "@" in rest.split("/", 1)[0] and scheme not in ("abfs", "abfss"):
        raise ValueError("credentials do not belong in the URI: let the object store's default credential chain "
                         "(environment, instance role) supply them")
    return value


DELTA_URI_DESCRIPTION = (
    "The table's root, the directory holding `_delta_log/`: a local path, `file://`, `s3://`, `gs://` or "
    "`abfss://container@account.dfs.core.windows.net/path`. Object stores are read with the credentials of "
    "each one's default chain (environment, instance role); an `s3://` URI takes `?region=...&endpoint_override="
    "...` for other endpoints.")


class DebeziumTargetConfig(StrictModel):
    """One `debezium:` entry: a JVM running Debezium connectors, read over JMX."""

    name: str = Field(description="Unique target name; the `target` label of its series.")
    jmx: JmxSettings = Field(description="The JVM's JMX endpoint; its Debezium MBeans are collected.")
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this target.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this target.")

    _name = field_validator("name")(check_name)

    _labels = field_validator("labels")(check_labels)


def _check_regexes(patterns: Any) -> Any:
    """A list of regular expressions, or a mapping keyed by them: each must compile."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
    return patterns


class NameFilter(StrictModel):
    """Regular expressions (full match) a name must match one of (`allow`) and none of (`deny`)."""

    allow: list[str] = Field(default_factory=lambda: [".*"], description="Names to include.")
    deny: list[str] = Field(default_factory=list, description="Names to exclude, even when allowed.")

    _regexes = field_validator("allow", "deny")(lambda value: _check_regexes(value))

    def matches(self, name: str) -> bool:
        return (any(re.fullmatch(p, name) for p in self.allow)
                and not any(re.fullmatch(p, name) for p in self.deny))


class StatusSettings(StrictModel):
    """The sliding window the consumer status (OK/WARN/STALL/STOP/REWIND) is evaluated over."""

    enabled: bool = Field(True, description=(
        "Evaluate the consumer status (cdcwatch_kafka_consumergroup_status_code, ..._topic_status; the alerts on "
        "stalled and stopped groups read them)."))
    window_samples: int = Field(10, ge=3, le=1000, description="Samples (scrapes) per group partition in the window.")
    max_sample_age_seconds: float = Field(3600, gt=0, description="Samples older than this leave the window.")
    per_partition: bool = Field(False, description=(
        "Also one coded series per group partition (cdcwatch_kafka_consumergroup_status_code); the per-topic state "
        "set (..._topic_status, which the alerts and boards read) names the group and topic either way."))


class KafkaClusterConfig(StrictModel):
    """One Kafka cluster whose consumer groups' lag is collected at scrape time."""

    name: str = Field(description="Unique cluster name; the `target` label of its series.")
    bootstrap_servers: str = Field(description="host:port[,host:port...] of the brokers.")
    client: dict[str, str] = Field(default_factory=dict, description=(
        "librdkafka settings passed through (security.protocol, sasl.*, ssl.*; secrets via ${VAR}). librdkafka checks "
        "them before anything starts: a setting it refuses is named, with its words, and the exporter exits 2."))
    groups: NameFilter = Field(default_factory=NameFilter, description="Consumer groups to report.")
    topics: NameFilter = Field(default_factory=lambda: NameFilter(deny=["__.*"]), description="Topics to report.")
    extra_groups: list[str] = Field(default_factory=list, description=(
        "Groups to read even when the broker does not list them (very old brokers list no group without live members)."))
    granularity: Literal["partition", "topic"] = Field("partition", description="Per-partition series, or per-topic sums only.")
    max_partitions: int = Field(50000, ge=1, description=(
        "Cap on group partitions reported; beyond it the rest are left out, counted "
        "(cdcwatch_kafka_group_partitions_dropped) and logged. Each costs about 2 kB of memory with the defaults "
        "and 2 series, its lag in messages and in seconds (1 kB and 1 series with lag in messages only)."))
    lag_seconds: bool = Field(True, description="Read message timestamps to report lag in seconds.")
    committed_offsets: bool = Field(False, description=(
        "Report each group partition's committed offset (cdcwatch_kafka_consumergroup_committed_offset): the log end "
        "offset less the lag in messages says it otherwise, and the sum per group and topic (..._topic_committed_offset) "
        "is always reported."))
    freshness: bool = Field(True, description="Read the newest message of each partition for the source commit time (Debezium topics).")
    retention: bool = Field(True, description=(
        "Read each topic's cleanup.policy, retention.ms and retention.bytes (DescribeConfigs) for the retention runway."))
    retention_refresh_seconds: float = Field(300, gt=0, description=(
        "How old the topics' retention settings may get before they are read again (never waited for by a scrape)."))
    topic_servers: dict[str, str] = Field(default_factory=dict, description=(
        "Topic regex -> Debezium server (topic.prefix) label; without a match the newest message's source.name is used."))
    status: StatusSettings = Field(default_factory=StatusSettings, description="Consumer status evaluation.")
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this cluster.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this cluster.")

    _name = field_validator("name")(check_name)

    _topic_servers = field_validator("topic_servers")(lambda value: _check_regexes(value))

    _labels = field_validator("labels")(check_labels)


class ConnectWorkerConfig(StrictModel):
    """A Kafka Connect worker: its REST API (connector and task states) and, optionally, its JMX."""

    name: str = Field(description="Unique worker name; the `target` label of its series.")
    url: str = Field(description="REST API base URL, e.g. `http://connect-1:8083`.")
    username: str | None = Field(None, description="Basic-auth user of the REST API.")
    password: SecretStr | None = Field(None, description="Basic-auth password; use ${VAR}.")
    ca_file: str | None = Field(None, description="CA bundle to verify an https REST API against.")
    jmx: JmxSettings | None = Field(None, description="The worker JVM's JMX endpoint, for its kafka.connect MBeans.")
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this worker.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this worker.")

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "give them as `username` and `password` (the password from ${VAR})").rstrip("/")

    @model_validator(mode="after")
    def _credentials(self) -> ConnectWorkerConfig:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        return self


class PostgresSourceConfig(StrictModel):
    """A PostgreSQL (or YugabyteDB) source whose replication slots are watched, with read-only SQL."""

    name: str = Field(description="Unique source name; the `target` label of its series.")
    host: str = Field("127.0.0.1", description="libpq host (name, address or socket directory).")
    port: int = Field(5432, ge=1, le=65535, description="libpq port.")
    dbname: str = Field("postgres", description="Database to connect to (slots of every database are listed).")
    user: str = Field("postgres", description="A role allowed to read pg_replication_slots (e.g. pg_monitor).")
    password: SecretStr | None = Field(None, description="Its password; use ${VAR}.")
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = Field(
        "prefer", description=(
            "libpq sslmode; `verify-full` checks the server certificate against `sslrootcert` and `host`."))
    sslrootcert: str | None = Field(None, description=(
        "PEM file of the CA(s) the server certificate is checked against (libpq `sslrootcert`; default "
        "~/.postgresql/root.crt)."))
    sslcert: str | None = Field(None, description="Client certificate (PEM) for certificate authentication (libpq `sslcert`).")
    sslkey: str | None = Field(None, description="Its private key, unencrypted, mode 0600 (libpq `sslkey`).")
    slots: NameFilter = Field(default_factory=NameFilter, description="Slots to report.")
    slot_servers: dict[str, str] = Field(default_factory=dict, description=(
        "Slot name -> Debezium server (topic.prefix): the `server` label that joins the slot to its connector."))
    publications: NameFilter = Field(default_factory=NameFilter, description=(
        "Publications whose tables get a row estimate (the tables a pgoutput connector captures, in `dbname`)."))
    publication_servers: dict[str, str] = Field(default_factory=dict, description=(
        "Publication name -> Debezium server (topic.prefix): the `server` label that joins a table's row estimate to "
        "its connector's snapshot progress."))
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this source.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this source.")

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)

    @model_validator(mode="after")
    def _client_certificate(self) -> PostgresSourceConfig:
        if (self.sslcert is None) != (self.sslkey is None):
            raise ValueError("sslcert and sslkey go together")
        return self


class MysqlSourceConfig(StrictModel):
    """A MySQL or MariaDB source whose binary logs are watched, with read-only statements (needs PyMySQL: the `mysql`
    extra)."""

    name: str = Field(description="Unique source name; the `target` label of its series.")
    host: str = Field("127.0.0.1", description="Server host name or address.")
    port: int = Field(3306, ge=1, le=65535, description="Server port.")
    user: str = Field(description=(
        "A user with REPLICATION CLIENT (MySQL) or BINLOG MONITOR (MariaDB) for SHOW BINARY LOGS, and REPLICATION "
        "SLAVE to read each binlog's start time (the Debezium connector's user has both)."))
    password: SecretStr | None = Field(None, description="Its password; use ${VAR}.")
    server: str = Field("", description=(
        "The Debezium server (topic.prefix) of the connector reading this source: the `server` label that joins the "
        "binlogs to the connector's binlog file for the runway, and the tables' row estimates to its snapshot progress."))
    tables: NameFilter = Field(default_factory=NameFilter, description=(
        "`database.table` names (the form of the connector's table.include.list) whose row estimate is reported "
        "(information_schema.tables.table_rows of the tables the user may see; the system databases never)."))
    max_tables: int = Field(1000, ge=1, description=(
        "Cap on the tables estimated, the first in name order; the rest are left out (said once in the log)."))
    ssl_ca: str | None = Field(None, description="CA bundle: connect with TLS and verify the server against it.")
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this source.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this source.")

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)


class TableConfig(StrictModel):
    """A table cdcwatch reads with read-only statements: a PostgreSQL or MySQL/MariaDB table, or the reference apply
    job's target (`format: apply`)."""

    engine: Literal["postgres", "mysql"] = Field(description="`postgres` (PostgreSQL) or `mysql` (MySQL, MariaDB).")
    host: str = Field("127.0.0.1", description="Server host name or address (postgres: also a socket directory).")
    port: int | None = Field(None, ge=1, le=65535, description="Server port (default 5432 for postgres, 3306 for mysql).")
    dbname: str = Field("postgres", description="postgres: the database to connect to.")
    user: str = Field(description="A user that may SELECT the table (nothing else is needed).")
    password: SecretStr | None = Field(None, description="Its password; use ${VAR}.")
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = Field(
        "prefer", description="postgres: libpq sslmode; `verify-full` checks the certificate against `sslrootcert` and `host`.")
    sslrootcert: str | None = Field(None, description="postgres: PEM file of the CA(s) the server certificate is checked against.")
    sslcert: str | None = Field(None, description="postgres: client certificate (PEM) for certificate authentication.")
    sslkey: str | None = Field(None, description="postgres: its private key, unencrypted, mode 0600.")
    ssl_ca: str | None = Field(None, description="mysql: CA bundle: connect with TLS and verify the server against it.")
    table: str | None = Field(None, description=(
        "The table: `schema.table` (postgres) or `database.table` (mysql); not with `format: apply`."))
    format: Literal["table", "apply"] = Field("table", description=(
        "`table`: a plain table with the same key. `apply` (postgres target only): the rows the reference apply job "
        "writes (`<apply_schema>.rows`, one JSON row image per key)."))
    apply_schema: str = Field("cdcwatch_apply", description="`format: apply`: the apply job's schema (its `target_schema`).")
    table_id: str | None = Field(None, description=(
        "`format: apply`: the table's `table_id` there; default: the source's `dbname.schema.table` (postgres) or "
        "`database.table` (mysql), as the Debezium event names it."))
    statement_timeout_seconds: float = Field(10, gt=0, le=600, description="Statement timeout of every query on this side.")

    _host = field_validator("host")(lambda value: value if value.startswith("/") else _check_host(value))

    @property
    def server_port(self) -> int:
        """`port`, or the engine's default."""
        return self.port or (5432 if self.engine == "postgres" else 3306)

    @property
    def location(self) -> str:
        """Where the table is, for messages."""
        return f"{self.engine} at {self.host}:{self.server_port}"

    @model_validator(mode="after")
    def _shape(self) -> TableConfig:
        if self.format == "apply":
            if self.engine != "postgres":
                raise ValueError("format apply needs engine postgres (the reference apply job writes PostgreSQL)")
            if self.table is not None:
                raise ValueError("format apply reads <apply_schema>.rows: give table_id, not table")
        elif self.table is None or self.table.count(".") != 1:
            raise ValueError("table: give `schema.table` (postgres) or `database.table` (mysql)")
        if (self.sslcert is None) != (self.sslkey is None):
            raise ValueError("sslcert and sslkey go together")
        return self


class ReconcileSideConfig(TableConfig):
    """One side of a reconciled table pair, read under a row budget."""

    rows_per_second: float = Field(1000, gt=0, description=(
        "Budget: rows this side may read per second, averaged over each chunk (low enough for a production primary)."))


class DeltaReconcileSide(StrictModel):
    """A Delta Lake table compared by the Spark reconciliation job (`cdcwatch-reconcile`): Spark reads its rows and
    hashes them as the SQL sides do; the exporter never reads a Delta table's rows."""

    engine: Literal["delta"] = Field(description="`delta`: a Delta Lake table read by Spark (`uri`).")
    uri: str = Field(description=(
        "The table's root, the directory holding `_delta_log/`: a path or any URL Spark's Hadoop filesystems read "
        "(`s3a://`, `abfss://`, `gs://`), with the credentials of Spark's own configuration."))
    rows_per_second: float = Field(1_000_000, gt=0, description=(
        "Budget: rows this side may read per second, averaged over each pass (a Delta read loads no database)."))
    bookkeeping_columns: list[str] = Field(default_factory=lambda: ["_cdc_position", "_cdc_commit_time"], description=(
        "Columns the writer adds that the source does not have (the apply job's source position and commit time): "
        "neither compared nor reported as drift."))

    _uri = field_validator("uri")(check_table_uri)

    @property
    def format(self) -> str:
        return "table"

    @property
    def location(self) -> str:
        """Where the table is, for messages."""
        return f"delta at {self.uri}"


class CanaryColumn(StrictModel):
    """Where the canary lands in a reconciled pair's target, read on the target side's connection."""

    table: str | None = Field(None, description=(
        "The canary table in the target: `schema.table` (postgres) or `database.table` (mysql); not with `format: "
        "apply`."))
    table_id: str | None = Field(None, description=(
        "`format: apply`: the canary table's `table_id` in the apply job's rows (`dbname.schema.table` as the Debezium "
        "event names it)."))
    column: str = Field("ts", description="The column holding the time the source wrote the canary.")


class DeltaTableLocation(StrictModel):
    """A Delta Lake table where the canary lands (the apply job's `--target delta:ROOT` writes
    `ROOT/<database.schema.table>`), read from its transaction log: the newest canary time is the column's
    largest value in the live files' statistics, no data file is read (needs pyarrow: the `delta` extra)."""

    engine: Literal["delta"] = Field(description=(
        "`delta`: the apply job's Delta table, read from its transaction log (`uri`)."))
    uri: str = Field(description=DELTA_URI_DESCRIPTION)

    _uri = field_validator("uri")(check_table_uri)


class CanaryConfig(StrictModel):
    """A pipeline's canary: a row the source writes on a fixed interval (Debezium's `heartbeat.action.query`, or a
    scheduled job), which travels the pipeline like any change; its newest time in the target is how fresh the target
    is, whatever applies the changes."""

    name: str = Field(description="Unique canary name; the `target` label of its series.")
    server: str = Field(description="The pipeline's Debezium server (topic.prefix): the `server` label of its series.")
    interval_seconds: float = Field(description=(
        "How often the source writes the canary (Debezium's heartbeat.interval.ms / 1000, or the job's schedule)."),
        gt=0, le=86400)
    column: str = Field("ts", description=(
        "The column holding the time the source wrote the canary: a timestamp (with or without time zone; without, "
        "read as UTC) or an integer of milliseconds since 1970."))
    source: TableConfig | None = Field(None, description=(
        "The canary table at the source: read to tell a source that stopped writing it from a pipeline that stopped "
        "delivering it (recommended)."))
    target: TableConfig | DeltaTableLocation = Field(discriminator="engine", description=(
        "Where the canary lands: the sink's copy of the table, the apply job's rows (`format: apply`, its "
        "`table_id`), or the apply job's Delta table (`engine: delta`, its `uri`)."))
    topic: str | None = Field(None, description=(
        "The Kafka topic the canary's changes travel on; default `<server>.<source table>` as Debezium names it. Joins "
        "the canary to the topic's newest message, which tells the connector's stop from the sink's."))
    timeout_seconds: float = Field(5.0, gt=0, le=120, description="Deadline of one collection from this canary.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this canary.")

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)

    @model_validator(mode="after")
    def _sides(self) -> CanaryConfig:
        if self.source is not None and self.source.format == "apply":
            raise ValueError("source: format apply is a target format")
        if (isinstance(self.target, TableConfig) and self.target.format == "apply" and self.target.table_id is None
                and self.source is None):
            raise ValueError("target: give table_id (the canary table as the Debezium event names it), or a source")
        return self

    @property
    def kafka_topic(self) -> str:
        """`topic`, or the topic Debezium names after the source table (empty without either)."""
        if self.topic is not None:
            return self.topic
        return f"{self.server}.{self.source.table}" if self.source is not None and self.source.table else ""


class ReconcileConfig(StrictModel):
    """A source table and its copy in the target, compared continuously in key-ordered chunks."""

    name: str = Field(description="Unique name of the table pair; the `target` label of its series.")
    source: ReconcileSideConfig = Field(description="The table the CDC pipeline reads.")
    target: ReconcileSideConfig = Field(description="Where the pipeline writes it.")
    key: str | None = Field(None, description=(
        "The key column (integer or text); default: the source's single-column primary key."))
    exclude_columns: list[str] = Field(default_factory=list, description=(
        "Columns left out of the comparison (e.g. ones only one side has, or whose types do not compare)."))
    chunk_rows: int = Field(1000, ge=10, le=100000, description="Keys per chunk.")
    settle_seconds: float = Field(60, gt=0, description=(
        "How long a differing row is left to settle before each re-check: longer than the pipeline's end-to-end lag "
        "in normal operation."))
    confirm_rechecks: int = Field(2, ge=1, le=100, description=(
        "Re-checks a row must still differ in, unchanged at the source, before it counts as diverged."))
    freshness_url: str | None = Field(None, description=(
        "A /metrics URL serving the pipeline's measured freshness (the apply job's listener, e.g. "
        "`http://driver:4041/metrics`): a re-check then counts only once the target is known to hold every change "
        "committed before the previous check, however far behind the pipeline is."))
    freshness_metric: str = Field(FRESHNESS_SECONDS.name, description=(
        "The freshness metric there (seconds; the largest matching series is used)."))
    freshness_labels: dict[str, str] = Field(default_factory=dict, description=(
        "Labels the freshness series must carry (e.g. `server: <topic.prefix>`). Their `server` is the pair's own "
        "`server` label too, unless `labels` sets one: the alerts of a Kafka Connect outage then inhibit the pair's "
        "`CdcReconcileCannotConfirm`."))
    freshness_canary: CanaryColumn | None = Field(None, description=(
        "Instead of `freshness_url`, where no listener measures the pipeline: the canary in the target (read on the "
        "target's connection); a re-check counts once the canary shows the target caught up with the previous check."))
    pass_interval_seconds: float = Field(60, ge=0, description="Pause between the end of a pass and the next.")
    max_logged_keys: int = Field(20, ge=1, le=10000, description="Keys of confirmed divergences logged per pass.")
    max_suspects: int = Field(100000, ge=1, description=(
        "Differing rows tracked at once; beyond it the rest are found again by later passes (said in the log)."))
    labels: dict[str, str] = Field(default_factory=dict, description=(
        "Static labels added to every series of this pair; `server: <topic.prefix>` names the pipeline it checks "
        "(taken from `freshness_labels` when not set here)."))

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)

    @property
    def series_labels(self) -> dict[str, str]:
        """The static labels of the pair's series: `labels`, with the `server` of `freshness_labels` unless set."""
        server = self.freshness_labels.get("server")
        return {**({"server": server} if server else {}), **self.labels}

    @field_validator("freshness_url")
    @classmethod
    def _freshness_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "the listener's /metrics is read without them")

    @model_validator(mode="after")
    def _sides(self) -> ReconcileConfig:
        if self.source.format == "apply":
            raise ValueError("source: format apply is a target format")
        if self.freshness_canary is not None:
            if self.freshness_url is not None:
                raise ValueError("give freshness_url or freshness_canary, not both")
            apply = self.target.format == "apply"  # (a Delta side's format is `table`)
            if apply == (self.freshness_canary.table_id is None) or apply != (self.freshness_canary.table is None):
                raise ValueError("freshness_canary: give table_id with a target of format apply, table otherwise")
        return self


class SparkReconcileConfig(ReconcileConfig):
    """A table pair compared by the Spark job (`cdcwatch-reconcile`): the target may be a Delta Lake table."""

    target: ReconcileSideConfig | DeltaReconcileSide = Field(  # type: ignore[assignment]
        discriminator="engine", description="Where the pipeline writes it: a SQL table, or a Delta table (`engine: delta`).")

    @model_validator(mode="after")
    def _delta(self) -> SparkReconcileConfig:
        if isinstance(self.target, DeltaReconcileSide) and self.freshness_canary is not None:
            raise ValueError("freshness_canary: a Delta target's freshness is read from the apply job's listener: "
                             "set freshness_url")
        return self


class ReconcileJobConfig(StrictModel):
    """The Spark reconciliation job's configuration file: the table pairs it compares."""

    reconcile: list[SparkReconcileConfig] = Field(min_length=1, description=(
        "The table pairs, each compared on its own thread of the job, pass after pass."))

    @field_validator("reconcile")
    @classmethod
    def _names(cls, pairs: list[SparkReconcileConfig]) -> list[SparkReconcileConfig]:
        names = [pair.name for pair in pairs]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"pair names must be unique: {', '.join(repeated)} given more than once")
        return pairs


class Limits(StrictModel):
    """Bounds on what one scrape may cost."""

    max_concurrent_collections: int = Field(16, ge=1, le=1024, description=(
        "Collections running at once across all targets; the rest wait (within their own deadline)."))
    max_series_per_target: int = Field(250000, ge=1, description=(
        "Series one target may export per scrape; the rest are dropped and counted in cdcwatch_series_dropped_total."))


MIXIN_SECTIONS = frozenset({"stages", "selectors", "thresholds", "durations", "runbook_base_url", "datasource_uid",
                            "kubernetes", "grafana_url"})
"""The top-level keys of a mixin config (`cdcwatch.mixin.MixinConfig`), none of them this file's."""


class Config(StrictModel):
    """The configuration file: the exporter's own keys. Each kind of target adds its section, a list of targets,
    from the collector registry (`cdcwatch.validation.config_model`): this layer knows no collector."""

    listen: ListenSettings = Field(default_factory=ListenSettings, description="The HTTP endpoint.")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log verbosity.")
    limits: Limits = Field(default_factory=Limits, description="Concurrency and cardinality bounds.")

    def targets(self, section: str) -> list[Any]:
        """The targets configured in `section` (a kind of target's)."""
        return list(getattr(self, section))

    @model_validator(mode="before")
    @classmethod
    def _not_another_file(cls, data: Any) -> Any:
        """An old key or a mixin config read as this one: say what to do instead of listing unknown keys."""
        if isinstance(data, dict) and "targets" in data:
            raise ValueError("`targets` is now `debezium` (the JVMs whose Debezium MBeans are read): rename the key")
        if isinstance(data, dict) and data and set(data) <= MIXIN_SECTIONS:
            raise ValueError("this is a mixin config (selectors, thresholds, ...): pass it to the mixin commands "
                             "(`cdcwatch alerts --mixin.file FILE`); serve and check read the exporter's configuration")
        return data


# --- loading ---------------------------------------------------------------------------------
# One loader for every YAML file cdcwatch reads (this configuration, the web config, the mixin config):
# YAML into a pydantic model, every fault reported as one ConfigError line naming its key path.

Model = TypeVar("Model", bound=BaseModel)

_TYPE_MESSAGES = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "missing": "required key is missing",
    "extra_forbidden": "unknown key",
    "invalid_key": "keys must be strings",
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    if kind == "literal_error":
        return "expected " + str(error.get("ctx", {})["expected"])
    if kind == "value_error":
        return str(error.get("ctx", {})["error"])
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than", "too_short"):
        return error["msg"].replace("Input should", "must").replace("List should", "must")
    return error["msg"][0].lower() + error["msg"][1:]


def _problem(error: ErrorDetails) -> str:
    """`key.path: what is wrong`; a non-string key is named by the mapping that holds it."""
    loc = tuple(error["loc"])
    if error["type"] == "invalid_key":
        loc = loc[:-1]
    return f"{_path(loc)}: {_message(error)}"


def _interpolate(node: Any, loc: tuple[int | str, ...], env: Mapping[str, str], problems: list[str]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of the parsed YAML tree."""
    if isinstance(node, dict):
        return {k: _interpolate(v, (*loc, str(k)), env, problems) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate(v, (*loc, i), env, problems) for i, v in enumerate(node)]
    if not isinstance(node, str):
        return node

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        problems.append(f"{_path(loc)}: environment variable {name} is not set")
        return ""

    return _ENV_REF.sub(replace, node)


def literal_secrets(node: Any, loc: tuple[int | str, ...] = ()) -> list[str]:
    """The key paths of a parsed (not interpolated) YAML tree whose key names a secret and whose value is written in
    the file rather than `${VAR}`: whoever reads the file reads the secret."""
    if isinstance(node, dict):
        return [path for key, value in node.items()
                for path in ([_path((*loc, str(key)))] if isinstance(value, str) and _SECRET_KEY.search(str(key))
                             and not _SECRET_REF.fullmatch(value) else literal_secrets(value, (*loc, str(key))))]
    if isinstance(node, list):
        return [path for index, value in enumerate(node) for path in literal_secrets(value, (*loc, index))]
    return []


def parse_yaml_model(text: str, model: type[Model], source: str, env: Mapping[str, str] | None = None) -> Model:
    """YAML text validated into `model`; an empty document is an empty mapping (every default).

    With `env`, ``${VAR}`` and ``${VAR:-default}`` in strings are resolved from it first; without, strings are
    taken as written. Raises ConfigError with one line per fault: YAML syntax (line and column), a document
    that is no mapping, an unknown key, a wrong type or value, a missing key, each named by its key path.
    """
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError(source, [f"{where}{problem}"]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(source, ["(top level): expected a mapping"])
    if any(not isinstance(k, str) for k in raw):
        raise ConfigError(source, ["(top level): keys must be strings"])
    data = raw
    if env is not None:
        problems: list[str] = []
        data = _interpolate(raw, (), env, problems)
        if problems:
            raise ConfigError(source, problems)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_problem(e) for e in exc.errors(include_input=False)]) from None


def load_yaml_model(path: str | Path, model: type[Model], env: Mapping[str, str] | None = None) -> Model:
    """A YAML file validated into `model` (see parse_yaml_model); a file that cannot be read is a ConfigError too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read file: {exc.strerror}"]) from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), ["file is not UTF-8 text"]) from None
    return parse_yaml_model(text, model, str(path), env)
