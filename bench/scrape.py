"""Scraping an endpoint as Prometheus does: one HTTP/1.1 connection per target, kept alive from one scrape to the
next (opened again if the server closed it), with or without gzip."""

from __future__ import annotations

import gzip
import http.client
from urllib.parse import urlsplit


class Scraper:
    """`scraper()` is one scrape of `url`: its whole answer, decompressed; not for use by two threads at once.
    `sent_bytes`: the size of the last answer as it came over the connection (compressed, if it was)."""

    def __init__(self, url: str, compressed: bool = False, timeout: float = 60) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"{url}: only http:// is scraped here")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = {"Accept-Encoding": "gzip"} if compressed else {}
        self.timeout = timeout
        self.connection: http.client.HTTPConnection | None = None
        self.sent_bytes = 0

    def __call__(self) -> bytes:
        reused = self.connection is not None
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            self.connection.request("GET", self.path, headers=self.headers)
            answer = self.connection.getresponse()
            body = answer.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.close()
            if not reused:
                raise
            return self()  # the server closed the kept connection meanwhile (its idle timeout): once more, anew
        if answer.status != 200:
            raise RuntimeError(f"{self.host}:{self.port}{self.path} answered {answer.status}")
        if answer.will_close:
            self.close()
        self.sent_bytes = len(body)
        return gzip.decompress(body) if answer.getheader("Content-Encoding") == "gzip" else body

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
