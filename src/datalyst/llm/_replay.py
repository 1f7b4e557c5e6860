"""A scripted chat model that returns recorded completions in order (a test double that ships).

``ReplayModel(["first answer", "second answer"])`` answers the first call with ``"first answer"``, the
next with ``"second answer"``, and raises :class:`ModelResponseError` after that. It cuts each text the
way a server would: just after the first of ``params.stop`` (``finish_reason="stop"``, the stop string
kept), then after ``params.max_tokens`` tokens (``finish_reason="length"``). Tokens are the recorded ones
when a completion carries offsets (or logprobs naming its tokens), else whitespace-separated words.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path

from pydantic import ValidationError

from datalyst.errors import ModelResponseError, ModelUnavailable
from datalyst.jsonl import split_lines
from datalyst.llm._base import AsyncClosing, ChatMessage, Completion, SamplingParams, TokenLogprob
from datalyst.llm._spec import ModelSpec
from datalyst.llm._streaming import text_sink

__all__ = ["ReplayModel"]

_WORD = re.compile(r"\S+")


class ReplayModel(AsyncClosing):
    """Returns ``outputs`` in order, ``params.n`` per call, after ``latency_s`` seconds.

    With ``per_turn=True`` the outputs are a script for *every* conversation: a call gets the output whose
    index is the number of assistant turns already in its messages (a turn begun for the model, last, is not
    one), so many concurrent conversations can follow the same script (rollout tests and benchmarks).
    """

    def __init__(
        self,
        outputs: Sequence[str | Completion],
        *,
        latency_s: float = 0.0,
        per_turn: bool = False,
        spec: str = "replay",
    ) -> None:
        self.spec = spec
        self.latency_s = latency_s
        self.per_turn = per_turn
        self.calls: list[tuple[list[ChatMessage], SamplingParams]] = []  # every call's messages and params, in order
        self._outputs = [_as_completion(item) for item in outputs]
        self._next = 0

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> ReplayModel:
        """Load ``replay:FILE.jsonl``: one JSON string or :class:`Completion` object per line.

        Options: ``latency_s``, and ``per_turn=true`` to follow the file as every conversation's script.
        """
        options = spec.check_options({"latency_s": float, "per_turn": bool})
        path = Path(spec.target).expanduser()
        try:
            lines = split_lines(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ModelUnavailable(f"cannot read replay file {path}: {exc.strerror}; record one first") from exc
        outputs: list[str | Completion] = []
        for number, line in enumerate(lines, start=1):
            if line.strip():
                outputs.append(_read_line(path, number, line))
        return cls(outputs, spec=str(spec), **options)

    @property
    def remaining(self) -> int:
        """Completions not handed out yet."""
        return len(self._outputs) - self._next

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        """The next ``params.n`` recorded completions, cut at ``params.stop`` and ``params.max_tokens``."""
        recorded = self._script_turn(messages, params.n) if self.per_turn else self._take(params.n)
        self.calls.append((list(messages), params))
        prompt_tokens = sum(_count_tokens(message.content) for message in messages)
        served = [_as_served(completion, params, prompt_tokens) for completion in recorded]
        sink = text_sink(params.n)
        pieces = (re.findall(r"\s*\S+\s*?", served[0].text) if self.latency_s > 0 else [served[0].text]) if sink else []
        for piece in pieces:  # typed out word by word over the latency (at once without one)
            await asyncio.sleep(self.latency_s / len(pieces))
            sink(piece)  # type: ignore[misc]
        if self.latency_s > 0 and not pieces:
            await asyncio.sleep(self.latency_s)
        return served

    def _take(self, n: int) -> list[Completion]:
        # Taken before sleeping, so concurrent callers get them in call order.
        if n > self.remaining:
            raise ModelResponseError(
                f"replay model {self.spec!r} ran out: {len(self._outputs)} completions were recorded and "
                f"{self._next} used, but {n} more were asked for; record more outputs"
            )
        self._next += n
        return self._outputs[self._next - n : self._next]

    def _script_turn(self, messages: Sequence[ChatMessage], n: int) -> list[Completion]:
        turn = sum(message.role == "assistant" for message in messages[:-1])  # the last one may be a begun turn
        if turn + n > len(self._outputs):
            raise ModelResponseError(
                f"replay model {self.spec!r} has a script of {len(self._outputs)} turns, but turn {turn + 1} "
                "was asked for; record more outputs"
            )
        return self._outputs[turn : turn + n]

    async def aclose(self) -> None:
        """Nothing to release."""


def _as_completion(item: str | Completion) -> Completion:
    if isinstance(item, str):
        return Completion(text=item, finish_reason="stop", completion_tokens=_count_tokens(item))
    if item.offsets is None and item.logprobs is not None:
        # Recorded logprobs name their tokens, which is enough to know where each one ends.
        ends = list(accumulate(len(token.token) for token in item.logprobs))
        if ends and ends[-1] == len(item.text):
            return item.model_copy(update={"offsets": ends})
    return item


def _read_line(path: Path, number: int, line: str) -> str | Completion:
    try:
        value = json.loads(line)
        return value if isinstance(value, str) else Completion.model_validate(value)
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ModelUnavailable(
            f"replay file {path} line {number} is neither a JSON string nor a completion object; "
            'write one "text" or {"text": ..., "finish_reason": ...} per line'
        ) from exc


def _count_tokens(text: str) -> int:
    return len(_WORD.findall(text))


def _as_served(recorded: Completion, params: SamplingParams, prompt_tokens: int) -> Completion:
    """``recorded`` as a server would return it for ``params``: ended at a stop string (kept) or at max_tokens."""
    served = recorded.ended_at_stop(params.stop)
    ends = served.offsets if served.offsets is not None else [word.end() for word in _WORD.finditer(served.text)]
    if len(ends) > params.max_tokens:
        served = served.cut(ends[params.max_tokens - 1]).model_copy(update={"finish_reason": "length", "stop": None})
    if served.offsets is not None:
        completion_tokens = len(served.offsets)
    elif served.text == recorded.text and recorded.completion_tokens:
        completion_tokens = recorded.completion_tokens
    else:
        completion_tokens = _count_tokens(served.text)
    logprobs = None
    if params.logprobs:
        logprobs = served.logprobs or [TokenLogprob(token=word, logprob=0.0) for word in _WORD.findall(served.text)]
    return served.model_copy(
        update={
            "prompt_tokens": recorded.prompt_tokens or prompt_tokens,
            "completion_tokens": completion_tokens,
            "logprobs": logprobs,
        }
    )
