"""The freshness state of each pipeline (`server`) and of its stages, across the collectors.

Per server and stage, exactly one of `idle`, `flowing`, `backlogged`, `stalled` is 1
(`cdcwatch:freshness_state{server, stage, state}`), from `server_stage:cdcwatch_freshness:code`
(1 idle, 2 flowing, 3 backlogged, 4 stalled: the larger, the worse). Stages:

- `capture` (source → connector): moving while Debezium's events-seen counters rise; stalled when they do
  not while the replication slot's unconfirmed WAL grows (the source writes); idle when the slot keeps up with
  the WAL position, or a heartbeat (TiCDC: a WATERMARK) passed through the whole pipeline recently.
- `consume` (Kafka): moving while the groups' committed offsets rise on the server's change topics; stalled
  when they do not while messages wait; idle when every group is at the end offsets.
- `apply` (Spark): moving while the job reads row changes (replayed duplicates included); stalled when it does
  not and its newest applied change or heartbeat is older than `freshness_idle_proof_seconds` (the series may
  have vanished: their last readings count); idle when a heartbeat or change that recent proves the source
  caught up.
- `pipeline`: the worst stage.

Moving, with the stage's lag above its alert threshold and still growing, is `backlogged`. A lag reading that
stays frozen while nothing moves (an idle source) never makes a stage backlogged or stalled.

The series are keyed by `server` alone: they join the exporter's and the Spark listener's series, which
have different `job` and `instance` labels. Series without a server (a Spark query before its first event)
are left out.
"""

from dataclasses import replace

from cdcwatch.mixin.alerts.examples import DBZ, SLOT, SPARK, TOPIC
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording
from cdcwatch.mixin.stages import STAGES

__all__ = ["CODE", "GROUP", "HEALTHY", "STATE", "STATES"]

CODE = "server_stage:cdcwatch_freshness:code"
STATE = "cdcwatch:freshness_state"
STATES = ("idle", "flowing", "backlogged", "stalled")
"""In the order of their codes, 1 to 4."""

_W = "[%(freshness_window)s]"
_M = "[%(memory)s]"
_EVENTS = "cdcwatch_debezium_events_seen_total"
_DBZ_LAG = "cdcwatch_debezium_lag_behind_source_seconds"
_UNCONFIRMED = "cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes"
_HEARTBEAT = "cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds"
_NEWEST = "cdcwatch_spark_newest_applied_change_timestamp_seconds"
_CHANGES = "cdcwatch_spark_changes_total"
_APPLY_LAG = "cdcwatch_spark_apply_lag_seconds"
_COMMITTED = "cdcwatch_kafka_consumergroup_committed_offset"
_GROUP_LAG = "cdcwatch_kafka_consumergroup_topic_lag_messages"
_GROUP_LAG_SECONDS = "cdcwatch_kafka_consumergroup_topic_lag_seconds"
_CHANGE_TOPICS = 'topic!~"__debezium-heartbeat.*"'
_HEARTBEAT_TOPICS = 'topic=~"__debezium-heartbeat.*"'
_KAFKA_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"


def _chain(stage: str, *branches: tuple[str, int], among: str = "") -> str:
    """`branches` (expressions by server, and the code each gives), the first that has a server wins; the stage
    as a label; `among`: only the servers it has."""
    body = "\n  or\n".join(f"    (\n{_indent(expr, 6)}\n    ) * 0 + {code}" for expr, code in branches)
    if among:
        body = f"  (\n{body}\n  )\n  and on (server)\n{_indent(among, 4)}"
    return f'label_replace(\n{body},\n  "stage", "{stage}", "", ""\n)'


def _named(expr: str) -> str:
    """Every selector of `expr` also requires a server (the committed offsets have none: their join adds it)."""
    named = expr.replace("%(cdcwatch)s", '%(cdcwatch)s, server!=""').replace("%(spark)s", '%(spark)s, server!=""')
    return named.replace(f'{_COMMITTED}{{%(cdcwatch)s, server!=""', f"{_COMMITTED}{{%(cdcwatch)s")


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


