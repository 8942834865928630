"""The reference target on a real PostgreSQL: a task that Spark runs again (its executor lost after the first attempt
had staged) stages its records twice, and the merge still counts each Kafka record once, by source table."""

from __future__ import annotations

import pytest

from spark_listeners.metrics import Counts
from spark_listeners.target import STAGED_COLUMNS, PostgresTarget

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def change(offset: int, row_id: int, position: int, table: str = "items") -> dict:
    return {"topic": f"retry.public.{table}", "partition": 0, "offset": offset, "table_id": f"postgres.public.{table}",
            "row_key": f'[["id",{row_id}]]', "op": "c", "position": f"{position:020d}", "after": f'{{"id":{row_id}}}',
            "commit_time": 1_700_000_000.0, **{column: None for column in STAGED_COLUMNS[9:]}}


def test_a_retried_task_counts_once_and_a_redelivery_counts_as_duplicate(postgres) -> None:
    postgres.sql("DROP DATABASE IF EXISTS retry_target")
    postgres.sql("CREATE DATABASE retry_target")
    target = PostgresTarget(f"host=127.0.0.1 port={postgres.port} user=postgres dbname=retry_target")
    target.create()
    records = [change(offset, offset, 100 + offset) for offset in range(5)]
    records += [change(offset, offset, 100 + offset, "orders") for offset in (5, 6)]
    redelivered = change(7, 0, 100)  # the change at offset 0 again, as a restarted connector sends it
    target.clear_batch(1)
    target.stage(1, records)             # the first attempt, whose executor was lost before it reported
    target.stage(1, [*records, redelivered])  # the attempt Spark ran again, with one more record
    outcome = target.merge(1)
    assert (outcome.applied, outcome.duplicates, outcome.stale) == (7, 1, 0)
    assert outcome.tables == {"postgres.public.items": Counts(5, 1, 0), "postgres.public.orders": Counts(2, 0, 0)}
    assert postgres.sql("SELECT count(*) FROM cdcwatch_apply.rows", database="retry_target") == "7"
    target.stage(2, [change(8, 5, 50, "orders")])  # older than the order row 5 the target holds
    assert target.merge(2).tables == {"postgres.public.orders": Counts(0, 0, 1)}
