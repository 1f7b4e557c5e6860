"""Text as a model writes it: a sink to which the calls made in one context report each new piece of their text."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

TextSink = Callable[[str], None]
_SINK: ContextVar[TextSink | None] = ContextVar("datalyst_text_sink", default=None)


@contextmanager
def text_streamed_to(sink: TextSink) -> Iterator[None]:
    """While the block runs, each single completion generated in this context (a task and what it awaits)
    reports every new piece of its text to ``sink``, from whichever thread generates it; the completion
    returned is unchanged. Backends that cannot stream (an HTTP server, transformers) report nothing."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def text_sink(params_n: int) -> TextSink | None:
    """The sink of this context, for a call of ``params_n`` completions (only a single one streams)."""
    return _SINK.get() if params_n == 1 else None