_CAPTURE_MOVES = f"sum by (server) (increase({_EVENTS}{{%(cdcwatch)s}}{_W})) > 0"
_SOURCE_WRITES = f"max by (server) (deriv({_UNCONFIRMED}{{%(cdcwatch)s}}{_W})) > 0"
_IDLE_PROOFS = (
    ("postgres", f"max by (server) (deriv({_UNCONFIRMED}{{%(cdcwatch)s}}{_W})) <= 0"),
    ("kafka", f'time() - max by (server) ({_KAFKA_NEWEST}{{%(cdcwatch)s, {_HEARTBEAT_TOPICS}}}) < %(freshness_idle_proof_seconds)s'),
    ("spark", f"time() - max by (server) ({_HEARTBEAT}{{%(spark)s}}) < %(freshness_idle_proof_seconds)s"))
"""What shows a capture stage without events idle, by the stage it comes from: the slot keeping up with the WAL, a
Debezium heartbeat in Kafka, or one the apply job applied."""


def _capture(stages: frozenset[str]) -> str:
    proofs = "\nor\n".join(proof for stage, proof in _IDLE_PROOFS if stage in stages)
    return _chain(
        "capture",
        *([(f"{_SOURCE_WRITES}\nunless on (server)\n  {_CAPTURE_MOVES}", 4)] if "postgres" in stages else []),
        (f'max by (server) (deriv({_DBZ_LAG}{{%(cdcwatch)s, context="streaming"}}{_W})) > 0\n'
         f'and on (server)\n  max by (server) ({_DBZ_LAG}{{%(cdcwatch)s, context="streaming"}}) > %(debezium_lag_seconds)s\n'
         f"and on (server)\n  {_CAPTURE_MOVES}", 3),
        (_CAPTURE_MOVES, 2),
        *([(proofs, 1)] if proofs else []),
        (f"max by (server) (last_over_time({_EVENTS}{{%(cdcwatch)s}}{_M}))", 4),
        among=f"max by (server) (last_over_time({_EVENTS}{{%(cdcwatch)s}}{_M}))")


_GROUP_LAG_SEL = f"{_GROUP_LAG}{{%(cdcwatch)s, {_CHANGE_TOPICS}}}"
_CONSUMED = (f"sum by (server) (\n  increase({_COMMITTED}{{%(cdcwatch)s, {_CHANGE_TOPICS}}}{_W})\n"
             f"  * on (job, instance, target, group, topic) group_left (server)\n    (0 * {_GROUP_LAG_SEL} + 1)\n) > 0")
_CONSUME = _chain(
    "consume",
    (f"sum by (server) ({_GROUP_LAG_SEL}) > 0\nunless on (server)\n{_CONSUMED}", 4),
    (f"max by (server) (deriv({_GROUP_LAG_SEL}{_W})) > 0\n"
     f"and on (server)\n  max by (server) ({_GROUP_LAG_SECONDS}{{%(cdcwatch)s, {_CHANGE_TOPICS}}}) > %(kafka_lag_seconds)s\n"
     f"and on (server)\n{_CONSUMED}", 3),
    (_CONSUMED, 2),
    (f"sum by (server) ({_GROUP_LAG_SEL}) == 0", 1))

_APPLIES = f"sum by (server) (increase({_CHANGES}{{%(spark)s}}{_W})) > 0"
_APPLIED_AGE = (f"time() - max by (server) (\n    last_over_time({_NEWEST}{{%(spark)s}}{_M})\n"
                f'  or\n    label_replace(last_over_time({_HEARTBEAT}{{%(spark)s}}{_M}), "heartbeat", "1", "", "")\n)')
