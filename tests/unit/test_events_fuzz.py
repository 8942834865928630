"""Whatever arrives on a topic, the decoder returns an event or raises EventDecodeError — nothing else."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cdcwatch.events import ChangeEvent, EventDecodeError, decode
from tests.fixtures import RECORDED

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20)

SOURCE_FIELDS = ["connector", "name", "ts_ms", "ts_us", "ts_ns", "snapshot", "db", "schema", "table", "txId", "lsn",
                 "sequence", "commit_lsn", "change_lsn", "event_serial_no", "scn", "commit_scn", "file", "pos", "row",
                 "gtid", "commit_ts"]
PAYLOAD_FIELDS = ["op", "ts_ms", "ts_us", "ts_ns", "transaction", "source", "ddl", "tableChanges", "databaseName",
                  "status", "id", "event_count", "data_collections", "before", "after"]
CONNECTORS = ["postgresql", "YugabyteDB", "sqlserver", "oracle", "mysql", "mariadb", "TiCDC", "mongodb", None]


def real_payloads() -> list[dict[str, Any]]:
    payloads = []
    for name in ("postgres-events.jsonl", "mysql-events.jsonl"):
        for line in (RECORDED / name).read_text(encoding="utf-8").splitlines():
            value = json.loads(line)["value"]
            if value is not None:
                payloads.append(json.loads(value)["payload"])
    payloads.append({"status": "END", "id": "571:1", "ts_ms": 5, "event_count": 2,
                     "data_collections": [{"data_collection": "s.a", "event_count": 2}]})
    payloads.append({"ts_ms": 1795304602242})
    return payloads


PAYLOADS = real_payloads()


def decodes_or_rejects(key: Any, value: Any, topic: str | None = None) -> None:
    try:
        assert isinstance(decode(key, value, topic), ChangeEvent)
    except EventDecodeError as error:
        assert error.reason


@settings(max_examples=400)
@given(st.binary(max_size=200), st.binary(max_size=400))
def test_arbitrary_bytes(key: bytes, value: bytes) -> None:
    decodes_or_rejects(key, value)


@settings(max_examples=400)
@given(JSON, JSON, st.booleans())
def test_arbitrary_json(key: Any, value: Any, envelope: bool) -> None:
    if envelope:
        key, value = {"schema": None, "payload": key}, {"schema": None, "payload": value}
    decodes_or_rejects(json.dumps(key), json.dumps(value))


@settings(max_examples=600)
@given(st.sampled_from(PAYLOADS), st.sampled_from(PAYLOAD_FIELDS), st.sampled_from(SOURCE_FIELDS), JSON, JSON,
       st.sampled_from(CONNECTORS), st.one_of(st.none(), st.text(max_size=30)))
def test_real_events_with_one_field_replaced(payload: dict[str, Any], payload_field: str, source_field: str,
                                             payload_value: Any, source_value: Any, connector: str | None,
                                             topic: str | None) -> None:
    mutated = copy.deepcopy(payload)
    source = mutated.get("source")
    if isinstance(source, dict):
        source["connector"] = connector
        source[source_field] = source_value
    mutated[payload_field] = payload_value
    decodes_or_rejects(json.dumps({"id": payload_value}), json.dumps(mutated), topic)


def test_pathological_inputs() -> None:
    for key, value in [(None, None), (None, b"\xff\xfe\x00"), (None, "[" * 100_000), ('{"a":' * 50_000, None),
                       (None, "1" * 5000), (None, '{"op": "c", "source": {"ts_ms": 1e400}}'), (None, 42),
                       (memoryview(b"{}"), None), (None, '{"op": "c", "source": {"ts_ms": NaN}}'), (None, "")]:
        decodes_or_rejects(key, value)
