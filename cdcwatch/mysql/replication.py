"""The one place cdcwatch goes below PyMySQL's public API: a non-blocking binlog dump (COM_BINLOG_DUMP).

PyMySQL offers no public call for a replication command, so this module sends it with the connection's own
`_execute_command` and reads the answer with `_read_packet`, as replication clients built on PyMySQL do.
`tests/unit/test_mysql_replication.py` checks that the installed PyMySQL still has both, with the arguments used
here, and `tests/integration/test_mysql_binlog.py` reads real binlogs through it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

__all__ = ["binlog_dump_events"]

_COM_BINLOG_DUMP = 0x12
_BINLOG_DUMP_NON_BLOCK = 1


def binlog_dump_events(connection: Any, binlog: str, position: int = 4) -> Iterator[bytes]:
    """The events of `binlog` from `position` (4: after the magic number), each packet's data after its OK byte,
    until the server ends the non-blocking stream. Asks as server id 0: a client, not a replica."""
    payload = struct.pack("<IHI", position, _BINLOG_DUMP_NON_BLOCK, 0) + binlog.encode()
    connection._execute_command(_COM_BINLOG_DUMP, payload)
    while True:
        packet = connection._read_packet().get_all_data()
        if packet[:1] != b"\x00":  # EOF (0xfe) or an error packet: the stream has ended
            return
        yield packet[1:]
