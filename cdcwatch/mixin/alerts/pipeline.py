"""The freshness state of each pipeline (`server`) and of its stages, across the collectors.

Per server and stage, exactly one of `idle`, `flowing`, `backlogged`, `stalled` is 1
(`cdcwatch:freshness_state{server, stage, state}`), from `server_stage:cdcwatch_freshness:code`
(1 idle, 2 flowing, 3 backlogged, 4 stalled: the larger, the worse), one recording rule per stage:

- `capture` (source → connector): moving while Debezium's events-seen counters rise; stalled when they do
  not while the replication slot's unconfirmed WAL grows (the source writes); idle when
  `server:cdcwatch_capture_idle_proof:bool` proves it: the slot keeps up with the WAL position, the MySQL or
  MariaDB source has not written to its binlog, or a heartbeat (TiCDC: a WATERMARK) passed through Kafka or the
  whole pipeline recently (one rule per proof, from the stage it comes from). What depends on the deployment
  reaches the state rule as `server:cdcwatch_capture_signal:bool` (one rule per signal: the slot's WAL grows, the
  lag grows, idle is proven), so the state rule is the same in every deployment. A reader blocked by a full queue
  (no event, the streaming queue without free capacity) is backlogged, not stalled: the hand-off is what stopped.
- `publish` (connector → Kafka, the hand-off): moving while the server's topics' end offsets rise
  (`server:cdcwatch_kafka_log_end_offset:increase`); stalled when they stand while a signal shows the connector holds
  changes for them (`server:cdcwatch_publish_signal:bool`, one rule per signal from the stage that collects it: it
  reads events, its queue is full, Kafka Connect reports its connector or a task PAUSED, FAILED or UNASSIGNED);
  backlogged when they rise but the queue is nearly full (`debezium_queue_free_ratio`, outside a snapshot); idle when
  they stand and no signal shows anything held. A deployment with neither Debezium's series nor Connect's has no
  publish stage.
- `consume` (Kafka): moving while the groups' committed offsets rise on the server's change topics
  (`server:cdcwatch_kafka_consumergroup_topic_committed_offset:increase`); stalled when they do not while messages
  wait; idle when every group is at the end offsets.
- `apply` (Spark): moving while the job reads row changes (replayed duplicates included); stalled when it does
  not and its newest applied change or heartbeat (`server:cdcwatch_spark_newest_applied_age_seconds:min`) is
  older than `freshness_idle_proof_seconds` (the series may have vanished: their last readings count); idle
  when a heartbeat or change that recent proves the source caught up.
- `apply` without the Spark listener, from the pipeline's canary (a pipeline whose Spark job reports keeps the
  listener's state): stalled when the target's newest canary stands while the source wrote canaries
  `freshness_idle_proof_seconds` newer; backlogged when the target's canary moves but is older than `canary_age_seconds` and ageing;
  flowing while it moves; idle when nothing writes the canary (the source's own stands too).
- `pipeline`: the worst stage (`cdcwatch:freshness_state`).

`CdcPipelineStalled` fires for the first stalled stage from the source, once per pipeline: a stall stops every stage
after it too, and one cause pages once.

Moving, with the stage's lag above its alert threshold and still growing, is `backlogged`. A lag reading that
stays frozen while nothing moves (an idle source) never makes a stage backlogged or stalled. Each stage's rule
is a chain of `(condition) * 0 + code`, the first that holds for a server winning.

The series are keyed by `server` alone: they join the exporter's and the Spark listener's series, which
have different `job` and `instance` labels. Series without a server (a Spark query before its first event)
are left out.
"""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from dataclasses import replace

from cdcwatch.mixin.alerts.examples import CONNECT, DBZ, EXPORTER, SLOT, SPARK, TOPIC
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, with_stages

__all__ = ["GROUP", "HEALTHY", "STATE"]

STATE = "cdcwatch:freshness_state"

_EVENTS = "cdcwatch_debezium_events_seen_total"
_DBZ_LAG = "cdcwatch_debezium_lag_behind_source_seconds"
_UNCONFIRMED = "cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes"
_HEARTBEAT = "cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds"
_NEWEST = "cdcwatch_spark_newest_applied_change_timestamp_seconds"
_CHANGES = "cdcwatch_spark_changes_total"
_APPLY_LAG = "cdcwatch_spark_apply_lag_seconds"
_COMMITTED = "cdcwatch_kafka_consumergroup_topic_committed_offset"
_GROUP_LAG = "cdcwatch_kafka_consumergroup_topic_lag_messages"
_GROUP_LAG_SECONDS = "cdcwatch_kafka_consumergroup_topic_lag_seconds"
_KAFKA_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_BINLOG_FILE = "cdcwatch_mysql_binlog_write_file_number"
_BINLOG_POSITION = "cdcwatch_mysql_binlog_write_position_bytes"
_CANARY_TARGET = "cdcwatch_canary_target_timestamp_seconds"
_CANARY_TARGET_AGE = "cdcwatch_canary_target_age_seconds"
_CANARY_SOURCE = "cdcwatch_canary_source_timestamp_seconds"
_END = "cdcwatch_kafka_log_end_offset"
_TOPIC_PARTITIONS = "cdcwatch_kafka_topic_partitions"
_QUEUE_FREE = "cdcwatch_debezium_queue_remaining_capacity"
_QUEUE_CAPACITY = "cdcwatch_debezium_queue_capacity"
_CONNECTOR_STATE = "cdcwatch_connect_connector_state"

