"""A JVM that holds no Debezium bean (a worker before its first connector, a failed connector) gives the JPype
backend nothing to read at a scrape once its listing is known; the scrape still asks the JVM something, so a
killed one is `cdcwatch_up 0` at the next scrape, not up until RMI notices the dead connection a minute later."""

from __future__ import annotations

import sys

import pytest

from devstack.configs import exporter_config, jmx_target
from devstack.procs import ServerProcess, free_port, port_open, python_env, wait_for
from tests.integration.conftest import value

pytestmark = pytest.mark.integration

BARE_JVM = ("import time\nfrom cdcwatch.jmx.jvm import ensure_jvm\nfrom devstack.engine import start_loopback_jmx\n"
            "ensure_jvm()\nstart_loopback_jmx({port})\nprint('serving', flush=True)\ntime.sleep(600)\n")
"""A JVM serving its platform MBean server over JMX, with no Debezium bean in it."""


def test_a_killed_jvm_without_debezium_beans_is_up_0_at_the_next_scrape(serve_factory, stack_dir) -> None:
    port = free_port()
    log = stack_dir / "bare-jvm.log"
    jvm = ServerProcess("a JVM without Debezium beans", log)
    jvm.start([sys.executable, "-c", BARE_JVM.format(port=port)],
              lambda: port_open(port) and "serving" in log.read_text(encoding="utf-8"), 60, env=python_env())
    try:
        serve = serve_factory(exporter_config(debezium=[jmx_target("bare", port, timeout_seconds=3)]))
        wait_for(lambda: value(serve.scrape(), "cdcwatch_up", target="bare") == 1, 30, "the bare JVM to be up")
        values = serve.scrape()  # the listing is known now: nothing to read
        assert value(values, "cdcwatch_up", target="bare") == 1
        assert value(values, "cdcwatch_debezium_mbeans", target="bare") == 0
        jvm.kill()
        values = serve.scrape()
        assert value(values, "cdcwatch_up", target="bare") == 0
        assert value(values, "cdcwatch_scrape_errors_total", target="bare") == 1
    finally:
        jvm.stop(5)
