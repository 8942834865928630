"""Kafka: consumer groups behind, stalled or rewound, and topics whose newest change is old."""

from cdcwatch.mixin.alerts.examples import SPARK, TOPIC
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_KEY = "job, instance, target, group, topic, server"
_PARTITION = f'{TOPIC},partition="0"'
_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_HEARTBEAT = "cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds"
_SPARK = f'{SPARK},server="inventory"'

RECORDINGS = (
    Recording("group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max",
              f"max by ({_KEY}) (cdcwatch_kafka_consumergroup_topic_lag_seconds{{%(cdcwatch)s}})",
              Case("one topic", {f"cdcwatch_kafka_consumergroup_topic_lag_seconds{{{TOPIC}}}": "900x40"},
                   labels=labels_of(TOPIC), value=900)),
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
        "CdcKafkaDataTooOld",
        f"time() - max by (job, instance, target, server) ({_NEWEST}{{%(cdcwatch)s}}) > %(kafka_data_age_seconds)s\n"
        "unless on (server)\n"
        f"  time() - max by (server) ({_HEARTBEAT}{{%(spark)s}}) < %(kafka_data_age_seconds)s",
        "warning", "warning",
        "The newest change of {{ $labels.server }} in Kafka is old",
        "The newest change any topic of {{ $labels.server }} holds was committed {{ $value | humanizeDuration }} ago "
        "(threshold %(kafka_data_age_seconds)ss) and no fresh heartbeat shows the source idle: the connector does "
        "not deliver.",
        fires=Case("no change and no heartbeat for 80 minutes",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_HEARTBEAT}{{{_SPARK}}}": "0x100"},
                   at="80m", labels=labels_of(TOPIC.replace(',group="apply",topic="inventory.public.items"', "")),
                   value=4800),
        quiet=Case("an idle source: heartbeats keep coming",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_HEARTBEAT}{{{_SPARK}}}": "0+60x100"}, at="80m"),
        since="61m", boundary_value=61 * 60 + 10 * 60,
        more=(Case("changes keep coming", {f"{_NEWEST}{{{_PARTITION}}}": "0+60x100", f"{_HEARTBEAT}{{{_SPARK}}}": "0x100"},
                   at="80m"),),
    ),
)

GROUP = Group("cdcwatch-kafka", RECORDINGS, ALERTS)