# --- examples: one pipeline, `inventory`, every input at a healthy pace unless a case says otherwise --------------
_Q = f'{SPARK},server="inventory"'
_NO_SERVER_DBZ = DBZ.replace('server="inventory"', 'server=""')
_NO_SERVER_TOPIC = TOPIC.replace('server="inventory"', 'server=""')
_HEARTBEAT_TOPIC = TOPIC.replace('group="apply",', "").replace("inventory.public.items", "__debezium-heartbeat.inventory")
_HEARTBEAT_PARTITION = _HEARTBEAT_TOPIC + ',partition="0"'
_BINLOG = f'{EXPORTER},target="maria",server="inventory"'
_CANARY = f'{EXPORTER},target="inventory-canary",server="inventory",topic="inventory.public.cdc_canary"'
_END_PARTITION = f'{EXPORTER},target="main",topic="inventory.public.items",partition="0"'
_TOPIC_SERVER = f'{EXPORTER},target="main",topic="inventory.public.items",server="inventory"'
_NO_SERVER_TOPIC_PARTITIONS = _TOPIC_SERVER.replace('server="inventory"', 'server=""')
_CANARY_STAGE = frozenset({"canary"})
_NEEDS = {"capture": frozenset({"debezium"}), "publish": frozenset({"kafka", "debezium"}), "consume": frozenset({"kafka"}),
          "apply": frozenset({"spark"}), "pipeline": frozenset()}
"""The stages a state case of each stage needs (publish: a signal, here Debezium's, besides Kafka's end offsets)."""
HEALTHY: dict[str, str] = {
    f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40",
    f'{_DBZ_LAG}{{{DBZ},context="streaming"}}': "1x40",
    f"{_UNCONFIRMED}{{{SLOT}}}": "0x40",
    f"{_COMMITTED}{{{TOPIC}}}": "0+60x40",
    f"{_GROUP_LAG}{{{TOPIC}}}": "5x40",
    f"{_GROUP_LAG_SECONDS}{{{TOPIC}}}": "1x40",
    f"{_CHANGES}{{{_Q}}}": "0+60x40",
    f'{_APPLY_LAG}{{{_Q},percentile="99"}}': "2x40",
    f"{_NEWEST}{{{_Q}}}": "0+60x40",
    f"{_HEARTBEAT}{{{_Q}}}": "0+60x40",
    f"{_KAFKA_NEWEST}{{{_HEARTBEAT_PARTITION}}}": "0+60x40",
    f"{_BINLOG_FILE}{{{_BINLOG}}}": "7x40",
    f"{_BINLOG_POSITION}{{{_BINLOG}}}": "4096+4096x40",
    f"{_CANARY_TARGET}{{{_CANARY}}}": "0+60x40",
    f"{_CANARY_TARGET_AGE}{{{_CANARY}}}": "5x40",
    f"{_CANARY_SOURCE}{{{_CANARY}}}": "0+60x40",
    f"{_END}{{{_END_PARTITION}}}": "0+60x40",
    f"{_TOPIC_PARTITIONS}{{{_TOPIC_SERVER}}}": "1x40",
    f'{_QUEUE_FREE}{{{DBZ},context="streaming"}}': "8000x40",
    f'{_QUEUE_CAPACITY}{{{DBZ},context="streaming"}}': "8192x40",
    f'{_CONNECTOR_STATE}{{{CONNECT},type="source",state="PAUSED"}}': "0x40",
    f'cdcwatch_connect_task_state{{{CONNECT},type="source",task="0",state="PAUSED"}}': "0x40",
    f'cdcwatch_debezium_snapshot_state{{{DBZ},context="snapshot",state="running"}}': "0x40",
}
"""Changes flowing: 60 a minute through every stage, a few seconds behind, the connector's queue nearly empty, its
snapshot done and Kafka Connect running it; Debezium's heartbeats in Kafka; the canary landing in the target a few seconds after the
source wrote it."""


def _inputs(**changes: str) -> dict[str, str]:
    """The healthy inputs with some replaced (by metric name; "" drops the metric)."""
    series = dict(HEALTHY)
    for name, values in changes.items():
        key = next(k for k in series if k.split("{")[0] == name)
        if values:
            series[key] = values
        else:
            del series[key]
    return series


_IDLE_SOURCE = dict(
    cdcwatch_debezium_events_seen_total="500x40", cdcwatch_debezium_lag_behind_source_seconds="120x40",
    cdcwatch_kafka_consumergroup_topic_committed_offset="1000x40", cdcwatch_kafka_consumergroup_topic_lag_messages="0x40",
    cdcwatch_kafka_consumergroup_topic_lag_seconds="0x40", cdcwatch_spark_changes_total="1000x40",
    cdcwatch_spark_apply_lag_seconds="300x40", cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40",
    cdcwatch_mysql_binlog_write_position_bytes="4096x40", cdcwatch_canary_target_timestamp_seconds="1000x40",
    cdcwatch_canary_source_timestamp_seconds="1000x40", cdcwatch_canary_target_age_seconds="0+60x40",
    cdcwatch_kafka_log_end_offset="1000x40")
"""Nothing to capture: every lag reading frozen at its last (high) value; heartbeats keep coming; the binlog still;
nothing writes a canary (one that is written keeps every stage flowing)."""


def _state(why: str, stage: str, state: str, **changes: str) -> Case:
    return Case(why, _inputs(**changes), labels={"server": "inventory", "stage": stage, "state": state}, value=1,
                needs=_NEEDS[stage])


def _needing(needs: frozenset[str], case: Case) -> Case:
    """A case whose outcome depends on further stages (an idle proof, or a stage's state that makes the worst)."""
    return replace(case, needs=case.needs | needs)


def _idle_proven(case: Case) -> Case:
    """A case where the capture stage of an idle source reads idle: only a deployment with an idle proof shows it."""
    return replace(case, idle_proven=True)


