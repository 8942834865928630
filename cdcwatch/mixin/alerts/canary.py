"""The canary: the target's freshness for any sink, and which stage stopped when it goes stale.

The canary is a row the source writes every `interval_seconds`; its newest time in the target says how fresh the
target is, whoever applies the changes. When it is older than `canary_age_seconds`, the stage that stopped is the
first of: the source (its own newest canary is as old: nothing writes it), the connector (the newest canary change in
Kafka is as old: it never reached the topic), the sink (Kafka holds newer canaries than the target). Without Kafka
in the deployment the last two cannot be told apart: the stage is `delivery`.
"""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, with_stages

__all__ = ["GROUP"]

CANARY = f'{EXPORTER},target="inventory-canary",server="inventory",topic="inventory.public.cdc_canary"'
_TARGET_AGE = "cdcwatch_canary_target_age_seconds"
_SOURCE_TS = "cdcwatch_canary_source_timestamp_seconds"
_INTERVAL = "cdcwatch_canary_interval_seconds"
_KAFKA_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_CANARY_PARTITION = f'{EXPORTER},target="main",topic="inventory.public.cdc_canary",server="inventory",partition="0"'
_KAFKA = frozenset({"kafka"})


def _canary(target_age: str, source: str = "0+60x40", kafka: str | None = "0+60x40") -> dict[str, str]:
    """A canary written every 10 s (the source's newest, a timestamp, rising a minute a minute while it writes), the
    target's age, and the newest canary change in Kafka."""
    series = {f"{_TARGET_AGE}{{{CANARY}}}": target_age, f"{_SOURCE_TS}{{{CANARY}}}": source, f"{_INTERVAL}{{{CANARY}}}": "10x40"}
    if kafka is not None:
        series[f"{_KAFKA_NEWEST}{{{_CANARY_PARTITION}}}"] = kafka
    return series


_STALE = "0+60x40"
"""The target's canary ages a minute a minute: nothing lands."""
_FIRING = {"server": "inventory"}


RECORDINGS = (
    # how old the newest canary change in Kafka is: the topics that carry a canary (its interval names them)
    Recording("server:cdcwatch_canary_kafka_age_seconds:min", """
        time() - max by (server) (
          cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch)s}
          * on (server, topic) group_left ()
            (0 * max by (server, topic) (cdcwatch_canary_interval_seconds{%(cdcwatch)s}) + 1)
        )
        """,
              Case("the canary's topic got its newest change at the start", _canary(_STALE, kafka="0x40"),
                   labels=_FIRING, value=1200),
              pipeline=True),
)

# the stage that stopped, one branch each; the connector and the sink tell apart only by the canary's topic in Kafka
_STOPPED_STAGE, _STOPPED_STAGE_SHAPED = with_stages(
    """
    label_replace(
      max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s
      and on (server)
        time() - max by (server) (cdcwatch_canary_source_timestamp_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s,
      "stage", "source", "", "")
    """,
    ("kafka", """
    or on (server)
    label_replace(
      max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s
      and on (server)
        server:cdcwatch_canary_kafka_age_seconds:min > %(canary_age_seconds)s,
      "stage", "connector", "", "")
    or on (server)
    label_replace(
      max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s
      and on (server)
        server:cdcwatch_canary_kafka_age_seconds:min <= %(canary_age_seconds)s,
      "stage", "sink", "", "")
    """),
    """
    or on (server)
    label_replace(
      max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch)s}) > %(canary_age_seconds)s,
      "stage", "delivery", "", "")
    """)


ALERTS = (
    Alert(
        "CdcCanaryStale",
        _STOPPED_STAGE,
        "critical", "critical",
        "The target of {{ $labels.server }} is stale: the {{ $labels.stage }} stopped",
        "The newest canary the target of {{ $labels.server }} holds is {{ $value | humanizeDuration }} old. The stage "
        "that stopped: source (nothing writes the canary: the connector running heartbeat.action.query, or the "
        "scheduled job, stopped), connector (the canary's change never reached its Kafka topic), sink (Kafka holds "
        "newer canaries than the target: the sink is not applying them), delivery (connector or sink: no Kafka "
        "reading of the canary's topic tells which).",
        fires=Case("the canary reaches Kafka every minute, the target's stops", _canary(_STALE),
                   labels={**_FIRING, "stage": "sink"}, value=1200, needs=_KAFKA),
        quiet=Case("the target's canary lands every interval", _canary("5x40")),
        since="6m",
        boundary_value=480,
        more=(Case("the source stopped writing the canary: the source's canary and the target's age together",
                   _canary(_STALE, source="0x40", kafka="0x40"),
                   labels={**_FIRING, "stage": "source"}, value=1200),
              Case("the canary stopped reaching Kafka while the source writes it",
                   _canary(_STALE, kafka="0x40"),
                   labels={**_FIRING, "stage": "connector"}, value=1200, needs=_KAFKA),
              Case("without a reading of the canary's topic: connector or sink",
                   _canary(_STALE, kafka=None),
                   labels={**_FIRING, "stage": "delivery"}, value=1200),
              Case("a backlog of 4 minutes, the canary still landing", _canary("240x40"))),
        shaped=_STOPPED_STAGE_SHAPED,
        fires_otherwise=(
            Case("without Kafka: the source writes the canary, the target's has stood 20 minutes old",
                 _canary("1200x40", kafka=None), labels={**_FIRING, "stage": "delivery"}, value=1200),),
    ),
)

GROUP = Group("cdcwatch-canary", RECORDINGS, ALERTS)
