"""Process helpers shared by the local components."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ServerProcess", "StackError", "as_user", "exit_on_sigterm", "free_port", "jvm_dir", "owned_dir", "port_open",
           "rss_mib", "python_env", "stop_group", "wait_for"]

REPO = Path(__file__).resolve().parents[1]
"""The repository root: scripts/setup.sh keeps what it installs under REPO/.cdcwatch."""


class StackError(RuntimeError):
    """A local component could not be started; the message says what to fix."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def exit_on_sigterm() -> None:
    """SIGTERM ends this process as Ctrl-C does, through its `finally` blocks, so a benchmark or tool stopped by
    `kill` stops the servers it started (Python's default for SIGTERM is to die on the spot, leaving them running)."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def wait_for(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll `condition` until it returns something truthy; raise StackError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except StackError:
            raise  # the condition knows it will never hold (e.g. the process exited)
        except Exception as exc:  # the condition may fail while the thing starts
            last_error = exc
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    raise StackError(f"timed out after {timeout:g}s waiting for {what}{detail}")


def wait_until_seen(condition: Callable[[], object], since: float, timeout: float, what: str,
                    interval: float = 0.2) -> tuple[float, float]:
    """Poll `condition` until it holds; return (wall-clock start of the last poll that did not see it, or `since`
    when the first poll saw it: a time known to come before it held; end of the poll that did). What the polls
    watch came true between the two, whatever each poll's own latency (a subprocess start, a query): a time bound
    that uses them measures the thing, not the polling. An exception from `condition` fails the wait."""
    missed = since
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = time.time()
        if condition():
            return missed, time.time()
        missed = started
        time.sleep(interval)
    raise StackError(f"timed out after {timeout:g}s waiting for {what}")


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (NaN once it is gone), for load tests and benchmarks."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stop_group(process: subprocess.Popen[bytes] | None, timeout: float = 20) -> None:
    """SIGTERM the process group of a child started with start_new_session; SIGKILL it after `timeout`."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def as_user(user: str, command: Sequence[str]) -> list[str]:
    """`command` run as `user` when we are root (servers refuse to run as root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", user, "--", *command]
    return list(command)


def _reachable_by(path: Path, user: str) -> bool:
    entry = pwd.getpwnam(user)
    for parent in [path, *path.parents]:
        try:
            mode = parent.stat()
        except FileNotFoundError:
            continue
        if mode.st_uid == entry.pw_uid:
            continue
        if not mode.st_mode & stat.S_IXOTH:
            return False
    return True


def owned_dir(wanted: Path, user: str) -> Path:
    """A directory `user` owns: `wanted`, or (as root, when `user` cannot reach it) one in /tmp, named after `wanted`
    and linked from it. The one in /tmp lives as long as the link: where `wanted` is new (a state directory removed
    and made again, a test's temporary directory named as an earlier run's was), what /tmp holds under its name is an
    earlier run's, and is removed, never served again (a database's old tables in a new run)."""
    if os.geteuid() != 0:
        wanted.mkdir(parents=True, exist_ok=True)
        return wanted
    if not _reachable_by(wanted.parent if not wanted.exists() else wanted, user):
        digest = hashlib.sha1(str(wanted).encode()).hexdigest()[:10]
        relocated = Path(tempfile.gettempdir()) / f"cdcwatch-{user}-{digest}"
        if not wanted.exists() and not wanted.is_symlink():
            shutil.rmtree(relocated, ignore_errors=True)
            wanted.parent.mkdir(parents=True, exist_ok=True)
            wanted.symlink_to(relocated, target_is_directory=True)
        wanted = relocated
    wanted.mkdir(parents=True, exist_ok=True)
    os.chmod(wanted, 0o755)
    shutil.chown(wanted, user, user)
    return wanted


def require_binary(path: str, package: str) -> str:
    """The path of a server binary, or a StackError saying which package to install."""
    found = shutil.which(path) or (path if Path(path).exists() else None)
    if not found:
        raise StackError(f"{path} not found: install it with `apt-get install -y {package}` (or run scripts/setup.sh)")
    return found


def run(command: Sequence[str], what: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a command; raise StackError with its output when it fails."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        raise StackError(f"{what}: timed out after {timeout:g}s") from None
    if done.returncode != 0:
        raise StackError(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")
    return done


def python_env(**extra: str) -> dict[str, str]:
    """This environment with the repository on PYTHONPATH, for Python children that import devstack or tests."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def jvm_dir(part: str) -> Path:
    """The jars of one part of devstack/jvm/pom.xml, as scripts/setup.sh resolved them."""
    path = Path(os.environ.get("CDCWATCH_JVM_DIR", REPO / ".cdcwatch" / "jvm")) / part
    if not path.is_dir() or not any(path.iterdir()):
        raise StackError(f"{path} is missing: run scripts/setup.sh (it resolves devstack/jvm/pom.xml with Maven)")
    return path


class ServerProcess:
    """One server in its own process group: started, awaited until ready, paused, killed or stopped by PID."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.alive else None  # type: ignore[union-attr]

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, command: Sequence[str], ready: Callable[[], object], timeout: float = 60,
              env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        """Run `command` (output appended to the log) and wait until `ready()` is truthy."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=cwd, start_new_session=True)

        def started() -> object:
            if self.process is not None and self.process.poll() is not None:
                raise StackError(f"{self.name} exited with {self.process.returncode}; see {self.log}")
            return ready()

        try:
            wait_for(started, timeout, f"{self.name} (log {self.log})")
        except StackError:
            self.stop(5)
            raise

    def signal(self, signum: int) -> None:
        if self.alive:
            os.killpg(self.process.pid, signum)  # type: ignore[union-attr]

    def kill(self) -> None:
        """kill -9 the whole group: no clean shutdown, as in a crash."""
        if self.alive:
            self.signal(signal.SIGKILL)
            self.process.wait(30)  # type: ignore[union-attr]

    def stop(self, timeout: float = 30) -> None:
        """SIGCONT (a paused server cannot exit) and SIGTERM the group; SIGKILL it after `timeout`."""
        if self.alive:
            self.signal(signal.SIGCONT)
        stop_group(self.process, timeout)
