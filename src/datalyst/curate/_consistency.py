"""Do several attempts at one question agree, and which states the answer best? (DataMind's self-consistency.)

Two judges behind one protocol: :class:`RuleConsistency` needs no model (answers agree when equal
under the 3% rule or as normalised text, sub-answer by sub-answer for ``@name[value]`` answers, and
the shortest attempt is the best); :class:`LLMConsistency` asks a judge model, which also reads each
attempt's closing reasoning. Either way every attempt must agree: one without an answer breaks it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Protocol

import jinja2
from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError, ModelResponseError
from datalyst.judge import REL_TOL, answers_agree
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.prompts import prompt_templates

JUDGE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=384)
_TAG = {name: re.compile(rf"<\s*{name}\s*>(.*?)<\s*/\s*{name}\s*>", re.IGNORECASE | re.DOTALL) for name in
        ("reasoning", "agree", "best")}  # fmt: skip


class Attempt(BaseModel):
    """What a judge sees of one trajectory: its final answer, the reasoning before it, and its length."""

    model_config = ConfigDict(frozen=True)

    answer: str | None
    reasoning: str = ""
    length: int = 0
    """Characters the agent wrote: among agreeing attempts, the shortest is the most concise."""


class Agreement(BaseModel):
    """A consistency judge's decision on one group of attempts."""

    model_config = ConfigDict(frozen=True)

    agree: bool
    best: int | None = None
    """Index of the attempt that states the agreed answer best (None when they do not agree)."""
    critique: str
    """Why they agree or not: fed back to the agent when they do not."""


class ConsistencyJudge(Protocol):
    name: str
    """Recorded with every verdict: ``rule`` or ``llm:<model spec>``."""

    async def acheck(self, question: str, attempts: Sequence[Attempt]) -> Agreement: ...


class RuleConsistency:
    """Agreement without a model; the most concise attempt is the best."""

    name = "rule"

    async def acheck(self, question: str, attempts: Sequence[Attempt]) -> Agreement:
        listed = "; ".join(f"attempt {i}: {a.answer.strip() if a.answer else '(no answer)'}" for i, a in
                           enumerate(attempts, start=1))  # fmt: skip
        if any(not (attempt.answer or "").strip() for attempt in attempts):
            return Agreement(agree=False, critique=f"Not every attempt reached an answer ({listed}).")
        clashes = [
            (i + 1, j + 1)
            for (i, a), (j, b) in itertools.combinations(enumerate(attempts), 2)
            if not answers_agree(a.answer or "", b.answer or "")
        ]
        if clashes:
            pairs = ", ".join(f"{i} and {j}" for i, j in clashes)
            return Agreement(agree=False, critique=f"The answers disagree (attempts {pairs}): {listed}.")
        best = min(range(len(attempts)), key=lambda i: attempts[i].length)
        return Agreement(agree=True, best=best, critique=f"All {len(attempts)} answers agree.")


def _templates() -> dict[str, jinja2.Template]:
    return prompt_templates("datalyst.curate", "consistency")


def parse_agreement(text: str, count: int) -> tuple[Agreement | None, str | None]:
    """The judge's reply read as an Agreement, or None and what is wrong with it."""
    found = {name: pattern.findall(text) for name, pattern in _TAG.items()}
    reasoning = found["reasoning"][0].strip() if found["reasoning"] else ""
    verdicts = {value.strip().lower() for value in found["agree"]}
    if verdicts not in ({"yes"}, {"no"}):
        return None, "no single <agree>yes</agree> or <agree>no</agree> tag was found"
    if verdicts == {"no"}:
        return Agreement(agree=False, critique=reasoning or "The judge found the answers inconsistent."), None
    picks = {value.strip() for value in found["best"]}
    if len(picks) != 1 or not (pick := picks.pop()).isdigit() or not 1 <= int(pick) <= count:
        return None, f"<best> must hold one attempt number from 1 to {count}"
    return Agreement(
        agree=True, best=int(pick) - 1, critique=reasoning or "The judge found the answers consistent."
    ), None


class LLMConsistency:
    """A judge model decides; an unreadable reply is asked again, up to ``max_attempts`` times, then disagrees."""

    def __init__(self, model: ChatModel, *, max_attempts: int = 3, sampling: SamplingParams = JUDGE_SAMPLING) -> None:
        if max_attempts < 1:
            raise ConfigError(f"max_attempts={max_attempts} must be at least 1")
        self.model, self.max_attempts, self.sampling = model, max_attempts, sampling.model_copy(update={"n": 1})
        self.name = f"llm:{model.spec}"

    def messages(self, question: str, attempts: Sequence[Attempt]) -> list[ChatMessage]:
        variables = {"question": question.strip(), "attempts": attempts, "tolerance_percent": f"{REL_TOL * 100:g}"}
        templates = _templates()
        return [
            ChatMessage(role=Role.SYSTEM, content=templates["system"].render(variables).strip()),
            ChatMessage(role=Role.USER, content=templates["user"].render(variables).strip()),
        ]

    async def acheck(self, question: str, attempts: Sequence[Attempt]) -> Agreement:
        messages = self.messages(question, attempts)
        problem = None
        for _ in range(self.max_attempts):
            completions = await self.model.agenerate(messages, self.sampling)
            if not completions:
                raise ModelResponseError(f"judge model {self.model.spec!r} returned no completion; check the backend")
            reply = completions[0].text
            agreement, problem = parse_agreement(reply, len(attempts))
            if agreement is not None:
                return agreement
            retry = _templates()["retry"].render(problem=problem, count=len(attempts)).strip()
            messages = [
                *messages,
                ChatMessage(role=Role.ASSISTANT, content=reply),
                ChatMessage(role=Role.USER, content=retry),
            ]
        return Agreement(agree=False, critique=f"The judge's reply could not be read ({problem}).")
