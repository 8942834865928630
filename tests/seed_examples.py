"""Example events cut out of the seed documents (../shared/seeds), as the documents print them.

The documents annotate their JSON for readers: callouts (`(1)`, `--> 9`, `// <1>`, `<>`), elided
parts (`{ ... }`, a line of `...`) and trailing commas. `seed_example` removes exactly those
annotations; real typos in an example are fixed by the caller, one named replacement at a time, so
each test shows what it had to correct.
"""

from __future__ import annotations

import re

from tests.fixtures import SEEDS

__all__ = ["block_start", "example_starts", "seed_example", "seed_text"]

_CALLOUT = re.compile(r"[ \t]*(?:\(\d+\)|-->[ \t]*\d+|// <\d+>|<>)[ \t]*$", re.M)
_ELIDED_LINE = re.compile(r"^[ \t]*\.\.\.[ \t]*\n", re.M)
_ELIDED_OBJECT = re.compile(r"\{\s*\.\.\.\s*\}|\{\s*\}")
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def seed_text(name: str) -> str:
    return (SEEDS / name).read_text(encoding="utf-8")


def block_start(text: str, offset: int) -> int:
    """Offset of the top-level `{` (first on its line) of the JSON block around `offset`."""
    start = text.rfind("\n{", 0, offset)
    if start < 0:
        raise LookupError("no JSON block starts before the anchor")
    return start + 1


def _anchor_offset(text: str, anchor: str, occurrence: int) -> int:
    offset = -1
    for _ in range(occurrence):
        offset = text.find(anchor, offset + 1)
        if offset < 0:
            raise LookupError(f"anchor {anchor!r} (occurrence {occurrence}) is not in the seed")
    return offset


def _balanced(text: str) -> str:
    """The first balanced {...} of text, braces inside strings ignored."""
    depth, in_string, escaped = 0, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[:index + 1]
    raise LookupError("the JSON block never closes")


def seed_example(name: str, anchor: str, occurrence: int = 1,
                 fixes: tuple[tuple[str, str], ...] = ()) -> tuple[str, int]:
    """The JSON example around `anchor` in seed `name`, de-annotated, and where it starts in the document."""
    text = seed_text(name)
    start = block_start(text, _anchor_offset(text, anchor, occurrence))
    region = text[start:start + 20_000]
    for old, new in fixes:
        if old not in region:
            raise LookupError(f"fix target {old!r} is not in the example")
        region = region.replace(old, new, 1)
    region = _ELIDED_LINE.sub("", _CALLOUT.sub("", region))
    block = _balanced(region)
    block = _ELIDED_OBJECT.sub("{}", block)
    return _TRAILING_COMMA.sub(r"\1", block), start


def example_starts(name: str, pattern: str) -> list[int]:
    """Start offsets of every JSON block in the seed that contains a match of `pattern`."""
    text = seed_text(name)
    return [block_start(text, match.start()) for match in re.finditer(pattern, text)]
