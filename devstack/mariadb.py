"""A MariaDB server with a row-based binlog, on 127.0.0.1, for the Debezium MySQL connector."""

from __future__ import annotations

from pathlib import Path

from devstack.procs import ServerProcess, owned_dir, port_open, require_binary, run

__all__ = ["MariaDbServer"]

# Debezium 3.6's MySQL connector accepts MariaDB 10.11 only when it reports an old MySQL version.
_REPORTED_VERSION = "5.7.19-10.11.19-MariaDB-log"


class MariaDbServer:
    """mariadb-install-db on first start, then mariadbd in the background; SQL through the client."""

    user = "cdc"
    password = "cdc"

    def __init__(self, state_dir: Path, port: int) -> None:
        self.port = port
        self.dir = owned_dir(state_dir, "mysql")
        self.cnf = self.dir / "my.cnf"
        self.socket = self.dir / "mysqld.sock"
        self.server = ServerProcess("MariaDB", self.dir / "mariadbd.out")

    def start(self) -> None:
        mariadbd = require_binary("/usr/sbin/mariadbd", "mariadb-server")
        self.cnf.write_text(
            "[mysqld]\n"
            f"datadir={self.dir / 'data'}\nsocket={self.socket}\npid-file={self.dir / 'mysqld.pid'}\n"
            f"port={self.port}\nbind-address=127.0.0.1\nskip-name-resolve\n"
            f"log-error={self.dir / 'error.log'}\n"
            f"server-id=1\nlog-bin={self.dir / 'data' / 'mariadb-bin'}\nbinlog_format=ROW\nbinlog_row_image=FULL\n"
            f"version={_REPORTED_VERSION}\n"
            "innodb_buffer_pool_size=64M\ninnodb_flush_log_at_trx_commit=2\n",
            encoding="utf-8",
        )
        fresh = not (self.dir / "data" / "mysql").exists()
        if fresh:
            run(["mariadb-install-db", f"--defaults-file={self.cnf}", "--user=mysql",
                 "--auth-root-authentication-method=normal", "--skip-test-db"], "mariadb-install-db")
        self.server.start([mariadbd, f"--defaults-file={self.cnf}", "--user=mysql"], lambda: port_open(self.port), 60)
        if fresh:
            self.root_sql(
                f"CREATE USER '{self.user}'@'%' IDENTIFIED BY '{self.password}';"
                f"GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, LOCK TABLES"
                f" ON *.* TO '{self.user}'@'%';"
                f"GRANT ALL ON *.* TO '{self.user}'@'%'; FLUSH PRIVILEGES;"
            )

    def root_sql(self, statement: str) -> str:
        client = require_binary("mariadb", "mariadb-client")
        return run([client, f"--socket={self.socket}", "-u", "root", "-N", "-B", "-e", statement], "mariadb").stdout.strip()

    def stop(self) -> None:
        self.server.stop(60)
