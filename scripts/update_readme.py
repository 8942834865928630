"""Regenerate the README's configuration and metrics references from the code."""

from __future__ import annotations

import re
from pathlib import Path

from cdcwatch.reference import config_reference, metrics_reference

README = Path(__file__).resolve().parent.parent / "README.md"


def main() -> None:
    text = README.read_text(encoding="utf-8")
    for name, body in (("config-reference", config_reference()), ("metrics-reference", metrics_reference())):
        text = re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", lambda m, body=body: m.group(1) + body + m.group(2),
                      text, flags=re.S)
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
