"""Kafka: consumer groups behind, stalled or rewound, groups that retention is about to overtake, and topics
whose newest change is old."""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import SPARK, TOPIC
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of, with_stages

__all__ = ["GROUP"]

_PARTITION = f'{TOPIC},partition="0"'
_NEWEST = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_HEARTBEATS = (TOPIC.replace('group="apply",', "").replace("inventory.public.items", "__debezium-heartbeat.inventory")
               + ',partition="0"')
_RUNWAY = "cdcwatch_kafka_consumergroup_topic_retention_runway_seconds"
_USED = "cdcwatch_kafka_consumergroup_topic_retention_used_ratio"


_SPARK_HEARTBEAT = "cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds"
_SPARK = f'{SPARK},server="inventory"'


_STATUS = "cdcwatch_kafka_consumergroup_topic_status"
_OTHER = TOPIC.replace('group="apply"', 'group="audit-export"').replace(
    'topic="inventory.public.items",server="inventory"', 'topic="audit",server=""')


def _status(status: str, values: str, where: str = TOPIC) -> dict[str, str]:
    return {f'{_STATUS}{{{where},status="{status}"}}': values}


def _retention(runway: str, used: str) -> dict[str, str]:
    return {f"{_RUNWAY}{{{TOPIC}}}": runway, f"{_USED}{{{TOPIC}}}": used}

RECORDINGS = (
    Recording("group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max",
              "max by (job, instance, target, group, topic, server) (cdcwatch_kafka_consumergroup_topic_lag_seconds{%(cdcwatch)s})",
              Case("one topic", {f"cdcwatch_kafka_consumergroup_topic_lag_seconds{{{TOPIC}}}": "900x40"},
                   labels=labels_of(TOPIC), value=900)),
    Recording("group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min",
              "min by (job, instance, target, group, topic, server) (cdcwatch_kafka_consumergroup_topic_retention_runway_seconds{%(cdcwatch)s})",
              Case("one topic", {f"{_RUNWAY}{{{TOPIC}}}": "1800x40"}, labels=labels_of(TOPIC), value=1800)),
    Recording("group_topic:cdcwatch_kafka_consumergroup_retention_used_ratio:max",
              "max by (job, instance, target, group, topic, server) (cdcwatch_kafka_consumergroup_topic_retention_used_ratio{%(cdcwatch)s})",
              Case("one topic", {f"{_USED}{{{TOPIC}}}": "0.75x40"}, labels=labels_of(TOPIC), value=0.75)),
)

# the newest change in Kafka is old, unless a heartbeat the apply job applied since shows the source idle (without
# the apply job, Kafka's own reading alone)
# a group on a change topic that stalls or stops, unless abandoned; a group a Spark query commits under for lag
# monitors only (its listener says so) is that query's, whose staleness pages instead, also while its driver does not
# answer (within `durations.memory`)
_NOT_PROGRESSING, _NOT_PROGRESSING_SHAPED = with_stages(
    """
    (
        cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, server!="", status="STALL"} == 1
      or
        cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, server!="", status="STOP"} == 1
      unless on (job, instance, target, group, topic, server)
        (
          min_over_time(cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"}[%(abandoned)s]) == 1
          and
            cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"} offset %(abandoned)s == 1
        )
    )
    """,
    ("spark", """
    unless on (group)
      group by (group) (last_over_time(cdcwatch_spark_query_commit_group_info{%(spark)s}[%(memory)s]))
    """))
_COMMITS_UNDER_APPLY = {f'cdcwatch_spark_query_commit_group_info{{{SPARK},group="apply"}}': "1x40"}
_COMMITS_UNDER_AUDIT = {f'cdcwatch_spark_query_commit_group_info{{{SPARK},group="audit"}}': "1x40"}

