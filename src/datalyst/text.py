"""Head-and-tail clipping of long output, shared by every package that shows output to a model or a person."""

from __future__ import annotations

from typing import TypeVar

Clippable = TypeVar("Clippable", str, bytes)


def clip_middle(text: Clippable, max_length: int, unit: str = "characters") -> Clippable:
    """``text`` whole when it fits in ``max_length``, else its head and tail with a note of what was cut.

    >>> clip_middle("abcdefghij", 4)
    'ab\\n... [6 characters cut] ...\\nij'
    """
    if len(text) <= max_length:
        return text
    half = max_length // 2
    note = cut_note(len(text) - 2 * half, unit)
    middle = note.encode() if isinstance(text, bytes) else note
    return text[:half] + middle + text[len(text) - half :]


def cut_note(count: int, unit: str) -> str:
    """The line that stands where ``count`` units of text were cut out (for clippers that stream)."""
    return f"\n... [{count} {unit} cut] ...\n"
