"""MySQL / MariaDB binary logs: how long until the oldest binlog a Debezium connector still needs expires
(`binlog_expire_logs_seconds` after its rotation), and the binlog bytes the server keeps for it.

The connector's binlog comes from its JMX (`cdcwatch_debezium_binlog_file_number`), joined to the source by the
`server` label (the source's `server` setting). A stopped connector has no JMX: the rule remembers the last binlog
each JVM read for each server (its own previous value, as long as Prometheus evaluates it without a gap of 10
minutes), since a stopped connector is the one whose binlog ages."""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import BINLOG_SOURCE, DBZ_MYSQL, EXPORTER, JVM
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_NUMBER = "cdcwatch_mysql_binlog_file_number"
_EXPIRY = "cdcwatch_mysql_binlog_file_expiry_timestamp_seconds"
_SIZE = "cdcwatch_mysql_binlog_file_size_bytes"
_DBZ_FILE = "cdcwatch_debezium_binlog_file_number"


def _files(connector: str, expiries: tuple[str, str] = ("1000x40", "12000x40"), sizes: bool = False) -> dict[str, str]:
    """A source keeping binlogs 11, 12 (both rotated, with these expiry times) and 13 (being written), of 1, 2 and
    3 MB with `sizes`, and a connector reading `connector`."""
    series = {f"{_DBZ_FILE}{{{DBZ_MYSQL}}}": connector}
    for number, size, expiry in ((11, 1000000, expiries[0]), (12, 2000000, expiries[1]), (13, 3000000, None)):
        where = f'{BINLOG_SOURCE},file="bin.0000{number}"'
        series[f"{_NUMBER}{{{where}}}"] = f"{number}x40"
        if sizes:
            series[f"{_SIZE}{{{where}}}"] = f"{size}x40"
        if expiry is not None:
            series[f"{_EXPIRY}{{{where}}}"] = expiry
    return series


_SOURCE = labels_of(BINLOG_SOURCE)

RECORDINGS = (
    # the binlog each server's connector reads, remembered while it is stopped (its JMX gone)
    Recording("server:cdcwatch_debezium_binlog_file_number:last", """
        min by (job, instance, target, server) (cdcwatch_debezium_binlog_file_number{%(cdcwatch)s})
        or
        last_over_time(server:cdcwatch_debezium_binlog_file_number:last[10m])
        """,
              Case("the connector stopped at binlog 12 ten minutes ago: still 12", {f"{_DBZ_FILE}{{{DBZ_MYSQL}}}": "12x10"},
                   at="30m", labels=labels_of(JVM, 'server="orders"'), value=12)),
    # seconds until the oldest needed binlog expires, floored at 0; 0 as well once the server no longer has it. The
    # binlogs needed are those from the connector's on: the newest binlog a JVM read for the server (a connector task
    # moved to another Connect worker leaves the old worker's, older, remembered binlog behind)
    Recording("server:cdcwatch_mysql_binlog_runway_seconds:min", """
        (
          min without (file) (cdcwatch_mysql_binlog_file_number{%(cdcwatch)s})
          > on (server) group_left () max by (server) (server:cdcwatch_debezium_binlog_file_number:last)
        ) * 0
        or
        clamp_min(
          min without (file) (
            cdcwatch_mysql_binlog_file_expiry_timestamp_seconds{%(cdcwatch)s}
            and on (job, instance, target, server, file)
            (cdcwatch_mysql_binlog_file_number{%(cdcwatch)s} >= on (server) group_left () max by (server) (server:cdcwatch_debezium_binlog_file_number:last))
          ) - time(),
          0
        )
        """,
              Case("binlog 12 expires at 12000 s, read at 1200 s", _files("12x40"), labels=_SOURCE, value=10800)),
    # the binlog bytes the server keeps from the connector's binlog on
    Recording("server:cdcwatch_mysql_binlog_retained_bytes:sum", """
        sum without (file) (
          cdcwatch_mysql_binlog_file_size_bytes{%(cdcwatch)s}
          and on (job, instance, target, server, file)
            (cdcwatch_mysql_binlog_file_number{%(cdcwatch)s} >= on (server) group_left () max by (server) (server:cdcwatch_debezium_binlog_file_number:last))
        )
        """,
              Case("binlogs 12 and 13", _files("12x40", sizes=True), labels=_SOURCE, value=5000000)),
)

_CAUGHT_UP = Case("the connector reads the binlog being written: nothing it needs can expire", _files("13x40"))