_DATA_TOO_OLD, _DATA_TOO_OLD_SHAPED = with_stages(
    """
    time() - max by (job, instance, target, server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch)s}) > %(kafka_data_age_seconds)s
    """,
    ("spark", """
    unless on (server)
      time() - max by (server) (cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds{%(spark)s}) < %(kafka_data_age_seconds)s
    """))


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
        _NOT_PROGRESSING,
        "critical", "critical",
        "Consumer group {{ $labels.group }} is {{ $labels.status }} on {{ $labels.topic }}",
        "Group {{ $labels.group }} on the change topic {{ $labels.topic }} of {{ $labels.server }}: STALL = members "
        "connected but no commit while lag > 0; STOP = no member and no commit. Nothing is consumed. A group that a "
        "Spark query commits under for lag monitors only does not page here: that query's freshness does.",
        fires=Case("stalled", _status("STALL", "1x40"), labels=labels_of(TOPIC, 'status="STALL"'), value=1),
        quiet=Case("ok", {**_status("STALL", "0x40"), **_COMMITS_UNDER_AUDIT}),
        more=(Case("stopped for an hour", _status("STOP", "1x60"), at="60m", labels=labels_of(TOPIC, 'status="STOP"'),
                   value=1),
              Case("stopped for longer than durations.abandoned: it warns instead (CdcKafkaConsumerGroupAbandoned)",
                   _status("STOP", "1x400"), at="380m"),
              Case("a group that reads no change topic (no server): it warns instead (CdcKafkaOtherGroupNotProgressing)",
                   _status("STALL", "1x40", _OTHER)),
              Case("the group a Spark query commits under for lag monitors: the query's freshness pages instead",
                   {**_status("STALL", "1x40"), **_COMMITS_UNDER_APPLY}, needs=frozenset({"spark"})),
              Case("that query's driver stopped answering 10 minutes ago: still its freshness's page",
                   {**_status("STALL", "1x40"), **{k: "1x9 stale" for k in _COMMITS_UNDER_APPLY}},
                   needs=frozenset({"spark"})),
              Case("a group beside the one a Spark query commits under pages", {**_status("STALL", "1x40"),
                                                                                 **_COMMITS_UNDER_AUDIT},
                   labels=labels_of(TOPIC, 'status="STALL"'), value=1)),
        shaped=_NOT_PROGRESSING_SHAPED,
    ),
    Alert(
        "CdcKafkaOtherGroupNotProgressing",
        """
        cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, server="", status=~"STALL|STOP"} == 1
        unless on (job, instance, target, group, topic)
          (
            min_over_time(cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"}[%(abandoned)s]) == 1
            and
              cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"} offset %(abandoned)s == 1
          )
        """,
        "warning", "warning",
        "Consumer group {{ $labels.group }} is {{ $labels.status }} on {{ $labels.topic }}",
        "Group {{ $labels.group }} reads {{ $labels.topic }}, which no CDC pipeline writes (no server), and has been "
        "{{ $labels.status }} for %(for)s: STALL = members connected but no commit while lag > 0; STOP = no member and "
        "no commit.",
        fires=Case("stopped", _status("STOP", "1x40", _OTHER),
                   labels={k: v for k, v in labels_of(_OTHER, 'status="STOP"').items() if v}, value=1),
        quiet=Case("ok", _status("STOP", "0x40", _OTHER)),
        more=(Case("a group on a change topic: it pages instead (CdcKafkaConsumerNotProgressing)", _status("STOP", "1x40")),),
    ),
    # abandoned: a group STOP at every sample of `durations.abandoned`, and already at its start
    Alert(
        "CdcKafkaConsumerGroupAbandoned",
        """
        min_over_time(cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"}[%(abandoned)s]) == 1
        and
          cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch)s, status="STOP"} offset %(abandoned)s == 1
        """,
        "warning", "instant",
        "Consumer group {{ $labels.group }} looks abandoned on {{ $labels.topic }}",
        "Group {{ $labels.group }} has had no member and no commit on {{ $labels.topic }} for %(abandoned)s: if nothing "
        "is meant to read with it any more, retire it (delete it with kafka-consumer-groups --delete, or leave it out "
        "with the Kafka target's groups.deny); else start its consumer.",
        fires=Case("stopped for 6 hours and 20 minutes", _status("STOP", "1x400"), at="380m",
                   labels=labels_of(TOPIC, 'status="STOP"'), value=1),
        quiet=Case("stopped for 5 hours", _status("STOP", "0x80 1x320"), at="380m"),
        since="360m",
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
    # the runway alerts are gated on a group past half of the topic's retention (behind by more than it has left); a
    # group that keeps up never is, however short the retention
    Alert(
        "CdcKafkaRetentionRunwayShort",
        """
        group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min < %(kafka_retention_runway_warning_seconds)s
        and
          group_topic:cdcwatch_kafka_consumergroup_retention_used_ratio:max > 0.5
        """,
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
        """
        group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min < %(kafka_retention_runway_critical_seconds)s
        and
          group_topic:cdcwatch_kafka_consumergroup_retention_used_ratio:max > 0.5
        """,
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
        _DATA_TOO_OLD,
        "warning", "warning",
        "The newest change of {{ $labels.server }} in Kafka is old",
        "The newest change any topic of {{ $labels.server }} holds was committed {{ $value | humanizeDuration }} ago "
        "(threshold %(kafka_data_age_seconds)ss), its heartbeat topic included, and no heartbeat applied since shows the "
        "source idle: the connector does not deliver.",
        fires=Case("no change and no heartbeat for 80 minutes",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0x100"},
                   at="80m", labels=labels_of(TOPIC.replace(',group="apply",topic="inventory.public.items"', "")),
                   value=4800),
        quiet=Case("an idle source: Debezium's heartbeats keep coming to its heartbeat topic",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0+60x100",
                    f"{_SPARK_HEARTBEAT}{{{_SPARK}}}": "0x100"}, at="80m"),
        since="61m", boundary_value=61 * 60 + 10 * 60,
        shaped=_DATA_TOO_OLD_SHAPED,
        more=(Case("an idle source whose heartbeat topic is not collected: the heartbeats Spark applied show it idle",
                   {f"{_NEWEST}{{{_PARTITION}}}": "0x100", f"{_SPARK_HEARTBEAT}{{{_SPARK}}}": "0+60x100"}, at="80m",
                   needs=frozenset({"spark"})),
              Case("changes keep coming", {f"{_NEWEST}{{{_PARTITION}}}": "0+60x100", f"{_NEWEST}{{{_HEARTBEATS}}}": "0x100"},
                   at="80m"),),
    ),
)

GROUP = Group("cdcwatch-kafka", RECORDINGS, ALERTS, stage="kafka")
