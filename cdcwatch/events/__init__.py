"""The CDC event model shared by the Kafka collector, the Spark listener and the apply job.

`decode(key, value, topic)` reads one Debezium-format Kafka record (any seed source system, with or
without the JsonConverter schema envelope) into a `ChangeEvent`: kind and op, table, row key,
totally ordered source `Position`, source commit time and snapshot flag. Anything malformed raises
`EventDecodeError` and nothing else.
"""

from cdcwatch.events.decoder import decode, row_key
from cdcwatch.events.errors import EventDecodeError
from cdcwatch.events.model import ROW_OPS, ChangeEvent, Kind, Op, RowKey, Snapshot, TableId, TransactionBlock, TransactionBoundary
from cdcwatch.events.positions import TSO_LOGICAL_BITS, Position, SourceSystem

__all__ = ["ROW_OPS", "TSO_LOGICAL_BITS", "ChangeEvent", "EventDecodeError", "Kind", "Op", "Position", "RowKey", "Snapshot",
           "SourceSystem", "TableId", "TransactionBlock", "TransactionBoundary", "decode", "row_key"]