_POSTGRES = frozenset({"postgres"})
_DEBEZIUM = frozenset({"debezium"})
_CONNECT = frozenset({"connect_rest"})
_SPARK = frozenset({"spark"})
_PIPELINE = {"server": "inventory"}


def _proof(proof: str, why: str, series: dict[str, str], value: float) -> Case:
    return Case(why, series, labels={**_PIPELINE, "proof": proof}, value=value)


def _signal(signal: str, why: str, series: dict[str, str], value: float, needs: frozenset[str] = frozenset()) -> Case:
    return Case(why, series, labels={**_PIPELINE, "signal": signal}, value=value, needs=needs)


def _signal_rule(record: str, signal: str, expr: str, holds: tuple[str, dict[str, str]],
                 *not_holding: tuple[str, dict[str, str]], needs: frozenset[str] = frozenset()) -> Recording:
    """One signal a stage's state reads (1 it holds, 0 not), deployed with the stage that collects it; tested where
    it holds and where it does not (in the deployments with the stages `needs`, when its cases feed another's)."""
    return Recording(record, expr, _signal(signal, *holds, 1, needs), pipeline=True, match=("server", "signal"),
                     labels={"signal": signal}, more=tuple(_signal(signal, *case, 0, needs) for case in not_holding))




def _canary(target: str, age: str, source: str = "0+60x40") -> dict[str, str]:
    """A canary the source writes every 10 s (its newest time rising a minute a minute), and the target's newest."""
    return {f"{_CANARY_TARGET}{{{_CANARY}}}": target, f"{_CANARY_TARGET_AGE}{{{_CANARY}}}": age,
            f"{_CANARY_SOURCE}{{{_CANARY}}}": source}


def _canary_state(why: str, value: float, series: dict[str, str]) -> Case:
    return Case(why, series, labels={**_PIPELINE, "stage": "apply"}, value=value)


# apply from the canary: stalled, backlogged, flowing, idle; a server the Spark listener reports for keeps its state
_CANARY_APPLY, _CANARY_APPLY_SHAPED = with_stages(
    """
    (
      (
        max by (server) (cdcwatch_canary_source_timestamp_seconds{%(cdcwatch)s}) - max by (server) (cdcwatch_canary_target_timestamp_seconds{%(cdcwatch)s}) >= %(freshness_idle_proof_seconds)s
        unless on (server)
          max by (server) (changes(cdcwatch_canary_target_timestamp_seconds{%(cdcwatch)s}[%(freshness_window)s])) > 0
      ) * 0 + 4
      or
      (
        max by (server) (deriv(cdcwatch_canary_target_age_seconds{%(cdcwatch)s}[%(freshness_window)s])) > 0
        and on (server)
          max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s
        and on (server)
          max by (server) (changes(cdcwatch_canary_target_timestamp_seconds{%(cdcwatch)s}[%(freshness_window)s])) > 0
      ) * 0 + 3
      or
      (
        max by (server) (changes(cdcwatch_canary_target_timestamp_seconds{%(cdcwatch)s}[%(freshness_window)s])) > 0
      ) * 0 + 2
      or
      (
        max by (server) (cdcwatch_canary_target_timestamp_seconds{%(cdcwatch)s})
      ) * 0 + 1
    )
    """,
    ("spark", """
    unless on (server)
      max by (server) (last_over_time(cdcwatch_spark_changes_total{%(spark)s, server!=""}[%(memory)s]))
    """))


