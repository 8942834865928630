"""The project's own test hosts on this machine: a network namespace joined to the host by a veth pair,
so that a server can be cut off the network and healed (needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN).

    host = TestHost("broker")           # namespace cdcwatch-broker-<pid>, veth cdcw<pid>h <-> cdcw<pid>n
    host.start()                        # 10.231.N.1 (host side) <-> 10.231.N.2 (namespace side), a /30
    command = host.wrap(["java", ...])  # `ip netns exec cdcwatch-broker-<pid> java ...`
    host.cut(); host.heal(); host.close()

A cut is a real partition: both ends of the veth get the `blackhole` queueing discipline, which drops every
frame silently, while the links stay up and the addresses and routes stay in place; each side knows the
other's MAC address from a permanent neighbour entry, so no ARP is needed either. A client sees what it
sees when a switch or a cable dies: an established connection stops answering and a new one never gets
its SYN-ACK, so both time out. The alternatives behave differently here: `tc netem loss 100%`, tc
filters and iptables/nftables DROP rules need kernel modules or tools that these machines do not have
(no sch_netem, no classifiers, no iptables); taking the link down removes the namespace's local routes
and makes new connections fail fast with "no route to host" once ARP gives up; a blackhole or prohibit
route answers the local sender at once (EINVAL, EACCES) instead of dropping silently.

Names carry the owner's PID: `TestHost.start` first removes namespaces and links left by a run whose
process is gone (a crashed earlier run), and picks the first 10.231.N.0/30 that no interface uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from devstack.procs import StackError, require_binary, run

__all__ = ["NAMESPACE_PREFIX", "TestHost", "remove_stale"]

NAMESPACE_PREFIX = "cdcwatch-"
LINK_PREFIX = "cdcw"
_SUBNET = "10.231.{}.{}"
ALLOCATION_LOCK = "/tmp/cdcwatch-netns.lock"
"""Taken while a test host picks and takes its subnet."""
_NAMESPACE = re.compile(rf"^{NAMESPACE_PREFIX}[a-z0-9]+-(\d+)$")
_LINK = re.compile(rf"^{LINK_PREFIX}(\d+)[hn]$")


def _ip(*args: str, what: str = "") -> str:
    return run([require_binary("ip", "iproute2"), *args], what or f"ip {' '.join(args)}", timeout=30).stdout


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def remove_stale() -> list[str]:
    """Remove the namespaces and veth links whose owning process is gone; the names removed."""
    removed = []
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        found = _NAMESPACE.match(name)
        if found and not _alive(int(found.group(1))):
            _ip("netns", "delete", name)
            removed.append(name)
    for line in _ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        found = _LINK.match(name)
        if found and not _alive(int(found.group(1))):
            subprocess.run(["ip", "link", "delete", name], capture_output=True)  # its peer may have gone with it
            removed.append(name)
    return removed


def _used_subnets() -> set[int]:
    used = set()
    for address in re.findall(r"inet (10\.231\.(\d+))\.\d+", _ip("-o", "-4", "address", "show")):
        used.add(int(address[1]))
    return used


@contextlib.contextmanager
def _allocating() -> Iterator[None]:
    """Held while a test host picks its subnet and takes it: the lock of every process of this machine."""
    with open(ALLOCATION_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class TestHost:
    """A network namespace with one veth link to the host and a /30 between them; `cut()` and `heal()` it."""

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, tag: str) -> None:
        if not re.fullmatch(r"[a-z0-9]{1,20}", tag):
            raise StackError(f"a test host's tag is lower-case letters and digits, not {tag!r}")
        pid = os.getpid()
        self.namespace = f"{NAMESPACE_PREFIX}{tag}-{pid}"
        self.host_link, self.inner_link = f"{LINK_PREFIX}{pid}h", f"{LINK_PREFIX}{pid}n"
        self.host_address = self.address = ""
        self.started = False
        self.is_cut = False

    def start(self) -> None:
        """Create the namespace, the veth pair and the addresses (removing what crashed runs left first)."""
        with _allocating():  # two test hosts started at once (parallel test workers) must not take the same /30
            remove_stale()
            free = next((n for n in range(256) if n not in _used_subnets()), None)
            if free is None:
                raise StackError("no free 10.231.N.0/30 for a test host: remove the interfaces that use them")
            self.host_address, self.address = _SUBNET.format(free, 1), _SUBNET.format(free, 2)
            self._create()

    def _create(self) -> None:
        try:
            _ip("netns", "add", self.namespace,
                what=f"creating network namespace {self.namespace} (needs root or CAP_NET_ADMIN)")
            self.started = True
            _ip("link", "add", self.host_link, "type", "veth", "peer", "name", self.inner_link)
            _ip("link", "set", self.inner_link, "netns", self.namespace)
            _ip("address", "add", f"{self.host_address}/30", "dev", self.host_link)
            _ip("-n", self.namespace, "address", "add", f"{self.address}/30", "dev", self.inner_link)
            for args in (("link", "set", self.host_link, "up"), ("-n", self.namespace, "link", "set", "lo", "up"),
                         ("-n", self.namespace, "link", "set", self.inner_link, "up")):
                _ip(*args)
            # no ARP during a cut: a failed resolution would turn silent loss into "no route to host"
            host_mac = Path(f"/sys/class/net/{self.host_link}/address").read_text().strip()
            inner_mac = self.exec(["cat", f"/sys/class/net/{self.inner_link}/address"]).strip()
            _ip("neighbour", "replace", self.address, "lladdr", inner_mac, "dev", self.host_link, "nud", "permanent")
            _ip("-n", self.namespace, "neighbour", "replace", self.host_address, "lladdr", host_mac,
                "dev", self.inner_link, "nud", "permanent")
        except StackError:
            self.close()
            raise

    def wrap(self, command: Sequence[str]) -> list[str]:
        """`command` run inside the namespace (`ip netns exec` execs it: the PID stays the command's)."""
        return [require_binary("ip", "iproute2"), "netns", "exec", self.namespace, *command]

    def exec(self, command: Sequence[str]) -> str:
        """Run a short command inside the namespace; its output."""
        return run(self.wrap(command), f"{' '.join(command)} in {self.namespace}", timeout=30).stdout

    def cut(self) -> None:
        """Drop every packet between the namespace and the host, both ways, silently."""
        self._qdisc("replace", "blackhole")
        self.is_cut = True

    def heal(self) -> None:
        """Let the packets through again."""
        self._qdisc("delete")
        self.is_cut = False

    def _qdisc(self, action: str, *kind: str) -> None:
        tc = require_binary("tc", "iproute2")
        run([tc, "qdisc", action, "dev", self.host_link, "root", *kind], f"tc on {self.host_link}", timeout=30)
        run([tc, "-n", self.namespace, "qdisc", action, "dev", self.inner_link, "root", *kind],
            f"tc on {self.inner_link} in {self.namespace}", timeout=30)

    def close(self) -> None:
        """Remove the namespace and the link (deleting one end of a veth deletes the pair)."""
        if not self.started:
            return
        subprocess.run(["ip", "link", "delete", self.host_link], capture_output=True)
        subprocess.run(["ip", "netns", "delete", self.namespace], capture_output=True)
        self.started = False

    def stop(self) -> None:
        """`close()`, as the demo stack stops its components."""
        self.close()
