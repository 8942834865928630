"""Label sets the examples' input series share. They use the default selectors: job="cdcwatch" for the
exporter, job="cdcwatch-spark" for the Spark listener."""

__all__ = ["BINLOG_SOURCE", "CONNECT", "DBZ", "DBZ_MYSQL", "EXPORTER", "JVM", "SLOT", "SOURCE", "SPARK", "TOPIC"]

EXPORTER = 'job="cdcwatch",instance="exporter:10121"'
SPARK = 'job="cdcwatch-spark",instance="driver:10122",query="apply"'
JVM = f'{EXPORTER},target="connect"'
DBZ = f'{JVM},plugin="postgres",server="inventory"'
CONNECT = f'{EXPORTER},target="connect",connector="inventory-connector",server="inventory"'
SOURCE = f'{EXPORTER},target="pg"'
SLOT = f'{SOURCE},slot="inventory_slot",server="inventory"'
DBZ_MYSQL = f'{JVM},plugin="mysql",server="orders",context="streaming"'
BINLOG_SOURCE = f'{EXPORTER},target="maria",server="orders"'
TOPIC = f'{EXPORTER},target="main",group="apply",topic="inventory.public.items",server="inventory"'
