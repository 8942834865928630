"""PostgreSQL / YugabyteDB replication slots: the WAL a CDC slot holds back, read with one query."""

from cdcwatch.postgres.slots import SLOT_METRICS, ReplicationSlotCollector

__all__ = ["SLOT_METRICS", "ReplicationSlotCollector"]
