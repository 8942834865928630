"""Kafka: consumer groups behind, stalled or rewound, groups that retention is about to overtake, and topics
whose newest change is old."""

from cdcwatch.mixin.alerts.examples import TOPIC
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_KEY = "job, instance, target, group, topic, server"
_PARTITION = f'{TOPIC},partition="0"'
_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_HEARTBEATS = (TOPIC.replace('group="apply",', "").replace("inventory.public.items", "__debezium-heartbeat.inventory")
               + ',partition="0"')
_RUNWAY = "cdcwatch_kafka_consumergroup_topic_retention_runway_seconds"
_USED = "cdcwatch_kafka_consumergroup_topic_retention_used_ratio"
_MIN_RUNWAY = "group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min"
_MAX_USED = "group_topic:cdcwatch_kafka_consumergroup_retention_used_ratio:max"
_BEHIND = f"and\n  {_MAX_USED} > 0.5"
"""The gate of the runway alerts: the group is past half of the topic's retention (behind by more than it has
left); a group that keeps up never is, however short the retention."""


def _retention(runway: str, used: str) -> dict[str, str]:
    return {f"{_RUNWAY}{{{TOPIC}}}": runway, f"{_USED}{{{TOPIC}}}": used}

RECORDINGS = (
    Recording("group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max",
              f"max by ({_KEY}) (cdcwatch_kafka_consumergroup_topic_lag_seconds{{%(cdcwatch)s}})",
              Case("one topic", {f"cdcwatch_kafka_consumergroup_topic_lag_seconds{{{TOPIC}}}": "900x40"},
                   labels=labels_of(TOPIC), value=900)),
    Recording(_MIN_RUNWAY, f"min by ({_KEY}) ({_RUNWAY}{{%(cdcwatch)s}})",
              Case("one topic", {f"{_RUNWAY}{{{TOPIC}}}": "1800x40"}, labels=labels_of(TOPIC), value=1800)),
    Recording(_MAX_USED, f"max by ({_KEY}) ({_USED}{{%(cdcwatch)s}})",
              Case("one topic", {f"{_USED}{{{TOPIC}}}": "0.75x40"}, labels=labels_of(TOPIC), value=0.75)),
)

ALERTS = (
    Alert(
        "CdcKafkaConsumerLagHigh",
        "group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max > %(kafka_lag_seconds)s",
        "warning", "warning",
        "Consumer group {{ $labels.group }} lags on {{ $labels.topic }}",
        "The next message group {{ $labels.group }} will read from {{ $labels.topic }} is "
        "{{ $value | humanizeDuration }} old (threshold %(kafka_lag_seconds)ss).",
        fires=Case("15 minutes behind", {f"cdcwatch_kafka_consumergroup_topic_lag_seconds{{{TOPIC}}}": "900x40"},
                   labels=labels_of(TOPIC), value=900),
        quiet=Case("caught up", {f"cdcwatch_kafka_consumergroup_topic_lag_seconds{{{TOPIC}}}": "3x40"}),
    ),
    Alert(
        "CdcKafkaConsumerNotProgressing",
        'cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status=~"STALL|STOP"} == 1',
        "critical", "critical",
        "Consumer group {{ $labels.group }} is {{ $labels.status }} on {{ $labels.topic }}",
        "Group {{ $labels.group }} on {{ $labels.topic }}: STALL = members connected but no commit while lag > 0; "
        "STOP = no member and no commit. Nothing is consumed.",
        fires=Case("stalled", {f'cdcwatch_kafka_consumergroup_topic_status{{{TOPIC},status="STALL"}}': "1x40"},
                   labels=labels_of(TOPIC, 'status="STALL"'), value=1),
        quiet=Case("ok", {f'cdcwatch_kafka_consumergroup_topic_status{{{TOPIC},status="STALL"}}': "0x40"}),
    ),
    Alert(
        "CdcKafkaConsumerRewound",
        'cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="REWIND"} == 1',
        "warning", "instant",
        "Consumer group {{ $labels.group }} rewound on {{ $labels.topic }}",
        "The committed offset of {{ $labels.group }} on {{ $labels.topic }} went backwards: someone reset offsets, "
        "expect re-processing and duplicates.",
        fires=Case("rewound", {f'cdcwatch_kafka_consumergroup_topic_status{{{TOPIC},status="REWIND"}}': "1x40"},
                   labels=labels_of(TOPIC, 'status="REWIND"'), value=1),
        quiet=Case("ok", {f'cdcwatch_kafka_consumergroup_topic_status{{{TOPIC},status="REWIND"}}': "0x40"}),
    ),
    Alert(
        "CdcKafkaRetentionRunwayShort",
        f"{_MIN_RUNWAY} < %(kafka_retention_runway_warning_seconds)s\n{_BEHIND}",
        "warning", "warning",
        "Retention will soon delete what {{ $labels.group }} has not read of {{ $labels.topic }}",
        "In {{ $value | humanizeDuration }} (threshold %(kafka_retention_runway_warning_seconds)ss) retention.ms "
        "of {{ $labels.topic }} reaches the next message group {{ $labels.group }} will consume, and the group is "
        "past half of the topic's retention; what it has not read by then is deleted unread.",
        fires=Case("retention 20 hours, 17 hours behind", _retention("10800x40", "0.85x40"),
                   labels=labels_of(TOPIC), value=10800),
        quiet=Case("caught up on a topic that keeps an hour", _retention("3600x40", "0x40")),
    ),
    Alert(
        "CdcKafkaRetentionRunwayCritical",
        f"{_MIN_RUNWAY} < %(kafka_retention_runway_critical_seconds)s\n{_BEHIND}",
        "critical", "critical",
        "Retention is about to delete what {{ $labels.group }} has not read of {{ $labels.topic }}",
        "In {{ $value | humanizeDuration }} (threshold %(kafka_retention_runway_critical_seconds)ss) retention.ms "
        "of {{ $labels.topic }} reaches the next message group {{ $labels.group }} will consume: changes will be "
        "deleted before they are applied.",
        fires=Case("retention 2 hours, 90 minutes behind", _retention("1800x40", "0.75x40"),
                   labels=labels_of(TOPIC), value=1800),
        quiet=Case("10 minutes behind on a topic that keeps 40 minutes", _retention("1800x40", "0.25x40")),
        more=(Case("overdue: the next message is past retention.ms", _retention("-600x40", "1.083x40"),
                   labels=labels_of(TOPIC), value=-600),),
    ),
    Alert(
        "CdcKafkaDataTooOld",
        f"time() - max by (job, instance, target, server) ({_NEWEST}{{%(cdcwatch)s}}) > %(kafka_data_age_seconds)s",
        "warning", "warning",
        "The newest change of {{ $labels.server }} in Kafka is old",
        "The newest change any topic of {{ $labels.server }} holds was committed {{ $value | humanizeDuration }} ago "
        "(threshold %(kafka_data_age_seconds)ss), its heartbeat topic included: the connector does not deliver.",
        fires=Case("no change and no heartbeat for 80 minutes",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0x100"},
                   at="80m", labels=labels_of(TOPIC.replace(',group="apply",topic="inventory.public.items"', "")),
                   value=4800),
        quiet=Case("an idle source: Debezium's heartbeats keep coming to its heartbeat topic",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0+60x100"}, at="80m"),
        since="61m", boundary_value=61 * 60 + 10 * 60,
        more=(Case("changes keep coming", {f"{_NEWEST}{{{_PARTITION}}}": "0+60x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0x100"},
                   at="80m"),),
    ),
)

GROUP = Group("cdcwatch-kafka", RECORDINGS, ALERTS, stage="kafka")
