"""The monitor itself: cdcwatch and the Spark listener reachable, their targets collected, their
configuration and limits."""

from cdcwatch.mixin.alerts.examples import EXPORTER, SPARK
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of, with_stages

__all__ = ["GROUP"]

_DRIVER = SPARK.split(",query")[0]
_ENDPOINT_DOWN, _ENDPOINT_DOWN_SHAPED = with_stages("up{%(cdcwatch)s} == 0", ("spark", "or up{%(spark)s} == 0"))
"""The exporter or (where the apply job is deployed) the Spark listener does not answer Prometheus."""

ALERTS = (
    Alert(
        "CdcwatchTargetDown",
        # a worker's JVM (its `debezium` entry named as its `connect` entry) fails with the worker: one page,
        # CdcConnectWorkerDown's; in the expression, since that alert may fire an evaluation later than this one
        '(cdcwatch_up{%(cdcwatch)s, collector!="connect"} == 0) unless on (job, instance, target) (cdcwatch_up{%(cdcwatch)s, collector="connect"} == 0)',  # noqa: E501
        "warning", "critical",
        "cdcwatch cannot reach {{ $labels.target }} ({{ $labels.collector }})",
        "The {{ $labels.collector }} collection from {{ $labels.target }} has failed for %(for)s; cdcwatch's log "
        "says why (refused, timeout, authentication). The alerts on that target's series are blind. (A Kafka "
        "Connect worker that does not answer pages: CdcConnectWorkerDown.)",
        fires=Case("failing", {f'cdcwatch_up{{{EXPORTER},collector="kafka",target="main"}}': "0x40"},
                   labels=labels_of(EXPORTER, 'collector="kafka",target="main"')),
        quiet=Case("collected", {f'cdcwatch_up{{{EXPORTER},collector="kafka",target="main"}}': "1x40"}),
        more=(Case("a Kafka Connect worker: CdcConnectWorkerDown pages instead",
                   {f'cdcwatch_up{{{EXPORTER},collector="connect",target="connect"}}': "0x40"},
                   needs=frozenset({"connect_rest"})),
              Case("the JMX of a worker that does not answer either: CdcConnectWorkerDown pages instead",
                   {f'cdcwatch_up{{{EXPORTER},collector="connect",target="connect"}}': "1 0x40",
                    f'cdcwatch_up{{{EXPORTER},collector="debezium",target="connect"}}': "0x40"},
                   needs=frozenset({"connect_rest"})),
              Case("the JMX of a worker whose REST API answers",
                   {f'cdcwatch_up{{{EXPORTER},collector="connect",target="connect"}}': "1x40",
                    f'cdcwatch_up{{{EXPORTER},collector="debezium",target="connect"}}': "0x40"},
                   labels=labels_of(EXPORTER, 'collector="debezium",target="connect"'),
                   needs=frozenset({"connect_rest"}))),
        shaped=lambda stages: (None if "connect_rest" in stages
                               else 'cdcwatch_up{%(cdcwatch)s, collector!="debezium"} == 0' if "debezium" in stages
                               else "cdcwatch_up{%(cdcwatch)s} == 0"),
    ),
    Alert(
        "CdcwatchEndpointDown",
        _ENDPOINT_DOWN,
        "warning", "critical",
        "Prometheus cannot scrape {{ $labels.job }} at {{ $labels.instance }}",
        "{{ $labels.instance }} ({{ $labels.job }}) has not answered Prometheus for %(for)s: its metrics, and every "
        "alert built on them, are blind.",
        fires=Case("the exporter does not answer", {f"up{{{_DRIVER}}}": "1x40", f"up{{{EXPORTER}}}": "0x40"},
                   labels=labels_of(EXPORTER)),
        quiet=Case("both answer", {f"up{{{_DRIVER}}}": "1x40", f"up{{{EXPORTER}}}": "1x40"}),
        more=(Case("the driver does not answer", {f"up{{{_DRIVER}}}": "0x40", f"up{{{EXPORTER}}}": "1x40"},
                   labels=labels_of(_DRIVER), needs=frozenset({"spark"})),),
        shaped=_ENDPOINT_DOWN_SHAPED,
    ),
    Alert(
        "CdcwatchEndpointAbsent",
        "absent(up{%(cdcwatch)s})",
        "warning", "warning",
        "Prometheus has no cdcwatch target",
        "No scrape target of {{ $labels.job }} has existed for %(for)s: cdcwatch fell out of service discovery, "
        "and every cdcwatch alert is silent.",
        fires=Case("no target", {f"up{{{_DRIVER}}}": "1x40"}, labels=labels_of(EXPORTER.split(",instance")[0]), value=1),
        quiet=Case("a target", {f"up{{{EXPORTER}}}": "1x40"}),
    ),
    Alert(
        "CdcwatchScrapeSlow",
        "cdcwatch_scrape_duration_seconds{%(cdcwatch)s} > %(scrape_duration_seconds)s",
        "info", "warning",
        "Collecting from {{ $labels.target }} is slow",
        "The {{ $labels.collector }} collection from {{ $labels.target }} takes {{ $value | humanizeDuration }} "
        "(threshold %(scrape_duration_seconds)ss); keep it well below Prometheus' scrape timeout.",
        fires=Case("8 s", {f'cdcwatch_scrape_duration_seconds{{{EXPORTER},collector="kafka",target="main"}}': "8x40"},
                   labels=labels_of(EXPORTER, 'collector="kafka",target="main"'), value=8),
        quiet=Case("0.2 s", {f'cdcwatch_scrape_duration_seconds{{{EXPORTER},collector="kafka",target="main"}}': "0.2x40"}),
    ),
    Alert(
        "CdcwatchConfigReloadFailed",
        "cdcwatch_config_last_reload_successful{%(cdcwatch)s} == 0",
        "info", "instant",
        "cdcwatch rejected its new configuration",
        "The last reload of cdcwatch's configuration at {{ $labels.instance }} failed; the previous one stays in use "
        "until the file is fixed. Its log names the problems.",
        fires=Case("rejected", {f"cdcwatch_config_last_reload_successful{{{EXPORTER}}}": "0x40"},
                   labels=labels_of(EXPORTER)),
        quiet=Case("loaded", {f"cdcwatch_config_last_reload_successful{{{EXPORTER}}}": "1x40"}),
    ),
    Alert(
        "CdcwatchSeriesDropped",
        """
        sum by (job, instance, target) (increase(cdcwatch_series_dropped_total{%(cdcwatch)s}[10m])) > 0
        or sum by (job, instance, target) (increase(cdcwatch_kafka_series_dropped_total{%(cdcwatch)s}[10m])) > 0
        """,
        "info", "instant",
        "cdcwatch drops series of {{ $labels.target }}",
        "{{ $labels.target }} exported more series than limits.max_series_per_target (or the Kafka collector's "
        "max_partitions) allows in the last 10 minutes: the dashboards and alerts miss the rest.",
        fires=Case("dropping", {f'cdcwatch_series_dropped_total{{{EXPORTER},collector="kafka",target="main"}}': "0+50x40",
                                f'cdcwatch_kafka_series_dropped_total{{{EXPORTER},target="main"}}': "0x40"},
                   labels=labels_of(EXPORTER, 'target="main"'), value=500),
        quiet=Case("nothing dropped lately", {
            f'cdcwatch_series_dropped_total{{{EXPORTER},collector="kafka",target="main"}}': "50x40",
            f'cdcwatch_kafka_series_dropped_total{{{EXPORTER},target="main"}}': "3x40"}),
        since="1m", boundary_value=100,
    ),
)

GROUP = Group("cdcwatch-self", (), ALERTS)