_APPLY = _chain(
    "apply",
    (f"{_APPLIED_AGE} >= %(freshness_idle_proof_seconds)s\nunless on (server)\n  {_APPLIES}", 4),
    (f'max by (server) (deriv({_APPLY_LAG}{{%(spark)s, percentile="99"}}{_W})) > 0\n'
     f'and on (server)\n  max by (server) ({_APPLY_LAG}{{%(spark)s, percentile="99"}}) > %(spark_apply_lag_seconds)s\n'
     f"and on (server)\n  {_APPLIES}", 3),
    (_APPLIES, 2),
    (_APPLIED_AGE, 1),
    (f"max by (server) (last_over_time({_CHANGES}{{%(spark)s}}{_M}))", 4))


def _freshness_code(stages: frozenset[str]) -> str:
    """The stages' chains this deployment has (each reads only its own stage's series, and idle proofs of the
    stages present)."""
    chains = [*([_capture(stages)] if "debezium" in stages else []), *([_CONSUME] if "kafka" in stages else []),
              *([_APPLY] if "spark" in stages else [])]
    return _named("\nor\n".join(chains))


_ALL_STAGES = frozenset(STAGES)

_STAGES_AND_PIPELINE = f'(\n    {CODE}\n  or\n    label_replace(max by (server) ({CODE}), "stage", "pipeline", "", "")\n)'
_STATE_SET = "\nor\n".join(f'label_replace({_STAGES_AND_PIPELINE} == bool {code}, "state", "{state}", "", "")'
                           for code, state in enumerate(STATES, start=1))

# --- examples: one pipeline, `inventory`, every input at a healthy pace unless a case says otherwise --------------
_Q = f'{SPARK},server="inventory"'
_PARTITION = TOPIC.replace(',server="inventory"', "") + ',partition="0"'
_HEARTBEAT_PARTITION = (TOPIC.replace('group="apply",', "").replace("inventory.public.items", "__debezium-heartbeat.inventory")
                        + ',partition="0"')
_NEEDS = {"capture": frozenset({"debezium"}), "consume": frozenset({"kafka"}), "apply": frozenset({"spark"}),
          "pipeline": frozenset()}
HEALTHY: dict[str, str] = {
    f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40",
    f'{_DBZ_LAG}{{{DBZ},context="streaming"}}': "1x40",
    f"{_UNCONFIRMED}{{{SLOT}}}": "0x40",
    f"{_COMMITTED}{{{_PARTITION}}}": "0+60x40",
    f"{_GROUP_LAG}{{{TOPIC}}}": "5x40",
    f"{_GROUP_LAG_SECONDS}{{{TOPIC}}}": "1x40",
    f"{_CHANGES}{{{_Q}}}": "0+60x40",
    f'{_APPLY_LAG}{{{_Q},percentile="99"}}': "2x40",
    f"{_NEWEST}{{{_Q}}}": "0+60x40",
    f"{_HEARTBEAT}{{{_Q}}}": "0+60x40",
    f"{_KAFKA_NEWEST}{{{_HEARTBEAT_PARTITION}}}": "0+60x40",
}
"""Changes flowing: 60 a minute through every stage, a few seconds behind; Debezium's heartbeats in Kafka."""


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
    cdcwatch_kafka_consumergroup_committed_offset="1000x40", cdcwatch_kafka_consumergroup_topic_lag_messages="0x40",
    cdcwatch_kafka_consumergroup_topic_lag_seconds="0x40", cdcwatch_spark_changes_total="1000x40",
    cdcwatch_spark_apply_lag_seconds="300x40", cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40")
"""Nothing to capture: every lag reading frozen at its last (high) value; heartbeats keep coming."""


def _state(why: str, stage: str, state: str, **changes: str) -> Case:
    return Case(why, _inputs(**changes), labels={"server": "inventory", "stage": stage, "state": state}, value=1,
                needs=_NEEDS[stage])


def _needing(needs: frozenset[str], case: Case) -> Case:
    """A case whose outcome depends on further stages (an idle proof, or a stage's state that makes the worst)."""
    return replace(case, needs=case.needs | needs)


_POSTGRES = frozenset({"postgres"})
_SPARK = frozenset({"spark"})