_WRITTEN = f"cdcwatch_mysql_binlog_files{{{BINLOG_SOURCE}}}"
_MARIA_UP = f'cdcwatch_up{{{EXPORTER},target="maria",collector="mysql"}}'

ALERTS = (
    Alert(
        "CdcMysqlSourceUnreachable",
        # the server the source's binlogs were read for in the last `durations.memory` (its series go with the
        # database), while cdcwatch cannot reach it and no connector of that server streams
        """
        max by (job, instance, target, server) (last_over_time(cdcwatch_mysql_binlog_files{%(cdcwatch)s, server!=""}[%(memory)s])) * 0 + 1
        and on (job, instance, target) cdcwatch_up{%(cdcwatch)s, collector="mysql"} == 0
        unless on (server) cdcwatch_debezium_connected{%(cdcwatch)s, context="streaming"} == 1
        """,
        "critical", "critical",
        "The MySQL source of {{ $labels.server }} is unreachable",
        "Neither cdcwatch nor the connector of {{ $labels.server }} has reached the MySQL or MariaDB source "
        "{{ $labels.target }} for %(for)s: nothing of it is captured. cdcwatch's log and cdcwatch_target_failure_info "
        "say why (refused, timeout, authentication); the connector resumes from its binlog position once the server "
        "answers, if that binlog is still kept.",
        fires=Case("the server stopped at 5 minutes, its connector disconnected",
                   {_WRITTEN: "3x4 stale", _MARIA_UP: "1x4 0x36", f"cdcwatch_debezium_connected{{{DBZ_MYSQL}}}": "1x4 0x36"},
                   labels=_SOURCE, value=1),
        quiet=Case("the server answers", {_WRITTEN: "3x40", _MARIA_UP: "1x40", f"cdcwatch_debezium_connected{{{DBZ_MYSQL}}}": "1x40"}),
        since="5m",
        more=(Case("cdcwatch cannot reach it while its connector streams: cdcwatch's access (CdcwatchTargetDown warns)",
                   {_WRITTEN: "3x4 stale", _MARIA_UP: "1x4 0x36", f"cdcwatch_debezium_connected{{{DBZ_MYSQL}}}": "1x40"}),),
        through_recovery=True,
    ),
    Alert(
        "CdcMysqlBinlogRunwayShort",
        "server:cdcwatch_mysql_binlog_runway_seconds:min < %(binlog_runway_warning_seconds)s",
        "warning", "warning",
        "The binlog connector {{ $labels.server }} needs expires soon",
        "The oldest binlog the connector of {{ $labels.server }} still needs on {{ $labels.target }} expires in "
        "{{ $value | humanizeDuration }} (threshold %(binlog_runway_warning_seconds)ss); then the server removes it at "
        "its next binlog rotation and the connector cannot resume without a new snapshot.",
        fires=Case("binlog 12 expires at 12000 s", _files("12x40"), labels=_SOURCE, value=10800),
        quiet=Case("binlog 12 expires in a day", _files("12x40", ("1000x40", "87600x40"))),
        boundary_value=12000 - 600,
        more=(_CAUGHT_UP,),
    ),
    Alert(
        "CdcMysqlBinlogRunwayCritical",
        "server:cdcwatch_mysql_binlog_runway_seconds:min < %(binlog_runway_critical_seconds)s",
        "critical", "critical",
        "The binlog connector {{ $labels.server }} needs is about to expire",
        "The oldest binlog the connector of {{ $labels.server }} still needs on {{ $labels.target }} expires in "
        "{{ $value | humanizeDuration }} (threshold %(binlog_runway_critical_seconds)ss; 0: expired or already "
        "removed); once removed the connector must snapshot again.",
        fires=Case("binlog 12 expires at 3000 s", _files("12x40", ("1000x40", "3000x40")), labels=_SOURCE, value=1800),
        quiet=Case("binlog 12 expires at 12000 s", _files("12x40")),
        boundary_value=3000 - 120,
        more=(_CAUGHT_UP,
              Case("the connector stopped at 5 minutes: its binlog ages on", _files("12x5", ("1000x40", "3000x40")),
                   labels=_SOURCE, value=1800),
              Case("the server already removed binlog 10, which the connector needs", _files("10x40"), labels=_SOURCE,
                   value=0)),
    ),
)

GROUP = Group("cdcwatch-mysql", RECORDINGS, ALERTS, stage="mysql")
