"""An endpoint that answers every request with one recorded /metrics answer, as it was sent: the floor under a scrape.

Prometheus' `scrape_duration_seconds` runs from the request until the answer is parsed and its samples appended, so
part of every exporter's figure is Prometheus' own work on what it was sent, and it grows with the samples. Replaying
an exporter's recorded answer (same bytes, same Content-Type and Content-Encoding) from a server that does no other
work measures that part: what a scrape of that answer costs however fast the exporter were.

    python -m bench.replay --port PORT --body FILE --content-type TYPE [--gzip]
"""

from __future__ import annotations

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve(port: int, body: bytes, content_type: str, gzipped: bool) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept alive, as the exporters answer Prometheus

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--body", type=Path, required=True, help="the answer's bytes, as sent (compressed if --gzip)")
    parser.add_argument("--content-type", required=True)
    parser.add_argument("--gzip", action="store_true", help="the body is gzip: say so in Content-Encoding")
    args = parser.parse_args()
    serve(args.port, args.body.read_bytes(), args.content_type, args.gzip)


if __name__ == "__main__":
    main()
