"""Chaos over the whole demo pipeline under steady traffic: crashes and pauses of every component,
with the truth checked after each one.

Runs the demo stack (devstack/demo.py) in this process and, in turn, kill -9s and restarts the
Kafka Connect worker, the Kafka broker, the Spark driver, the target PostgreSQL and cdcwatch itself,
SIGSTOPs the worker, the broker and the Spark driver for --pause-seconds, and cuts the broker off the
network for --cut-seconds: the broker then runs in a network namespace of its own (devstack/netns.py),
every client reaching it through a veth link whose packets the cut drops silently both ways, so clients
time out instead of being refused (needs root or CAP_NET_ADMIN). For every fault:
- detection: the first expected alert seen firing in Prometheus, seconds after the fault;
- recovery: the alert resolved and the target equal to the source again, row for row (a checksum
  of the captured table on both sides, taken with the traffic held still), seconds after recovery;
- duplicates: the re-delivered events counted independently from the topic (a change whose table,
  key and source position appeared at an earlier offset) since the fault, next to what the listener
  counted meanwhile (`cdcwatch_spark_duplicates_total`, followed across driver restarts): equal, or
  at least as many counted where the Spark driver restarted (a re-run batch counts again);
- cdcwatch answered every scrape (one a second, the demo's 3 s deadline) while it was up.
The same duplicates check over the whole run at the end. A table is printed; exit 1 on any failed check.

    .venv/bin/python bench/chaos.py [--faults all|short|NAME,...] [--pause-seconds 30] [--cut-seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdcwatch.promapi import PrometheusApi  # noqa: E402
from devstack.demo import DemoStack  # noqa: E402
from devstack.demo_settings import CHANGES_TOPIC, SCRAPE_INTERVAL  # noqa: E402
from devstack.procs import StackError, exit_on_sigterm, free_port, wait_for  # noqa: E402
from devstack.scenarios import kill_connect_between_flushes  # noqa: E402

DEADLINE = float(SCRAPE_INTERVAL.rstrip("s"))
SOURCE_SUM = ("SELECT count(*) || ' ' || coalesce(md5(string_agg(id || ':' || name, ',' ORDER BY id)), '') "
              "FROM customers")
TARGET_SUM = ("SELECT count(*) || ' ' || coalesce(md5(string_agg((row->>'id') || ':' || (row->>'name'), ',' "
              "ORDER BY (row->>'id')::int)), '') FROM cdcwatch_apply.rows WHERE table_id LIKE '%%customers' "
              "AND NOT deleted")


def _pid_of(postgres: Any) -> int:
    return int((postgres.data / "postmaster.pid").read_text().split()[0])


def _kill_postgres(postgres: Any) -> None:
    pid = _pid_of(postgres)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30, "the postmaster to die")


def _start_postgres(postgres: Any) -> None:
    wait_for(lambda: _try(postgres.start), 90, "PostgreSQL to start again after the crash", interval=1)


def _try(action: Callable[[], None]) -> bool:
    try:
        action()
        return True
    except StackError:
        return False  # e.g. the killed postmaster's children still hold its shared memory


def _ensure_apply(stack: DemoStack) -> None:
    """The apply job runs (a supervisor restarts a driver whose query failed while the target was down)."""
    if stack.apply.process is None or stack.apply.process.poll() is not None:
        stack.apply.start()


def _restart_target(stack: DemoStack) -> None:
    _start_postgres(stack.target)
    _ensure_apply(stack)


def _pause(component: Callable[[DemoStack], Any]) -> tuple[Callable[[DemoStack], None], Callable[[DemoStack], None]]:
    return (lambda stack: component(stack).server.signal(signal.SIGSTOP),
            lambda stack: component(stack).server.signal(signal.SIGCONT))


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Callable[[DemoStack], Any]
    """Injects the fault; may return when (time.time()) it struck, after waiting for the right moment."""
    recover: Callable[[DemoStack], None]
    alerts: tuple[tuple[str, dict[str, str]], ...]
    """Any of these firing detects the fault."""
    stops_cdcwatch: bool = False
    held: str = ""
    """"pause" or "cut": the fault lasts --pause-seconds or --cut-seconds, whether or not detected sooner."""
    netns: bool = False
    """Needs the broker in a network namespace."""


_CONNECT: tuple[tuple[str, dict[str, str]], ...] = (("CdcConnectWorkerDown", {}),)
_KAFKA = (("CdcwatchTargetDown", {"collector": "kafka"}),)
_SPARK: tuple[tuple[str, dict[str, str]], ...] = (("CdcwatchEndpointDown", {"job": "cdcwatch-spark"}), ("CdcSparkDriverAbsent", {}),
          ("CdcSparkQueryFailed", {}))
_CDCWATCH = (("CdcwatchEndpointDown", {"job": "cdcwatch"}),)

FAULTS = {f.name: f for f in (
    Fault("kill connect", kill_connect_between_flushes, lambda s: s.connect.start(), _CONNECT),
    Fault("kill broker", lambda s: s.broker.kill(), lambda s: s.broker.start(), _KAFKA),
    Fault("kill spark driver", lambda s: s.apply.server.kill(), lambda s: s.apply.start(), _SPARK),
    Fault("kill target postgres", lambda s: _kill_postgres(s.target), lambda s: _restart_target(s), _SPARK),
    Fault("kill cdcwatch", lambda s: s.serve.server.kill(), lambda s: s.serve.start(), _CDCWATCH, stops_cdcwatch=True),
    Fault("pause connect", *_pause(lambda s: s.connect), _CONNECT, held="pause"),
    Fault("pause broker", *_pause(lambda s: s.broker), _KAFKA, held="pause"),
    Fault("pause spark driver", *_pause(lambda s: s.apply), _SPARK, held="pause"),
    # librdkafka's requests to an unreachable broker time out within the collection deadline: cdcwatch_up=0
    Fault("broker network cut", lambda s: s.broker_host.cut(), lambda s: s.broker_host.heal(), _KAFKA, held="cut",
          netns=True),
)}
SHORT = ("kill connect", "kill spark driver", "broker network cut")
"""The faults the test suite runs (killing cdcwatch raises the same CdcwatchEndpointDown as killing the Spark driver:
only the full run has it)."""


@dataclass
class Outcome:
    fault: str
    detected_after: float | None = None
    alert: str = ""
    resolved_after: float | None = None
    converged_after: float | None = None
    rows: int = 0
    equal: bool = False
    re_delivered: int | None = None
    """Re-deliveries in the topic since the fault (counted from the topic)."""
    duplicates: float = 0.0
    """Duplicates the listener counted since the fault."""
    driver_restarted: bool = False
    scrapes: int = 0
    """Scrapes of cdcwatch answered while the fault lasted."""
    slowest: float = 0.0
    problems: list[str] = field(default_factory=list)


class Monitor(threading.Thread):
    """Scrapes cdcwatch (deadline DEADLINE) and the Spark driver once a second; follows the duplicates counter."""

    def __init__(self, stack: DemoStack) -> None:
        super().__init__(name="chaos-monitor", daemon=True)
        self.stack = stack
        self.stop = threading.Event()
        self.cdcwatch_down = threading.Event()
        self.failures: list[str] = []
        self.scrapes = 0
        self.answered: list[tuple[float, float]] = []
        """(time.monotonic() when a scrape started, seconds it took) of every answered scrape."""
        self.duplicates = 0.0
        self._last_duplicates: float | None = None
        self.driver_pids: set[int] = set()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            if not self.cdcwatch_down.is_set():
                started = time.monotonic()
                try:
                    urllib.request.urlopen(self.stack.info["metrics"], timeout=DEADLINE).read()
                    took = time.monotonic() - started
                    self.answered.append((started, took))
                    if took > DEADLINE:
                        self.failures.append(f"{time.strftime('%H:%M:%S')} scrape took {took:.1f}s")
                except Exception as exc:
                    if not self.cdcwatch_down.is_set():
                        self.failures.append(f"{time.strftime('%H:%M:%S')} scrape failed: {exc}")
                self.scrapes += 1
            self._follow_duplicates()

    def _follow_duplicates(self) -> None:
        with self._lock:
            if self.stack.apply.process is not None:
                self.driver_pids.add(self.stack.apply.process.pid)
            try:
                text = self.stack.apply.metrics()
            except Exception:
                return  # the driver is down or paused
            value = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                        if line.startswith("cdcwatch_spark_duplicates_total{"))
            last = self._last_duplicates  # the first reading is the baseline
            if last is not None:
                self.duplicates += value if value < last else value - last  # a new driver starts at 0
            self._last_duplicates = value

    def counted(self) -> tuple[float, int]:
        """(duplicates counted so far, drivers seen so far), read now (the listener answers with the traffic still)."""
        wait_for(lambda: self.stack.apply.metrics(), 30, "the Spark driver's metrics")
        self._follow_duplicates()
        with self._lock:
            return self.duplicates, len(self.driver_pids)


def firing(prometheus: str, alerts: tuple[tuple[str, dict[str, str]], ...]) -> str:
    """The name of an expected alert firing now, or ''."""
    for entry in PrometheusApi(prometheus, timeout=5).alerts():
        for name, labels in alerts:
            if entry["state"] == "firing" and entry["labels"].get("alertname") == name and \
                    all(entry["labels"].get(k) == v for k, v in labels.items()):
                return name
    return ""


def converge(stack: DemoStack, timeout: float) -> tuple[float, int, bool]:
    """Traffic held still, wait until target == source; (seconds, rows, equal)."""
    stack.traffic.pause()
    started = time.monotonic()
    try:
        source = stack.source.sql(SOURCE_SUM)
        try:
            wait_for(lambda: stack.target.sql(TARGET_SUM) == source, timeout, "the target to equal the source", interval=1)
            equal = True
        except StackError:
            equal = False
        return time.monotonic() - started, int(source.split()[0]), equal
    finally:
        stack.traffic.resume()


def topic_duplicates(bootstrap: str) -> int:
    """Changes in the topic whose table, key and source position appeared at an earlier offset."""
    from confluent_kafka import Consumer, TopicPartition

    from cdcwatch.events import EventDecodeError, decode

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-count-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    seen: set[tuple[str, str, str]] = set()
    repeats = 0
    try:
        partitions = consumer.list_topics(CHANGES_TOPIC, timeout=10).topics[CHANGES_TOPIC].partitions
        ends = {p: int(consumer.get_watermark_offsets(TopicPartition(CHANGES_TOPIC, p), timeout=10)[1] or 0)
                for p in partitions}
        consumer.assign([TopicPartition(CHANGES_TOPIC, p, 0) for p in partitions])
        remaining = {p for p, end in ends.items() if end > 0}
        while remaining:
            message = consumer.poll(5)
            if message is None:
                continue
            if message.error():
                raise RuntimeError(str(message.error()))
            offset, partition = message.offset() or 0, message.partition()
            if offset >= ends[partition] - 1:
                remaining.discard(partition)
            if offset >= ends[partition]:
                continue
            try:
                event = decode(message.key(), message.value(), message.topic())
            except EventDecodeError:
                continue
            if event.kind.value != "data" or event.position is None:
                continue
            identity = (str(event.table), json.dumps(event.key, sort_keys=True, default=str), event.position.sortable())
            if identity in seen:
                repeats += 1
            seen.add(identity)
    finally:
        consumer.close()
    return repeats


def run_fault(stack: DemoStack, monitor: Monitor, fault: Fault, held_seconds: dict[str, float],
              say: Callable[[str], None], recovery_timeout: float = 300) -> Outcome:
    outcome = Outcome(fault.name)
    prometheus = stack.info["prometheus"]
    wait_for(lambda: not firing(prometheus, fault.alerts), 300, f"{fault.name}: the expected alerts to be quiet", interval=1)
    re_delivered_before = topic_duplicates(stack.broker.bootstrap)
    counted_before, drivers_before = monitor.counted()
    say(f"{fault.name} ...")
    if fault.stops_cdcwatch:
        monitor.cdcwatch_down.set()
    injected = time.monotonic()
    struck = fault.inject(stack)
    if isinstance(struck, float):
        injected = time.monotonic() - (time.time() - struck)
    try:
        outcome.alert = wait_for(lambda: firing(prometheus, fault.alerts), 120, f"{fault.name}: an expected alert",
                                 interval=0.5)
        outcome.detected_after = time.monotonic() - injected
    except StackError as exc:
        outcome.problems.append(str(exc))
    if fault.held:
        remaining = held_seconds[fault.held] - (time.monotonic() - injected)
        if remaining > 0:
            stack.traffic.stop.wait(remaining)  # the fault lasts its full length whether or not detected
    fault.recover(stack)
    recovered = time.monotonic()
    during = [took for started, took in list(monitor.answered) if injected <= started < recovered]
    outcome.scrapes, outcome.slowest = len(during), max(during, default=0.0)
    monitor.cdcwatch_down.clear()
    try:
        wait_for(lambda: not firing(prometheus, fault.alerts), recovery_timeout, f"{fault.name}: the alert to resolve",
                 interval=1)
        outcome.resolved_after = time.monotonic() - recovered
    except StackError as exc:
        outcome.problems.append(str(exc))
    _ensure_apply(stack)
    _, outcome.rows, outcome.equal = converge(stack, recovery_timeout)
    outcome.converged_after = time.monotonic() - recovered
    if not outcome.equal:
        outcome.problems.append("the target differs from the source")
        return outcome
    try:
        re_delivered = outcome.re_delivered = topic_duplicates(stack.broker.bootstrap) - re_delivered_before
    except Exception as exc:  # noqa: BLE001 (reported as the fault's problem)
        outcome.problems.append(f"re-deliveries not countable from the topic: {exc}")
        return outcome

    def agreed() -> bool:  # the listener reports a batch's duplicates just after the batch wrote the target
        counted, drivers = monitor.counted()
        outcome.duplicates, outcome.driver_restarted = counted - counted_before, drivers > drivers_before
        return duplicates_agree(re_delivered, outcome.duplicates, outcome.driver_restarted)

    try:
        wait_for(agreed, 15, "the listener's duplicates to agree with the topic", interval=1)
    except StackError:
        pass
    if not duplicates_agree(re_delivered, outcome.duplicates, outcome.driver_restarted):
        outcome.problems.append(f"{outcome.re_delivered} re-delivered in the topic but {outcome.duplicates:.0f} counted "
                                "by the listener")
    return outcome


def duplicates_agree(re_delivered: int, counted: float, driver_restarted: bool) -> bool:
    """The listener counted every re-delivery, and nothing else unless a restarted driver re-ran a batch."""
    return counted == re_delivered or (driver_restarted and counted >= re_delivered)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default="all", help="all, short, or names separated by commas")
    parser.add_argument("--pause-seconds", type=float, default=30.0)
    parser.add_argument("--cut-seconds", type=float, default=30.0)
    parser.add_argument("--recovery-timeout", type=float, default=300.0,
                        help="seconds an alert may take to resolve, and the target to equal the source, after recovery")
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()
    names = list(FAULTS) if args.faults == "all" else list(SHORT) if args.faults == "short" else args.faults.split(",")
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        parser.error(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
    base = Path(tempfile.mkdtemp(prefix="cdcwatch-chaos-"))
    base.chmod(0o755)
    stack = DemoStack(base, free_port(), args.rows, log=lambda line: print(line, flush=True),
                      broker_netns=any(FAULTS[n].netns for n in names))
    outcomes: list[Outcome] = []
    expected, counted, drivers, uncounted = 0, 0.0, 0, ""
    try:
        stack.start()
        seconds, rows, equal = converge(stack, 300)
        print(f"baseline: target {'equals' if equal else 'DIFFERS from'} the source ({rows} rows) after {seconds:.0f}s",
              flush=True)
        monitor = Monitor(stack)
        monitor.start()
        for name in names:
            outcomes.append(run_fault(stack, monitor, FAULTS[name], {"pause": args.pause_seconds, "cut": args.cut_seconds},
                                      lambda s: print(s, flush=True), args.recovery_timeout))
        stack.traffic.pause()
        _, final_rows, final_equal = converge(stack, args.recovery_timeout)
        try:
            expected = topic_duplicates(stack.broker.bootstrap)
            counted, drivers = monitor.counted()
        except Exception as exc:  # noqa: BLE001 (reported: the run fails)
            uncounted = f"{exc}"
        monitor.stop.set()
        monitor.join(10)
    finally:
        stack.stop()
    print()
    print(f"{'fault':<22} {'detected':>9} {'alert':<24} {'recovered':>9} {'rows':>6} {'equal':>5} {'duplicates':>10} "
          f"{'scrapes during':>14}")
    for o in outcomes:
        detected = f"{o.detected_after:.1f}s" if o.detected_after is not None else "-"
        recovered = f"{o.converged_after:.1f}s" if o.converged_after is not None else "-"
        duplicates = f"{o.re_delivered}/{o.duplicates:.0f}" if o.re_delivered is not None else "-"
        scrapes = f"{o.scrapes} ({o.slowest:.1f}s)" if o.scrapes else "-"
        print(f"{o.fault:<22} {detected:>9} {o.alert or '-':<24} {recovered:>9} {o.rows:>6} {'yes' if o.equal else 'NO':>5} "
              f"{duplicates:>10} {scrapes:>14}{' (driver restarted)' if o.driver_restarted else ''}")
        for problem in o.problems:
            print(f"    {problem}")
    print(f"at the end: target {'equals' if final_equal else 'DIFFERS from'} the source ({final_rows} rows)")
    spark_restarted = drivers > 1
    duplicates_ok = not uncounted and duplicates_agree(expected, counted, spark_restarted)
    if uncounted:
        print(f"duplicates: not countable at the end: {uncounted}")
    else:
        print(f"duplicates: {expected} re-delivered in the topic, {counted:.0f} counted by the listener"
              + (" (a re-run batch after a driver or target crash counts again)" if spark_restarted else ""))
    print(f"scrapes of cdcwatch: {monitor.scrapes}, failed or over {DEADLINE:g}s: {len(monitor.failures)}")
    for failure in monitor.failures[:10]:
        print(f"    {failure}")
    ok = all(not o.problems for o in outcomes) and not monitor.failures and duplicates_ok and final_equal
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
