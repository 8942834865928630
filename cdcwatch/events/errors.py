"""The decoder's one error type, and the field readers every part of the decoder shares."""

from __future__ import annotations

from typing import Any

__all__ = ["EventDecodeError", "integer", "shown"]


class EventDecodeError(ValueError):
    """A record that is not a readable Debezium-format event; `reason` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def integer(value: Any, name: str) -> int:
    """An integer that JSON may carry as a number or a decimal string (Oracle SCNs, several documented examples)."""
    if type(value) is int:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 40:
        return int(value)
    raise EventDecodeError(f"{name} is not an integer")


def shown(value: Any) -> str:
    """A value for an error message, cut short: events can carry anything."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