# The evidence each stage's state is built on, then the state of each stage (one rule each, `stage` their label),
# then the pipeline's: the worst stage.
RECORDINGS = (
    # what shows a capture stage without events idle, one rule per stage it comes from: 1 proven, 0 not
    Recording("server:cdcwatch_capture_idle_proof:bool", """
        max by (server) (deriv(cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{%(cdcwatch)s, server!=""}[%(freshness_window)s])) <= bool 0
        """,
              _proof("slot", "the slot keeps up with the WAL position", {f"{_UNCONFIRMED}{{{SLOT}}}": "0x40"}, 1),
              pipeline=True, match=("server", "proof"), labels={"proof": "slot"},
              more=(_proof("slot", "the WAL the slot has not confirmed grows", {f"{_UNCONFIRMED}{{{SLOT}}}": "0+4096x40"}, 0),)),
    Recording("server:cdcwatch_capture_idle_proof:bool", """
        time() - max by (server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch)s, server!="", topic=~"__debezium-heartbeat.*"}) < bool %(freshness_idle_proof_seconds)s
        """,
              _proof("kafka_heartbeat", "a heartbeat committed a minute ago in Kafka",
                     {f"{_KAFKA_NEWEST}{{{_HEARTBEAT_PARTITION}}}": "0+60x19"}, 1),
              pipeline=True, match=("server", "proof"), labels={"proof": "kafka_heartbeat"},
              more=(_proof("kafka_heartbeat", "the newest heartbeat in Kafka 20 minutes old",
                           {f"{_KAFKA_NEWEST}{{{_HEARTBEAT_PARTITION}}}": "0x40"}, 0),
                    Case("only change topics: no heartbeat to prove anything",
                         {f'{_KAFKA_NEWEST}{{{TOPIC},partition="0"}}': "0+60x40"}))),
    Recording("server:cdcwatch_capture_idle_proof:bool", """
        time() - max by (server) (cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds{%(spark)s, server!=""}) < bool %(freshness_idle_proof_seconds)s
        """,
              _proof("spark_heartbeat", "the apply job applied a heartbeat a minute ago", {f"{_HEARTBEAT}{{{_Q}}}": "0+60x19"}, 1),
              pipeline=True, match=("server", "proof"), labels={"proof": "spark_heartbeat"},
              more=(_proof("spark_heartbeat", "the newest heartbeat applied 20 minutes ago", {f"{_HEARTBEAT}{{{_Q}}}": "0x40"}, 0),)),
    Recording("server:cdcwatch_capture_idle_proof:bool", """
        max by (server) (
          changes(cdcwatch_mysql_binlog_write_file_number{%(cdcwatch)s, server!=""}[%(freshness_window)s])
          + changes(cdcwatch_mysql_binlog_write_position_bytes{%(cdcwatch)s, server!=""}[%(freshness_window)s])
          + (count_over_time(cdcwatch_mysql_binlog_write_position_bytes{%(cdcwatch)s, server!=""}[%(freshness_window)s]) < bool 2)
        ) == bool 0
        """,
              _proof("binlog", "the source's binlog has not moved", {f"{_BINLOG_FILE}{{{_BINLOG}}}": "7x40",
                                                                    f"{_BINLOG_POSITION}{{{_BINLOG}}}": "4096x40"}, 1),
              pipeline=True, match=("server", "proof"), labels={"proof": "binlog"},
              more=(_proof("binlog", "the source writes its binlog", {f"{_BINLOG_FILE}{{{_BINLOG}}}": "7x40",
                                                                      f"{_BINLOG_POSITION}{{{_BINLOG}}}": "4096+4096x40"}, 0),
                    _proof("binlog", "the source rotated its binlog: the position went back, the file number up",
                           {f"{_BINLOG_FILE}{{{_BINLOG}}}": "7x17 8x23", f"{_BINLOG_POSITION}{{{_BINLOG}}}": "9000x17 4x23"}, 0))),
    # capture: the signals whose rules depend on the deployment (the slot's WAL with PostgreSQL, an idle proof from
    # any stage that has one), one rule each, then the state
    _signal_rule("server:cdcwatch_capture_signal:bool", "lag_growing", """
        (max by (server) (deriv(cdcwatch_debezium_lag_behind_source_seconds{%(cdcwatch)s, server!="", context="streaming"}[%(freshness_window)s])) > bool 0)
        * on (server)
        (max by (server) (cdcwatch_debezium_lag_behind_source_seconds{%(cdcwatch)s, server!="", context="streaming"}) > bool %(debezium_lag_seconds)s)
        """,
                 ("the connector's lag behind the source grows past its threshold",
                  {f'{_DBZ_LAG}{{{DBZ},context="streaming"}}': "0+5000x40"}),
                 ("a lag above the threshold that stands", {f'{_DBZ_LAG}{{{DBZ},context="streaming"}}': "90000x40"}),
                 ("a lag that grows below the threshold", {f'{_DBZ_LAG}{{{DBZ},context="streaming"}}': "0+1x40"})),
    _signal_rule("server:cdcwatch_capture_signal:bool", "wal_unconfirmed_grows", """
        max by (server) (deriv(cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > bool 0
        """,
                 ("the WAL the slot has not confirmed grows", {f"{_UNCONFIRMED}{{{SLOT}}}": "0+4096x40"}),
                 ("the slot keeps up", {f"{_UNCONFIRMED}{{{SLOT}}}": "0x40"})),
    _signal_rule("server:cdcwatch_capture_signal:bool", "idle_proven", """
        max by (server) (server:cdcwatch_capture_idle_proof:bool)
        """,
                 ("the slot keeps up with the WAL position", {f"{_UNCONFIRMED}{{{SLOT}}}": "0x40"}),
                 ("the WAL the slot has not confirmed grows", {f"{_UNCONFIRMED}{{{SLOT}}}": "0+4096x40"}),
                 needs=_POSTGRES),  # the slot's proof: any other proof does as well
    Recording("server_stage:cdcwatch_freshness:code", """
        (
          (
            min by (server) (cdcwatch_debezium_queue_remaining_capacity{%(cdcwatch)s, server!="", context="streaming"}) == 0
            unless on (server)
              sum by (server) (increase(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > 0
          ) * 0 + 3
        or
          (
            max by (server) (server:cdcwatch_capture_signal:bool{signal="wal_unconfirmed_grows"}) == 1
            unless on (server)
              sum by (server) (increase(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > 0
          ) * 0 + 4
        or
          (
            max by (server) (server:cdcwatch_capture_signal:bool{signal="lag_growing"}) == 1
            and on (server)
              sum by (server) (increase(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > 0
          ) * 0 + 3
        or
          (
            sum by (server) (increase(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > 0
          ) * 0 + 2
        or
          (
            max by (server) (server:cdcwatch_capture_signal:bool{signal="idle_proven"}) == 1
          ) * 0 + 1
        or
          (
            max by (server) (last_over_time(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(memory)s]))
          ) * 0 + 4
        )
        and on (server)
          max by (server) (last_over_time(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(memory)s]))
        """,
              Case("capture flowing (only Debezium's series)", {f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40"},
                   labels={**_PIPELINE, "stage": "capture"}, value=2),
              pipeline=True, match=("server", "stage"), labels={"stage": "capture"},
              more=(Case("a connector whose events have no server: no state",
                         {f'{_EVENTS}{{{_NO_SERVER_DBZ},context="streaming"}}': "0+60x40"}),)),
    # publish: the rise of the server's topics' end offsets (the end offsets have no server: the topic lends it),
    # then the state
    Recording("server:cdcwatch_kafka_log_end_offset:increase", """
        sum by (server) (
          increase(cdcwatch_kafka_log_end_offset{%(cdcwatch)s}[%(freshness_window)s])
          * on (job, instance, target, topic) group_left (server)
            (0 * cdcwatch_kafka_topic_partitions{%(cdcwatch)s, server!=""} + 1)
        )
        """,
              Case("60 messages a minute", {f"{_END}{{{_END_PARTITION}}}": "0+60x40",
                                             f"{_TOPIC_PARTITIONS}{{{_TOPIC_SERVER}}}": "1x40"},
                   labels=_PIPELINE, value=300),
              pipeline=True,
              more=(Case("a topic of no server: nothing recorded",
                         {f"{_END}{{{_END_PARTITION}}}": "0+60x40",
                          f"{_TOPIC_PARTITIONS}{{{_NO_SERVER_TOPIC_PARTITIONS}}}": "1x40"}),)),
    # what the connector holds for Kafka, one rule per signal from the stage that collects it (1 it does, 0 not):
    # events read, a full queue, Kafka Connect not running it; and a queue nearly full (outside a snapshot)
    _signal_rule("server:cdcwatch_publish_signal:bool", "events_read", """
        sum by (server) (increase(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, server!=""}[%(freshness_window)s])) > bool 0
        """,
                 ("Debezium reads 60 events a minute", {f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40"}),
                 ("no event read", {f'{_EVENTS}{{{DBZ},context="streaming"}}': "500x40"})),
    _signal_rule("server:cdcwatch_publish_signal:bool", "queue_full", """
        min by (server) (cdcwatch_debezium_queue_remaining_capacity{%(cdcwatch)s, server!="", context="streaming"}) == bool 0
        """,
                 ("the queue full", {f'{_QUEUE_FREE}{{{DBZ},context="streaming"}}': "0x40"}),
                 ("room in the queue", {f'{_QUEUE_FREE}{{{DBZ},context="streaming"}}': "8000x40"})),
    _signal_rule("server:cdcwatch_publish_signal:bool", "queue_nearly_full", """
        (
          min by (server) (
            cdcwatch_debezium_queue_remaining_capacity{%(cdcwatch)s, server!="", context="streaming"}
            / cdcwatch_debezium_queue_capacity{%(cdcwatch)s, server!="", context="streaming"}
          ) < bool %(debezium_queue_free_ratio)s
          unless on (server)
            max by (server) (cdcwatch_debezium_snapshot_state{%(cdcwatch)s, server!="", state=~"running|paused"}) == 1
        )
        or on (server)
          0 * max by (server) (cdcwatch_debezium_snapshot_state{%(cdcwatch)s, server!="", state=~"running|paused"})
        """,
                 ("1 % of the queue free", {f'{_QUEUE_FREE}{{{DBZ},context="streaming"}}': "82x40",
                                            f'{_QUEUE_CAPACITY}{{{DBZ},context="streaming"}}': "8192x40"}),
                 ("a snapshot fills the queue by design",
                  {f'{_QUEUE_FREE}{{{DBZ},context="streaming"}}': "50x40",
                   f'{_QUEUE_CAPACITY}{{{DBZ},context="streaming"}}': "8192x40",
                   f'cdcwatch_debezium_snapshot_state{{{DBZ},context="snapshot",state="running"}}': "1x40"})),
    _signal_rule("server:cdcwatch_publish_signal:bool", "not_running", """
        max by (server) (
          cdcwatch_connect_connector_state{%(cdcwatch)s, server!="", type!="sink", state=~"PAUSED|FAILED|UNASSIGNED"}
          or
          cdcwatch_connect_task_state{%(cdcwatch)s, server!="", type!="sink", state=~"PAUSED|FAILED|UNASSIGNED"}
        ) == bool 1
        """,
                 ("Kafka Connect reports the connector PAUSED",
                  {f'{_CONNECTOR_STATE}{{{CONNECT},type="source",state="PAUSED"}}': "1x40"}),
                 ("running", {f'{_CONNECTOR_STATE}{{{CONNECT},type="source",state="PAUSED"}}': "0x40"}),
                 ("a sink of the server paused, its source running: publishing goes on",
                  {f'{_CONNECTOR_STATE}{{{CONNECT},type="source",state="PAUSED"}}': "0x40",
                   f'{_CONNECTOR_STATE}{{{EXPORTER},target="connect",connector="inventory-sink",server="inventory",type="sink",state="PAUSED"}}': "1x40"})),
    Recording("server_stage:cdcwatch_freshness:code", """
        (
          max by (server) (server:cdcwatch_publish_signal:bool{signal!="queue_nearly_full"}) == 1
          and on (server)
            server:cdcwatch_kafka_log_end_offset:increase == 0
        ) * 0 + 4
        or
        (
          server:cdcwatch_kafka_log_end_offset:increase > 0
          and on (server)
            max by (server) (server:cdcwatch_publish_signal:bool{signal="queue_nearly_full"}) == 1
        ) * 0 + 3
        or
        (
          server:cdcwatch_kafka_log_end_offset:increase > 0
        ) * 0 + 2
        or
        (
          server:cdcwatch_kafka_log_end_offset:increase == 0
        ) * 0 + 1
        """,
              Case("publish flowing (only Debezium's events and Kafka's series)",
                   {f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40", f"{_END}{{{_END_PARTITION}}}": "0+60x40",
                    f"{_TOPIC_PARTITIONS}{{{_TOPIC_SERVER}}}": "1x40"},
                   labels={**_PIPELINE, "stage": "publish"}, value=2),
              pipeline=True, match=("server", "stage"), labels={"stage": "publish"}),
    # consume: the committed offsets' rise on the server's change topics, then the state
    Recording("server:cdcwatch_kafka_consumergroup_topic_committed_offset:increase", """
        sum by (server) (
          increase(cdcwatch_kafka_consumergroup_topic_committed_offset{%(cdcwatch)s, server!="", topic!~"__debezium-heartbeat.*"}[%(freshness_window)s])
        )
        """,
              Case("60 offsets committed a minute", {f"{_COMMITTED}{{{TOPIC}}}": "0+60x40", f"{_GROUP_LAG}{{{TOPIC}}}": "5x40"},
                   labels=_PIPELINE, value=300),
              pipeline=True,
              more=(Case("a heartbeat topic's offsets only: no change consumed",
                         {f'{_COMMITTED}{{{_HEARTBEAT_TOPIC},group="apply"}}': "0+60x40",
                          f'{_GROUP_LAG}{{{_HEARTBEAT_TOPIC},group="apply"}}': "5x40"}),)),
    Recording("server_stage:cdcwatch_freshness:code", """
        (
          sum by (server) (cdcwatch_kafka_consumergroup_topic_lag_messages{%(cdcwatch)s, server!="", topic!~"__debezium-heartbeat.*"}) > 0
          unless on (server)
            server:cdcwatch_kafka_consumergroup_topic_committed_offset:increase > 0
        ) * 0 + 4
        or
        (
          max by (server) (deriv(cdcwatch_kafka_consumergroup_topic_lag_messages{%(cdcwatch)s, server!="", topic!~"__debezium-heartbeat.*"}[%(freshness_window)s])) > 0
          and on (server)
            max by (server) (cdcwatch_kafka_consumergroup_topic_lag_seconds{%(cdcwatch)s, server!="", topic!~"__debezium-heartbeat.*"}) > %(kafka_lag_seconds)s
          and on (server)
            server:cdcwatch_kafka_consumergroup_topic_committed_offset:increase > 0
        ) * 0 + 3
        or
        (
          server:cdcwatch_kafka_consumergroup_topic_committed_offset:increase > 0
        ) * 0 + 2
        or
        (
          sum by (server) (cdcwatch_kafka_consumergroup_topic_lag_messages{%(cdcwatch)s, server!="", topic!~"__debezium-heartbeat.*"}) == 0
        ) * 0 + 1
        """,
              Case("consume flowing (only Kafka's series)",
                   {f"{_COMMITTED}{{{TOPIC}}}": "0+60x40", f"{_GROUP_LAG}{{{TOPIC}}}": "5x40",
                    f"{_GROUP_LAG_SECONDS}{{{TOPIC}}}": "1x40"},
                   labels={**_PIPELINE, "stage": "consume"}, value=2),
              pipeline=True, match=("server", "stage"), labels={"stage": "consume"},
              more=(Case("a group whose topic has no server: no state",
                         {f"{_COMMITTED}{{{_NO_SERVER_TOPIC}}}": "0+60x40",
                          f"{_GROUP_LAG}{{{_NO_SERVER_TOPIC}}}": "5x40"}),)),
    # apply: the age of the newest change or heartbeat applied (remembered for `durations.memory`), then the state
    Recording("server:cdcwatch_spark_newest_applied_age_seconds:min", """
        time() - max by (server) (
            last_over_time(cdcwatch_spark_newest_applied_change_timestamp_seconds{%(spark)s, server!=""}[%(memory)s])
          or
            label_replace(last_over_time(cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds{%(spark)s, server!=""}[%(memory)s]), "heartbeat", "1", "", "")
        )
        """,
              Case("the newest change 20 minutes old, the newest heartbeat 5", {f"{_NEWEST}{{{_Q}}}": "0x40",
                                                                               f"{_HEARTBEAT}{{{_Q}}}": "0+60x15"},
                   labels=_PIPELINE, value=300),
              pipeline=True,
              more=(Case("a Spark query before its first event: its series have no server",
                         {f'{_NEWEST}{{{SPARK},server=""}}': "0x40"}),)),
    Recording("server_stage:cdcwatch_freshness:code", """
        (
          server:cdcwatch_spark_newest_applied_age_seconds:min >= %(freshness_idle_proof_seconds)s
          unless on (server)
            sum by (server) (increase(cdcwatch_spark_changes_total{%(spark)s, server!=""}[%(freshness_window)s])) > 0
        ) * 0 + 4
        or
        (
          max by (server) (deriv(cdcwatch_spark_apply_lag_seconds{%(spark)s, server!="", percentile="99"}[%(freshness_window)s])) > 0
          and on (server)
            max by (server) (cdcwatch_spark_apply_lag_seconds{%(spark)s, server!="", percentile="99"}) > %(spark_apply_lag_seconds)s
          and on (server)
            sum by (server) (increase(cdcwatch_spark_changes_total{%(spark)s, server!=""}[%(freshness_window)s])) > 0
        ) * 0 + 3
        or
        (
          sum by (server) (increase(cdcwatch_spark_changes_total{%(spark)s, server!=""}[%(freshness_window)s])) > 0
        ) * 0 + 2
        or
        (
          server:cdcwatch_spark_newest_applied_age_seconds:min
        ) * 0 + 1
        or
        (
          max by (server) (last_over_time(cdcwatch_spark_changes_total{%(spark)s, server!=""}[%(memory)s]))
        ) * 0 + 4
        """,
              Case("apply flowing (only the Spark listener's series)",
                   {f"{_CHANGES}{{{_Q}}}": "0+60x40", f'{_APPLY_LAG}{{{_Q},percentile="99"}}': "2x40",
                    f"{_NEWEST}{{{_Q}}}": "0+60x40"},
                   labels={**_PIPELINE, "stage": "apply"}, value=2),
              pipeline=True, match=("server", "stage"), labels={"stage": "apply"},
              more=(Case("a Spark query before its first event: no state", {f'{_CHANGES}{{{SPARK},server=""}}': "0x40"}),)),
    # apply without the Spark listener: the canary
    Recording("server_stage:cdcwatch_freshness:code", _CANARY_APPLY,
              _canary_state("the target's canary lands every interval: flowing", 2,
                            _canary("0+60x40", "5x40")),
              pipeline=True, match=("server", "stage"), labels={"stage": "apply"}, shaped=_CANARY_APPLY_SHAPED,
              more=(_canary_state("the source writes canaries, the target's newest stands 20 minutes old: stalled", 4,
                                  _canary("0x40", "0+60x40")),
                    _canary_state("the target's canary moves, 10 minutes late and later each minute: backlogged", 3,
                                  _canary("0+30x40", "600+30x40")),
                    _canary_state("nothing writes the canary, the target holds the newest: idle", 1,
                                  _canary("0x40", "0+60x40", source="0x40")),
                    Case("a server the Spark listener reports for: its state is the listener's (flowing), not the "
                         "canary's (stalled)", {**_canary("0x40", "0+60x40"), f"{_CHANGES}{{{_Q}}}": "0+60x40"},
                         labels={**_PIPELINE, "stage": "apply"}, value=2, needs=_SPARK))),
    # the pipeline: each stage's state and the worst of them, as a state set
    Recording("cdcwatch:freshness_state", """
        label_replace((
            server_stage:cdcwatch_freshness:code
          or
            label_replace(max by (server) (server_stage:cdcwatch_freshness:code), "stage", "pipeline", "", "")
        ) == bool 1, "state", "idle", "", "")
        or
        label_replace((
            server_stage:cdcwatch_freshness:code
          or
            label_replace(max by (server) (server_stage:cdcwatch_freshness:code), "stage", "pipeline", "", "")
        ) == bool 2, "state", "flowing", "", "")
        or
        label_replace((
            server_stage:cdcwatch_freshness:code
          or
            label_replace(max by (server) (server_stage:cdcwatch_freshness:code), "stage", "pipeline", "", "")
        ) == bool 3, "state", "backlogged", "", "")
        or
        label_replace((
            server_stage:cdcwatch_freshness:code
          or
            label_replace(max by (server) (server_stage:cdcwatch_freshness:code), "stage", "pipeline", "", "")
        ) == bool 4, "state", "stalled", "", "")
        """,
              _state("every stage flowing: the pipeline flows", "pipeline", "flowing"),
              pipeline=True, match=("server", "stage"),
              more=(
                  # capture
                  _state("capture flowing", "capture", "flowing"),
                  _idle_proven(_state("capture idle: no event, the slot keeps up with the WAL, the lag reading frozen at 2 minutes",
                         "capture", "idle", **_IDLE_SOURCE)),
                  _needing(_POSTGRES, _state("capture stalled: no event while the slot's unconfirmed WAL grows", "capture", "stalled",
                         cdcwatch_debezium_events_seen_total="500x40",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40")),
                  _needing(_POSTGRES, _state("capture stalled: the connector's series vanished while the source writes",
                         "capture", "stalled",
                         cdcwatch_debezium_events_seen_total="0+60x10 stale",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40")),
                  _state("capture backlogged: events flow, 2 minutes late and later each minute", "capture", "backlogged",
                         cdcwatch_debezium_lag_behind_source_seconds="60+10x40"),
                  _needing(_DEBEZIUM, _state("capture backlogged, not stalled: no event while the slot's WAL grows, the "
                         "reader blocked by a full queue", "capture", "backlogged",
                         cdcwatch_debezium_events_seen_total="500x40", cdcwatch_debezium_queue_remaining_capacity="0x40",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40")),
                  # publish
                  _state("publish flowing", "publish", "flowing"),
                  _state("publish idle: nothing read, nothing published", "publish", "idle", **_IDLE_SOURCE),
                  _needing(_CONNECT, _state("publish stalled: the connector PAUSED, the topics stand", "publish", "stalled",
                         cdcwatch_connect_connector_state="1x40", cdcwatch_kafka_log_end_offset="1000x40",
                         cdcwatch_debezium_events_seen_total="500x40")),
                  _needing(_DEBEZIUM, _state("publish stalled: Debezium reads events into its queue, the topics stand",
                         "publish", "stalled", cdcwatch_kafka_log_end_offset="1000x40")),
                  _needing(_DEBEZIUM, _state("publish stalled: the queue full, nothing read, the topics stand", "publish",
                         "stalled", cdcwatch_debezium_events_seen_total="500x40",
                         cdcwatch_debezium_queue_remaining_capacity="0x40", cdcwatch_kafka_log_end_offset="1000x40")),
                  _needing(_DEBEZIUM, _state("publish backlogged: publishing, the queue 1 % free", "publish", "backlogged",
                         cdcwatch_debezium_queue_remaining_capacity="82x40")),
                  # consume
                  _state("consume flowing", "consume", "flowing"),
                  _state("consume idle: the group is at the end offsets, nothing new", "consume", "idle", **_IDLE_SOURCE),
                  _state("consume stalled: the committed offsets stand while messages wait", "consume", "stalled",
                         cdcwatch_kafka_consumergroup_topic_committed_offset="1000x40",
                         cdcwatch_kafka_consumergroup_topic_lag_messages="0+100x40"),
                  _state("consume backlogged: committing, 10 minutes behind and more each minute", "consume", "backlogged",
                         cdcwatch_kafka_consumergroup_topic_lag_messages="0+100x40",
                         cdcwatch_kafka_consumergroup_topic_lag_seconds="600+30x40"),
                  # apply
                  _state("apply flowing", "apply", "flowing"),
                  _state("apply idle: no change, heartbeats applied, the lag reading frozen at 5 minutes", "apply", "idle",
                         **_IDLE_SOURCE),
                  _state("apply stalled: nothing read, the newest change and heartbeat 20 minutes old", "apply", "stalled",
                         cdcwatch_spark_changes_total="1000x40",
                         cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40",
                         cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds="0x40"),
                  _state("apply stalled: the driver's series vanished 10 minutes ago (their last readings count)",
                         "apply", "stalled", cdcwatch_spark_changes_total="0+60x10 stale",
                         cdcwatch_spark_apply_lag_seconds="2x10 stale",
                         cdcwatch_spark_newest_applied_change_timestamp_seconds="0+60x10 stale",
                         cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds="0+60x10 stale"),
                  _state("apply backlogged: changes applied 3 minutes late and later each minute", "apply", "backlogged",
                         cdcwatch_spark_apply_lag_seconds="0+10x40"),
                  _state("apply flowing through a replay after a restart: every change read is a duplicate, the lag "
                         "reading (new changes only) stays low", "apply", "flowing",
                         cdcwatch_spark_newest_applied_change_timestamp_seconds="0+60x18 1080x22"),
                  # the pipeline
                  _idle_proven(_state("an idle source: every stage idle, every lag reading frozen", "pipeline", "idle", **_IDLE_SOURCE)),
                  _needing(_SPARK, _state("the worst stage: capture flows, apply stalled", "pipeline", "stalled",
                         cdcwatch_spark_changes_total="1000x40",
                         cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40",
                         cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds="0x40")),
              )),
)

ALERTS = (
    Alert(
        "CdcPipelineStalled",
        """
        cdcwatch:freshness_state{stage="capture", state="stalled"} == 1
        or
        (
          cdcwatch:freshness_state{stage="publish", state="stalled"} == 1
          unless on (server) cdcwatch:freshness_state{stage="capture", state="stalled"} == 1
        )
        or
        (
          cdcwatch:freshness_state{stage="consume", state="stalled"} == 1
          unless on (server) cdcwatch:freshness_state{stage=~"capture|publish", state="stalled"} == 1
        )
        or
        (
          cdcwatch:freshness_state{stage="apply", state="stalled"} == 1
          unless on (server) cdcwatch:freshness_state{stage=~"capture|publish|consume", state="stalled"} == 1
        )
        """,
        "critical", "stalled",
        "The CDC pipeline {{ $labels.server }} is stalled at {{ $labels.stage }}",
        "Nothing has moved through the {{ $labels.stage }} stage of {{ $labels.server }} for %(for)s while the source "
        "has changes for it, and no recent heartbeat shows it idle. It is the first stalled stage from the source: "
        "the stages after it wait for it.",
        fires=Case("the group's committed offsets stand while messages wait",
                   _inputs(cdcwatch_kafka_consumergroup_topic_committed_offset="1000x40",
                           cdcwatch_kafka_consumergroup_topic_lag_messages="0+100x40"),
                   labels={"server": "inventory", "stage": "consume", "state": "stalled"}, value=1, needs=_NEEDS["consume"]),
        quiet=Case("changes flowing through every stage", _inputs()),
        since="1m",
        more=(_idle_proven(Case("an idle source: every lag reading frozen, heartbeats keep coming", _inputs(**_IDLE_SOURCE))),
              Case("a Spark query before its first event: its series have no server yet",
                   {f'{_CHANGES}{{{SPARK},server=""}}': "0x40"}),
              Case("a replay after a connector restart: only duplicates read for a while",
                   _inputs(cdcwatch_spark_newest_applied_change_timestamp_seconds="0+60x18 1080x22")),
              Case("the apply job reads nothing while its newest change ages past the proof of idleness",
                   {f"{_CHANGES}{{{_Q}}}": "1000x40", f"{_NEWEST}{{{_Q}}}": "0x40"},
                   labels={"server": "inventory", "stage": "apply", "state": "stalled"}, value=1, needs=_SPARK),
              Case("a paused connector: Debezium still reads into its queue, the topics stand, the apply job waits "
                   "(its newest change and heartbeat ageing); one alert, for the hand-off, not for apply",
                   _inputs(cdcwatch_connect_connector_state="1x40", cdcwatch_kafka_log_end_offset="1000x40",
                           cdcwatch_kafka_consumergroup_topic_committed_offset="1000x40",
                           cdcwatch_kafka_consumergroup_topic_lag_messages="0x40", cdcwatch_spark_changes_total="1000x40",
                           cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40",
                           cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds="0x40"),
                   labels={"server": "inventory", "stage": "publish", "state": "stalled"}, value=1,
                   needs=_NEEDS["publish"] | _SPARK | _CONNECT)),
        fires_otherwise=(
            Case("without Kafka: the apply job reads nothing while its newest change ages past the proof of idleness",
                 {f"{_CHANGES}{{{_Q}}}": "1000x40", f"{_NEWEST}{{{_Q}}}": "0x40"},
                 labels={"server": "inventory", "stage": "apply", "state": "stalled"}, value=1, needs=_NEEDS["apply"],
                 since="5m"),
            Case("without Kafka and Spark: the connector sees no event while the slot's unconfirmed WAL grows",
                 _inputs(cdcwatch_debezium_events_seen_total="500x40",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40"),
                 labels={"server": "inventory", "stage": "capture", "state": "stalled"}, value=1,
                 needs=_NEEDS["capture"]),
            Case("without Kafka, Spark or Debezium: the source writes canaries the target never gets",
                 _canary("0x40", "0+60x40"), labels={"server": "inventory", "stage": "apply", "state": "stalled"},
                 value=1, needs=_CANARY_STAGE, since="5m")),
    ),
)

GROUP = Group("cdcwatch-pipeline", RECORDINGS, ALERTS)
