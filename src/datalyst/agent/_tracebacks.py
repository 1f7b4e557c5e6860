"""Tracebacks a small model can read: the cell's own frames and the error, not pages of library internals."""

from __future__ import annotations

import re

_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "([^"]*)"')


def compact_traceback(text: str) -> str:
    """The last traceback in ``text`` (the one the cell's code raised, after any it was chained from) with only
    the frames of cells (``<cell-N>``), a line saying how many library frames were left out, and the error.
    Text without a traceback comes back as it is."""
    start = text.rfind(_HEADER)
    if start < 0:
        return text
    lines = text[start + len(_HEADER) :].strip("\n").splitlines()
    frames: list[list[str]] = []
    rest = 0
    while rest < len(lines) and (lines[rest].startswith("  ") or not lines[rest].strip()):
        if _FRAME.match(lines[rest]):
            frames.append([])
        if frames:
            frames[-1].append(lines[rest])
        rest += 1
    kept = [frame for frame in frames if (match := _FRAME.match(frame[0])) and match.group(1).startswith("<cell-")]
    left_out = len(frames) - len(kept)
    body = [line for frame in kept for line in frame]
    if left_out:
        body.append(f"  ({left_out} frame{'s' if left_out != 1 else ''} inside libraries left out)")
    return "\n".join([_HEADER, *body, *lines[rest:]])
