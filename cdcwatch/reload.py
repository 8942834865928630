"""Hot reload: on SIGHUP or when the file changes, a valid configuration replaces the running one;
an invalid one is logged and counted, and the last good configuration stays in use."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from pathlib import Path

from cdcwatch.config import WATCH_INTERVAL_SECONDS, Config, ConfigError
from cdcwatch.exporter import Exporter, build_collectors
from cdcwatch.validation import load_config

__all__ = ["ConfigReloader"]

log = logging.getLogger("cdcwatch")


class ConfigReloader:
    """Reloads `path` into `exporter`; `reload()` is safe to call from any thread, one at a time."""

    def __init__(self, path: str | Path, exporter: Exporter, config: Config) -> None:
        self.path = Path(path)
        self.exporter = exporter
        self.config = config
        self._digest = self._file_digest()
        self._lock = threading.Lock()

    def _file_digest(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    def reload(self) -> bool:
        with self._lock:
            self._digest = self._file_digest()
            try:
                config = load_config(self.path)
                collectors = build_collectors(config)
            except (ConfigError, OSError) as exc:
                self.exporter.reloads.failures += 1
                self.exporter.reloads.last_successful = False
                log.error("configuration reload rejected, the previous one stays in use: %s", exc)
                return False
            if (config.listen.address, config.listen.port) != (self.config.listen.address, self.config.listen.port):
                log.warning("listen address changes take effect at the next restart")
            logging.getLogger().setLevel(config.log_level.upper())
            self.exporter.replace(collectors, config.limits.max_concurrent_collections, config.limits.max_series_per_target)
            self.config = config
            self.exporter.reloads.last_successful = True
            self.exporter.reloads.last_success_time = time.time()
            log.info("configuration reloaded from %s: %d collector(s)", self.path, len(collectors))
            return True

    def watch(self, stop: threading.Event, interval: float = WATCH_INTERVAL_SECONDS) -> None:
        """Reload whenever the file's content changes, until `stop` is set. A file that cannot be read (deleted,
        or between an editor's delete and write) changes nothing: it is logged once and waited out."""
        readable = True
        while not stop.wait(interval):
            digest = self._file_digest()
            if digest is None and readable:
                log.warning("configuration file %s cannot be read; the running configuration stays", self.path)
            readable = digest is not None
            if digest not in (self._digest, None):
                self.reload()
