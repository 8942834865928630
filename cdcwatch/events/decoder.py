"""Decode one Kafka record (key, value) in the Debezium JSON format into a `ChangeEvent`.

Accepts the JsonConverter output with the `schema`/`payload` envelope and without it
(`schemas.enable=false`), as bytes or str. Anything unreadable raises `EventDecodeError` with the
reason; no other exception leaves `decode`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from cdcwatch.events.errors import EventDecodeError, integer, shown
from cdcwatch.events.model import ChangeEvent, Kind, Op, RowKey, Snapshot, TableId, TransactionBlock, TransactionBoundary
from cdcwatch.events.positions import TSO_LOGICAL_BITS, SourceSystem, parse_position, system_of

__all__ = ["decode", "row_key"]

Raw = bytes | bytearray | str | None

_OPS = {op.value: op for op in Op}
_SNAPSHOTS = {flag.value: flag for flag in Snapshot}
_BOOLEAN_SNAPSHOTS = {True: Snapshot.TRUE, False: Snapshot.FALSE}
_TIME_FIELDS = (("ts_ns", 1), ("ts_us", 1_000), ("ts_ms", 1_000_000))
"""The most precise timestamp present wins; each is scaled to nanoseconds."""
_DATABASE_IN_TOPIC = frozenset({SourceSystem.MYSQL, SourceSystem.TICDC})
"""Systems whose topics read `<prefix>.<database>.<table>`; the others use `<prefix>.<schema>.<table>`."""
_TRANSACTION_STATUSES = frozenset({"BEGIN", "END"})
_HEARTBEAT_TOPIC_PREFIX = "__debezium-heartbeat."
_TRANSACTION_TOPIC_SUFFIX = ".transaction"


def decode(key: Raw, value: Raw, topic: str | None = None) -> ChangeEvent:
    """The event in one record; `topic` fills in what some sources leave out of `source` (Oracle's table)."""
    if key is None and value is None:
        raise EventDecodeError("record has neither key nor value")
    row = _key(key)
    loaded = _load(value, "value") if value is not None else None
    document = _payload(loaded)
    if document is None:
        return ChangeEvent(Kind.TOMBSTONE, key=row, server=_server_from_topic(topic))
    if not isinstance(document, dict):
        raise EventDecodeError(f"value payload is a JSON {type(document).__name__}, not an object")
    if "op" in document:
        return _data_event(document, row, topic, _after_fields(loaded) if isinstance(loaded, dict) and loaded is not document
                           else None)
    if "ddl" in document or "tableChanges" in document:
        return _schema_change(document, row, topic)
    status = document.get("status")
    if isinstance(status, str) and status in _TRANSACTION_STATUSES:
        return _transaction(document, row, topic)
    if "ts_ms" in document and len(document) == 1:
        return _heartbeat(document, key, topic)
    raise EventDecodeError("value is no Debezium event: no op, ddl, transaction status or heartbeat ts_ms")


def row_key(payload: Any) -> RowKey | None:
    """A key payload as a stable, hashable tuple; YugabyteDB's `{"value": v, "set": true}` wrappers unwrapped."""
    if payload is None:
        return None
    try:
        if isinstance(payload, dict):
            if len(payload) == 1:  # the common single-column primary key
                ((name, field),) = payload.items()
                return ((name, _frozen(field)),)
            return tuple(sorted((name, _frozen(field)) for name, field in payload.items()))
        return (("", _frozen(payload)),)
    except RecursionError:
        raise EventDecodeError("key is nested too deeply") from None


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 2 and "value" in value and "set" in value:
            return _frozen(value["value"])
        return tuple(sorted((name, _frozen(field)) for name, field in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value


def _load(raw: Raw, what: str) -> Any:
    if not isinstance(raw, (bytes, bytearray, str)):
        raise EventDecodeError(f"{what} is a {type(raw).__name__}, not bytes or str")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int-digit limits
        raise EventDecodeError(f"{what} is not JSON: {exc}") from None


def _payload(document: Any) -> Any:
    """Strip the JsonConverter envelope when present."""
    if isinstance(document, dict) and len(document) == 2 and "payload" in document and "schema" in document:
        return document["payload"]
    return document


def _key(raw: Raw) -> RowKey | None:
    return None if raw is None else row_key(_payload(_load(raw, "key")))


def _after_fields(envelope: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The `fields` of the `after` struct in a JsonConverter envelope's schema; None when it has none."""
    schema = envelope.get("schema")
    fields = schema.get("fields") if isinstance(schema, dict) else None
    for field in fields if isinstance(fields, list) else ():
        if isinstance(field, dict) and field.get("field") == "after" and isinstance(field.get("fields"), list):
            found: list[dict[str, Any]] = field["fields"]  # the parsed document's own list: no copy per event
            return found
    return None


def _data_event(payload: dict[str, Any], row: RowKey | None, topic: str | None,
                after_fields: list[dict[str, Any]] | None = None) -> ChangeEvent:
    op = _OPS.get(payload["op"]) if isinstance(payload["op"], str) else None
    if op is None:
        raise EventDecodeError(f"unknown op {shown(payload['op'])}")
    source = _source(payload)
    system = system_of(source)
    server = _text(source, "name")
    return ChangeEvent(
        Kind.DATA, op=op, system=system, server=server, table=_table(source, system, server, topic), key=row,
        position=parse_position(source, system) if system is not None else None,
        commit_time_ns=_commit_time(source, system), emitted_time_ns=_time_ns(payload, "payload"),
        snapshot=_snapshot(source), source_transaction_id=_transaction_id(source),
        transaction=_transaction_block(payload.get("transaction")), after=_row(payload.get("after")),
        after_fields=after_fields)


def _schema_change(payload: dict[str, Any], row: RowKey | None, topic: str | None) -> ChangeEvent:
    source = payload.get("source")
    ddl = payload.get("ddl")
    if ddl is not None and not isinstance(ddl, str):
        raise EventDecodeError("ddl is not a string")
    if source is None:
        return ChangeEvent(Kind.SCHEMA_CHANGE, key=row, ddl=ddl, emitted_time_ns=_time_ns(payload, "payload"))
    source = _source(payload)
    system = system_of(source)
    server = _text(source, "name")
    table = _text(source, "table")
    database = _text(payload, "databaseName") or _text(source, "db")
    return ChangeEvent(
        Kind.SCHEMA_CHANGE, system=system, server=server, key=row, ddl=ddl,
        table=_table_id(database, _text(payload, "schemaName") or _text(source, "schema"), table) if table else None,
        position=parse_position(source, system) if system is not None else None,
        commit_time_ns=_commit_time(source, system), emitted_time_ns=_time_ns(payload, "payload"),
        snapshot=_snapshot(source))


def _transaction(payload: dict[str, Any], row: RowKey | None, topic: str | None) -> ChangeEvent:
    transaction_id = payload.get("id")
    if not isinstance(transaction_id, str):
        raise EventDecodeError("transaction event has no string id")
    count = payload.get("event_count")
    collections: list[tuple[str, int]] = []
    for entry in payload.get("data_collections") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("data_collection"), str):
            raise EventDecodeError("transaction data_collections entry is not {data_collection, event_count}")
        collections.append((entry["data_collection"], integer(entry.get("event_count"), "data_collections.event_count")))
    boundary = TransactionBoundary(payload["status"], transaction_id,
                                   None if count is None else integer(count, "event_count"), tuple(collections))
    server = topic[:-len(_TRANSACTION_TOPIC_SUFFIX)] if topic and topic.endswith(_TRANSACTION_TOPIC_SUFFIX) else None
    return ChangeEvent(Kind.TRANSACTION, server=server, key=row, boundary=boundary,
                       commit_time_ns=_time_ns(payload, "payload"))


def _heartbeat(payload: dict[str, Any], raw_key: Raw, topic: str | None) -> ChangeEvent:
    key = _payload(_load(raw_key, "key")) if raw_key is not None else None
    server = key.get("serverName") if isinstance(key, dict) else None
    if server is None:
        server = _server_from_topic(topic)
    elif not isinstance(server, str):
        raise EventDecodeError("heartbeat key serverName is not a string")
    return ChangeEvent(Kind.HEARTBEAT, server=server, emitted_time_ns=_time_ns(payload, "payload"))


def _row(after: Any) -> dict[str, Any] | None:
    if after is None or isinstance(after, dict):
        return after
    raise EventDecodeError("after is not an object")


def _source(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    source = payload.get("source")
    if not isinstance(source, dict):
        raise EventDecodeError("event has no source block" if source is None else "source is not an object")
    return source


def _table(source: Mapping[str, Any], system: Any, server: str | None, topic: str | None) -> TableId | None:
    table = source.get("table")
    if table is not None:
        if not isinstance(table, str):
            raise EventDecodeError("source.table is not a string")
        return _table_id(_text(source, "db"), _text(source, "schema"), table) if table else None
    # the table is absent from some sources' blocks (Oracle's documented examples): read it from the topic
    if topic and server and topic.startswith(server + "."):
        parts = topic[len(server) + 1:].split(".")
        if len(parts) >= 2:
            if system in _DATABASE_IN_TOPIC:
                return _table_id(parts[-2], None, parts[-1])
            return _table_id(_text(source, "db"), parts[-2], parts[-1])
    return None


@functools.lru_cache(maxsize=4096)
def _table_id(database: str | None, schema: str | None, table: str) -> TableId:
    """One shared TableId per table: a topic carries one table, so most lookups hit."""
    return TableId(database, schema, table)


def _commit_time(source: Mapping[str, Any], system: SourceSystem | None) -> int | None:
    if system is SourceSystem.TICDC:  # source.ts_ms is 0: the commit time is the TSO's physical part
        commit_ts = source.get("commit_ts")
        return None if commit_ts is None else (integer(commit_ts, "source.commit_ts") >> TSO_LOGICAL_BITS) * 1_000_000
    return _time_ns(source, "source")


def _time_ns(block: Mapping[str, Any], where: str) -> int | None:
    """The block's timestamp in ns (ts_ns, else ts_us, else ts_ms); 0 means the source did not say."""
    for name, scale in _TIME_FIELDS:
        value = block.get(name)
        if value is not None:
            stamp = integer(value, f"{where}.{name}") * scale
            return stamp if stamp > 0 else None
    return None


def _snapshot(source: Mapping[str, Any]) -> Snapshot:
    flag = source.get("snapshot")
    if flag is None:
        return Snapshot.FALSE
    snapshot = _BOOLEAN_SNAPSHOTS.get(flag) if isinstance(flag, bool) else (
        _SNAPSHOTS.get(flag.lower()) if isinstance(flag, str) else None)
    if snapshot is None:
        raise EventDecodeError(f"unknown source.snapshot {shown(flag)}")
    return snapshot


def _transaction_id(source: Mapping[str, Any]) -> str | None:
    value = source.get("txId")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise EventDecodeError("source.txId is neither a string nor an integer")


def _transaction_block(block: Any) -> TransactionBlock | None:
    if block is None:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("id"), str):
        raise EventDecodeError("transaction block has no string id")
    return TransactionBlock(block["id"], integer(block.get("total_order"), "transaction.total_order"),
                            integer(block.get("data_collection_order"), "transaction.data_collection_order"))


def _server_from_topic(topic: str | None) -> str | None:
    if topic and topic.startswith(_HEARTBEAT_TOPIC_PREFIX):
        return topic[len(_HEARTBEAT_TOPIC_PREFIX):] or None
    return None


def _text(block: Mapping[str, Any], name: str) -> str | None:
    value = block.get(name)
    if value is None or isinstance(value, str):
        return value
    raise EventDecodeError(f"{name} is not a string")