RECORDINGS = (
    Recording(CODE, _freshness_code(_ALL_STAGES),
              Case("capture flowing (only Debezium's series)", {f'{_EVENTS}{{{DBZ},context="streaming"}}': "0+60x40"},
                   labels={"server": "inventory", "stage": "capture"}, value=2),
              pipeline=True, shaped=_freshness_code),
    Recording(STATE, _STATE_SET,
              _state("every stage flowing: the pipeline flows", "pipeline", "flowing"),
              pipeline=True, match=("server", "stage"),
              more=(
                  # capture
                  _state("capture flowing", "capture", "flowing"),
                  _state("capture idle: no event, the slot keeps up with the WAL, the lag reading frozen at 2 minutes",
                         "capture", "idle", **_IDLE_SOURCE),
                  _needing(_POSTGRES, _state("capture stalled: no event while the slot's unconfirmed WAL grows", "capture", "stalled",
                         cdcwatch_debezium_events_seen_total="500x40",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40")),
                  _needing(_POSTGRES, _state("capture stalled: the connector's series vanished while the source writes",
                         "capture", "stalled",
                         cdcwatch_debezium_events_seen_total="0+60x10 stale",
                         cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes="0+4096x40")),
                  _state("capture backlogged: events flow, 2 minutes late and later each minute", "capture", "backlogged",
                         cdcwatch_debezium_lag_behind_source_seconds="60+10x40"),
                  # consume
                  _state("consume flowing", "consume", "flowing"),
                  _state("consume idle: the group is at the end offsets, nothing new", "consume", "idle", **_IDLE_SOURCE),
                  _state("consume stalled: the committed offsets stand while messages wait", "consume", "stalled",
                         cdcwatch_kafka_consumergroup_committed_offset="1000x40",
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
                  _state("an idle source: every stage idle, every lag reading frozen", "pipeline", "idle", **_IDLE_SOURCE),
                  _needing(_SPARK, _state("the worst stage: capture flows, apply stalled", "pipeline", "stalled",
                         cdcwatch_spark_changes_total="1000x40",
                         cdcwatch_spark_newest_applied_change_timestamp_seconds="0x40",
                         cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds="0x40")),
              )),
)

ALERTS = (
    Alert(
        "CdcPipelineStalled",
        f'{STATE}{{stage!="pipeline", state="stalled"}} == 1',
        "critical", "stalled",
        "The CDC pipeline {{ $labels.server }} is stalled at {{ $labels.stage }}",
        "Nothing has moved through the {{ $labels.stage }} stage of {{ $labels.server }} for %(for)s while the source "
        "has changes for it, and no recent heartbeat shows it idle.",
        fires=Case("the group's committed offsets stand while messages wait",
                   _inputs(cdcwatch_kafka_consumergroup_committed_offset="1000x40",
                           cdcwatch_kafka_consumergroup_topic_lag_messages="0+100x40"),
                   labels={"server": "inventory", "stage": "consume", "state": "stalled"}, value=1),
        quiet=Case("changes flowing through every stage", _inputs()),
        since="1m",
        more=(Case("an idle source: every lag reading frozen, heartbeats keep coming", _inputs(**_IDLE_SOURCE)),
              Case("a Spark query before its first event: its series have no server yet",
                   {f'{_CHANGES}{{{SPARK},server=""}}': "0x40"}),
              Case("a replay after a connector restart: only duplicates read for a while",
                   _inputs(cdcwatch_spark_newest_applied_change_timestamp_seconds="0+60x18 1080x22")),
              Case("the apply job reads nothing while its newest change ages past the proof of idleness",
                   {f"{_CHANGES}{{{_Q}}}": "1000x40", f"{_NEWEST}{{{_Q}}}": "0x40"},
                   labels={"server": "inventory", "stage": "apply", "state": "stalled"}, value=1, needs=_SPARK)),
    ),
)

GROUP = Group("cdcwatch-pipeline", RECORDINGS, ALERTS)
