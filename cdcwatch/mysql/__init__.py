"""MySQL / MariaDB binary logs: which binlogs a source keeps, how big, since when, and when each one expires."""

from cdcwatch.mysql.binlog import BINLOG_METRICS, BinlogCollector

__all__ = ["BINLOG_METRICS", "BinlogCollector"]
