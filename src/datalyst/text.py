"""Text shared by every package that shows output to a model or a person: head-and-tail clipping, Markdown tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def clip_middle(text: str, max_length: int, unit: str = "characters") -> str:
    """``text`` whole when it fits in ``max_length``, else its head and tail with a note of what was cut.

    >>> clip_middle("abcdefghij", 4)
    'ab\\n... [6 characters cut] ...\\nij'
    """
    if len(text) <= max_length:
        return text
    half = max_length // 2
    return text[:half] + cut_note(len(text) - 2 * half, unit) + text[len(text) - half :]


def cut_note(count: int, unit: str) -> str:
    """The line that stands where ``count`` units of text were cut out (also for clippers that stream)."""
    return f"\n... [{count} {unit} cut] ...\n"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: the header, the rule under it, then one line per row (cells as ``str``)."""
    lines = ["| " + " | ".join(map(str, cells)) + " |" for cells in (header, *rows)]
    return [lines[0], "|" + "---|" * len(header), *lines[1:]]
