"""Decoding speed against plain `json.loads` of the same bytes, in the same run.

The events are the real ones recorded from Debezium 3.6.3 (../shared/fixtures), cycled to
--events records, once as the JsonConverter writes them (schema + payload) and once without the
schema (`schemas.enable=false`). Each round times `json.loads(key); json.loads(value)` and
`decode(key, value, topic)` over the same records; the median of the rounds is printed.
Target: decoding costs no more than 2x json.loads.

    .venv/bin/python bench/decode_events.py [--events 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plots import save_timings  # noqa: E402
from cdcwatch.events import decode  # noqa: E402

SHARED = Path(os.environ.get("CDCWATCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
RECORDED = SHARED / "fixtures" / "real-debezium-3.6.3"

Record = tuple[bytes | None, bytes | None, str]


def recorded_records(with_schema: bool) -> list[Record]:
    records: list[Record] = []
    for name in ("postgres-events.jsonl", "mysql-events.jsonl"):
        for line in (RECORDED / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            key, value = record["key"], record["value"]
            if not with_schema:
                key = key and json.dumps(json.loads(key)["payload"])
                value = value and json.dumps(json.loads(value)["payload"])
            records.append((key and key.encode(), value and value.encode(), record["destination"]))
    return records


def json_loads_only(records: list[Record]) -> None:
    loads = json.loads
    for key, value, _ in records:
        if key is not None:
            loads(key)
        if value is not None:
            loads(value)


def decode_all(records: list[Record]) -> None:
    for key, value, topic in records:
        decode(key, value, topic)


def timed(run: Callable[[list[Record]], None], records: list[Record]) -> float:
    started = time.perf_counter()
    run(records)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'format':<14}{'events':>9}{'json.loads ev/s':>18}{'decode ev/s':>14}{'ratio':>8}")
    timings: dict[str, list[float]] = {}
    for with_schema in (True, False):
        base = recorded_records(with_schema)
        records = (base * (args.events // len(base) + 1))[:args.events]
        baseline, decoded = [], []
        for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
            baseline.append(timed(json_loads_only, records))
            decoded.append(timed(decode_all, records))
        loads_s, decode_s = statistics.median(baseline), statistics.median(decoded)
        ratio = decode_s / loads_s
        label = "schema+payload" if with_schema else "payload only"
        timings[f"json.loads, {label}"] = [t * 1000 for t in baseline]
        timings[f"decode, {label}"] = [t * 1000 for t in decoded]
        print(f"{label:<14}{len(records):>9}{len(records) / loads_s:>18,.0f}{len(records) / decode_s:>14,.0f}"
              f"{ratio:>7.2f}x  {'ok' if ratio <= 2 else 'OVER TARGET (2x)'}")
    plot = save_timings("decode_events", f"{args.events:,} recorded change events, {args.rounds} rounds", timings)
    if plot:
        print(f"plot: {plot}")


if __name__ == "__main__":
    main()
