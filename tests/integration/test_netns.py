"""devstack/netns.py, the project's own test hosts: a server inside a namespace is reached through the veth;
a cut makes an established connection and a new one time out (silent loss both ways, not a refusal or "no
route to host"); a heal lets both through again; close() and a crashed run's leftovers leave no namespace
or link behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from devstack.netns import NAMESPACE_PREFIX, TestHost, remove_stale
from devstack.procs import port_open, wait_for

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CAP_NET_ADMIN)")]

PORT = 8765
ECHO = ("import socket\n"
        "s = socket.create_server((%r, %d))\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        "    while (d := c.recv(100)):\n"
        "        c.sendall(d)\n")


def _names() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout + subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


@pytest.fixture
def host() -> Iterator[TestHost]:
    test_host = TestHost("probe")
    test_host.start()
    server = subprocess.Popen(test_host.wrap([sys.executable, "-c", ECHO % (test_host.address, PORT)]))
    try:
        wait_for(lambda: port_open(PORT, test_host.address), 20, "the echo server in the namespace")
        yield test_host
    finally:
        server.kill()
        server.wait(10)
        test_host.close()


def _times_out(call: object) -> float:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        call()  # type: ignore[operator]
    return time.monotonic() - started


def test_a_cut_drops_silently_both_ways_and_a_heal_restores(host: TestHost) -> None:
    established = socket.create_connection((host.address, PORT), timeout=3)
    established.sendall(b"before")
    assert established.recv(100) == b"before"
    assert host.exec(["ip", "-4", "-o", "address", "show"]).count(host.address) == 1

    host.cut()
    established.sendall(b"during")
    # an established connection hears nothing; a new one gets no SYN-ACK for longer than ARP would take to fail
    assert _times_out(lambda: established.recv(100)) >= 2.9
    assert _times_out(lambda: socket.create_connection((host.address, PORT), timeout=5)) >= 4.9

    host.heal()
    assert wait_for(lambda: socket.create_connection((host.address, PORT), timeout=2), 10, "a new connection")
    established.settimeout(30)  # TCP retransmits what the cut dropped
    assert established.recv(100) == b"during"
    established.close()


def test_close_and_a_crashed_runs_leftovers_leave_nothing() -> None:
    stale_ns, stale_links = f"{NAMESPACE_PREFIX}old-999999999", ("cdcw999999999h", "cdcw999999999n")
    subprocess.run(["ip", "netns", "add", stale_ns], check=True)
    subprocess.run(["ip", "link", "add", stale_links[0], "type", "veth", "peer", "name", stale_links[1]], check=True)
    assert stale_ns in _names()

    test_host = TestHost("probe")
    test_host.start()  # removes what a process that no longer runs left
    names = _names()
    assert stale_ns not in names and stale_links[0] not in names
    assert test_host.namespace in names and test_host.host_link in names
    assert remove_stale() == []  # its own namespace is not stale: its process runs
    test_host.close()
    names = _names()
    assert test_host.namespace not in names and test_host.host_link not in names and test_host.inner_link not in names
