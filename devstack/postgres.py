"""A PostgreSQL server with logical decoding, on 127.0.0.1, owned by the caller."""

from __future__ import annotations

import glob
import subprocess
from pathlib import Path

from devstack.procs import StackError, as_user, owned_dir, require_binary, run, wait_for

__all__ = ["PostgresServer"]


def _bin_dir() -> Path:
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if not versions:
        raise StackError("PostgreSQL server not found: `apt-get install -y postgresql` (or run scripts/setup.sh)")
    return Path(versions[-1])


class PostgresServer:
    """initdb on first start, then pg_ctl start/stop; SQL through psql."""

    def __init__(self, state_dir: Path, port: int) -> None:
        self.port = port
        self.dir = owned_dir(state_dir, "postgres")
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self._bin = _bin_dir()

    def _pg(self, tool: str, *args: str, what: str) -> None:
        run(as_user("postgres", [str(self._bin / tool), *args]), what)

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", what="initdb")
            with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
                conf.write(
                    "\n# cdcwatch local stack\n"
                    "listen_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.dir}'\n"
                    # the suite runs a dozen pipelines on one server, two modules at a time
                    "wal_level = logical\nmax_wal_senders = 32\nmax_replication_slots = 32\n"
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                )
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", f"-p {self.port}", "-w", "-t", "60", "start",
                 what=f"starting PostgreSQL on 127.0.0.1:{self.port} (log: {self.log})")
        serving = self.sql("SHOW data_directory")
        if Path(serving).resolve() != self.data.resolve():  # never a stack's statements in another's server
            raise StackError(f"127.0.0.1:{self.port} is served by the PostgreSQL of {serving}, not of {self.data}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(as_user("postgres", [str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                           capture_output=True, timeout=60)

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run SQL; return psql's unaligned, tuples-only output."""
        psql = require_binary("psql", "postgresql-client")
        done = run([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
                    "-v", "ON_ERROR_STOP=1", "-At", "-c", statement], f"psql: {statement[:60]}",
                   start_new_session=True)  # a Ctrl-C meant for the demo must not cut a statement short
        return done.stdout.strip()

    def drop_slot(self, slot: str, timeout: float = 60) -> None:
        """Drop `slot` once no walsender holds it: a slot outlives its connector, keeps WAL and counts against
        `max_replication_slots`, so every pipeline the suite starts drops its slot when it ends."""
        def dropped() -> bool:
            self.sql(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"
                     " AND NOT active")
            return self.sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'") == "0"

        wait_for(dropped, timeout, f"the replication slot {slot} to be dropped", interval=0.5)
