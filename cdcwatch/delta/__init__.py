"""Delta Lake tables watched from their transaction log: no JVM, no Spark, no data file read."""

from cdcwatch.delta.log import DEFAULT_SMALL_FILE_BYTES, ROW_KINDS, DeltaLog, DeltaLogError, TableState

__all__ = ["DEFAULT_SMALL_FILE_BYTES", "ROW_KINDS", "DeltaLog", "DeltaLogError", "TableState"]
