"""A grader that asks a language model whether a predicted answer agrees with the gold answer.

The model gets the question, the answer to grade and the reference answer, with DataMind's grading
rules (numbers within 3% relative, exact choice for options, a clear and complete result, working
alone is no answer; the wording is ours, in ``prompts/llm_judge.yaml``). It replies with a short
``<thought>…</thought>`` and ``<score>0</score>`` or ``<score>1</score>``.

A reply that cannot be read (no score tag, a score other than 0 or 1, two different scores) is the
model's mistake, not ours: the grader appends the reply and a short correction to the conversation
and asks again, up to ``max_attempts`` times, then reports ``score=None`` with the problem in
``error``. Errors of the backend itself (:class:`~datalyst.errors.ModelError`) propagate.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError, ModelResponseError
from datalyst.judge._rule import REL_TOL
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.prompts import prompt_templates

__all__ = ["DEFAULT_JUDGE_SAMPLING", "LLMGrader", "LLMVerdict"]

DEFAULT_JUDGE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=256)
_SCORE = re.compile(r"<\s*score\s*>([^<]*)<\s*/\s*score\s*>", re.IGNORECASE)
_THOUGHT_OPEN = re.compile(r"<\s*thought\s*>", re.IGNORECASE)
_THOUGHT_CLOSE = re.compile(r"<\s*/\s*thought\s*>", re.IGNORECASE)
_SCORE_OPEN = re.compile(r"<\s*score\s*>", re.IGNORECASE)


class LLMVerdict(BaseModel):
    """What the judge model decided about one answer."""

    model_config = ConfigDict(frozen=True)

    score: int | None
    """1 (correct), 0 (incorrect) or None (no readable reply after every attempt)."""
    reasoning: str
    """The judge's ``<thought>`` of the reply that was used (or of the last reply)."""
    attempts: int
    """Model calls made (0 when the answer was empty and needed no judge)."""
    error: str | None = None
    """Why no score could be read, when ``score`` is None."""
    raw: list[str] = []
    """Every reply of the judge model, in order."""

    @property
    def is_correct(self) -> bool:
        return self.score == 1


def _as_text(value: object) -> str:
    """An answer as the judge reads it: text as it is, any other JSON value as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def render_judge_prompt(question: str, predicted: object, gold: object) -> list[ChatMessage]:
    """The opening messages (system, user) the judge model receives."""
    templates = prompt_templates("datalyst.judge", "llm_judge")
    variables = {
        "question": _as_text(question).strip(),
        "predicted": _as_text(predicted).strip(),
        "gold": _as_text(gold).strip(),
        "tolerance_percent": f"{REL_TOL * 100:g}",
        "tolerance": f"{REL_TOL:g}",
    }
    return [
        ChatMessage(role=Role.SYSTEM, content=templates["system"].render(variables).strip()),
        ChatMessage(role=Role.USER, content=templates["user"].render(variables).strip()),
    ]


def parse_judgement(text: str) -> tuple[int | None, str, str | None]:
    """``(score, reasoning, problem)`` read from one judge reply; ``problem`` is None when it is readable."""
    reasoning = _reasoning(text)
    values = {value.strip() for value in _SCORE.findall(text)}
    if not values:
        return None, reasoning, "no <score>...</score> tag was found"
    if len(values) > 1:
        return None, reasoning, f"several different scores were given ({', '.join(sorted(map(repr, values)))})"
    (value,) = values
    if value not in ("0", "1"):
        return None, reasoning, f"the score {value!r} is neither 0 nor 1"
    return int(value), reasoning, None


def _reasoning(text: str) -> str:
    """The ``<thought>`` text, else whatever precedes the first score tag."""
    if (opened := _THOUGHT_OPEN.search(text)) is not None:
        closed = _THOUGHT_CLOSE.search(text, opened.end()) or _SCORE_OPEN.search(text, opened.end())
        return text[opened.end() : closed.start() if closed else len(text)].strip()
    score = _SCORE_OPEN.search(text)
    return text[: score.start() if score else len(text)].strip()


class LLMGrader:
    """Grades answers with a chat model: ``await LLMGrader(model).agrade(question, predicted, gold)``.

    :func:`~datalyst.judge.judge_for` wraps it, for one task, in the :class:`~datalyst.judge.Judge` protocol.
    """

    def __init__(self, model: ChatModel, *, max_attempts: int = 3, sampling: SamplingParams | None = None) -> None:
        if max_attempts < 1:
            raise ConfigError(f"max_attempts={max_attempts} must be at least 1; use 1 to disable retries")
        self.model = model
        self.max_attempts = max_attempts
        sampling = sampling or DEFAULT_JUDGE_SAMPLING
        self.sampling = sampling if sampling.n == 1 else sampling.model_copy(update={"n": 1})

    async def agrade(self, question: str, predicted: object, gold: object) -> LLMVerdict:
        """Ask the model, retrying unreadable replies; an empty answer scores 0 without a call."""
        if not _as_text(predicted).strip():
            return LLMVerdict(score=0, reasoning="The answer is empty.", attempts=0)
        messages = render_judge_prompt(question, predicted, gold)
        raw: list[str] = []
        reasoning, problem = "", None
        for attempt in range(1, self.max_attempts + 1):
            completions = await self.model.agenerate(messages, self.sampling)
            if not completions:
                raise ModelResponseError(f"judge model {self.model.spec!r} returned no completion; check the backend")
            reply = completions[0].text
            raw.append(reply)
            score, reasoning, problem = parse_judgement(reply)
            if problem is None:
                return LLMVerdict(score=score, reasoning=reasoning, attempts=attempt, raw=raw)
            retry = prompt_templates("datalyst.judge", "llm_judge")["retry"].render(problem=problem).strip()
            messages = [
                *messages,
                ChatMessage(role=Role.ASSISTANT, content=reply),
                ChatMessage(role=Role.USER, content=retry),
            ]
        error = f"no readable verdict after {self.max_attempts} attempt(s); last problem: {problem}"
        return LLMVerdict(score=None, reasoning=reasoning, attempts=self.max_attempts, error=error, raw=raw)

    def grade(self, question: str, predicted: object, gold: object) -> LLMVerdict:
        """Blocking :meth:`agrade`, for scripts (not from inside a running event loop)."""
        return asyncio.run(self.agrade(question, predicted, gold))

    async def agrade_many(
        self, items: Iterable[tuple[str, object, object]], *, concurrency: int = 8
    ) -> list[LLMVerdict]:
        """Grade ``(question, predicted, gold)`` items, at most ``concurrency`` at a time; results in input order."""
        if concurrency < 1:
            raise ConfigError(f"concurrency={concurrency} must be at least 1")
        gate = asyncio.Semaphore(concurrency)

        async def one(question: str, predicted: object, gold: object) -> LLMVerdict:
            async with gate:
                return await self.agrade(question, predicted, gold)

        return list(await asyncio.gather(*(one(*item) for item in items)))
