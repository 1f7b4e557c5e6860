"""Obtaining a draft's answer by running its solution in the sandbox, and the checks the answer must pass.

Every rejection has a stable reason (``CHECKS``): the solution fails, prints something else on a second
run, misses or mis-writes an answer the format asks for, asks for more than ``MAX_ANSWERS`` values, gives
a number that is zero (an empty filter or group, nothing to find: a question that teaches little), or
gives a number the agent could read in its prompt (the file's description and sample rows).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from datalyst.sandbox import Sandbox
from datalyst.synth._templates import Draft
from datalyst.tasks import extract_answers

MAX_ANSWERS = 5
CHECKS = (
    "too_many_answers",
    "solution_failed",
    "not_deterministic",
    "answer_missing",
    "badly_written",
    "zero_answer",
    "answer_in_prompt",
    "near_duplicate",
)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
VISIBLE_DIGITS = 3
"""A numeric answer with at least this many significant digits must not appear in the prompt."""


@dataclass(frozen=True)
class Verification:
    answer: dict[str, str] | None
    """The answer the solution printed, by name, when every check passed."""
    reason: str | None = None
    detail: str = ""


def verify(draft: Draft, solution: str, sandbox: Sandbox, prompt: str) -> Verification:
    """Run ``solution`` (loading plus ``draft.code``) twice in ``sandbox`` and check what it printed."""
    if len(draft.answers) > MAX_ANSWERS:
        return Verification(None, "too_many_answers", f"{len(draft.answers)} values, at most {MAX_ANSWERS}")
    outputs = []
    for _ in range(2):
        result = sandbox.run_python(solution)
        if not result.ok:
            return Verification(None, "solution_failed", result.render()[-300:])
        outputs.append(result.stdout)
    if outputs[0] != outputs[1]:
        return Verification(None, "not_deterministic", "two runs printed different answers")
    printed = extract_answers(outputs[0])
    answer = {}
    for expected in draft.answers:
        value = printed.get(expected.name)
        if value is None:
            return Verification(None, "answer_missing", f"no @{expected.name}[...] printed")
        if not expected.well_formed(value):
            return Verification(None, "badly_written", f"@{expected.name}[{value}] is not {expected.format_line}")
        numeric = expected.decimals is not None or expected.integer
        if numeric and float(value) == 0:
            return Verification(None, "zero_answer", f"@{expected.name}[{value}]: nothing found, or nothing left")
        if expected.decimals is not None and _visible(float(value), expected.decimals, prompt):
            return Verification(None, "answer_in_prompt", f"{value} can be read in the file's description")
        answer[expected.name] = value
    return Verification(answer)


def _visible(value: float, decimals: int, prompt: str) -> bool:
    """A number with enough significant digits that some number of the prompt rounds to."""
    if value == 0 or math.floor(math.log10(abs(value))) + 1 + decimals < VISIBLE_DIGITS:
        return False
    return any(round(float(shown), decimals) == value for shown in NUMBER.findall(prompt))


def shingles(question: str) -> frozenset[tuple[str, ...]]:
    """Word 3-grams of a question, for near-duplicate detection."""
    words = re.findall(r"[a-z0-9]+", question.lower())
    return frozenset(tuple(words[i : i + 3]) for i in range(max(1, len(words) - 2)))


def near_duplicate(question: str, kept: list[frozenset[tuple[str, ...]]], threshold: float = 0.8) -> bool:
    mine = shingles(question)
    return any(len(mine & other) / len(mine | other) >= threshold for other in kept if mine | other)
