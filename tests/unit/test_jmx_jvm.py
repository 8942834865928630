"""The client JVM's effect on the Python process around it."""

from __future__ import annotations

import gc
import time
from typing import Any

import jpype

from cdcwatch.jmx.jvm import ensure_jvm


def test_java_collections_set_off_no_full_python_collections() -> None:
    """JPype runs a full Python collection after every Java one, under the GIL, unless cdcwatch unlinks them:
    20 Java collections would bring about 20 Python ones (at most the first is left)."""
    ensure_jvm()
    full: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        system = jpype.JClass("java.lang.System")
        for _ in range(20):
            system.gc()
        # JPype's reference-queue thread reacts to each Java collection within milliseconds: watch for a second
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and len(full) <= 1:
            time.sleep(0.05)
        assert len(full) <= 1, f"{len(full)} full Python collections after 20 Java ones"
    finally:
        gc.callbacks.remove(count)
