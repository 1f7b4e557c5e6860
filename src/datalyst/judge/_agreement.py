"""Do two answers say the same, and which answer do most of several say? (Self-consistency and voting.)"""

from __future__ import annotations

from collections.abc import Sequence

from datalyst.judge._rule import rule_match
from datalyst.tasks import extract_answers


def answers_agree(first: str, second: str) -> bool:
    """Whether two answers say the same under the 3% rule and normalised text (``@name[value]`` part by part)."""
    parts, other = extract_answers(first), extract_answers(second)
    if parts or other:
        return parts.keys() == other.keys() and all(_agree(parts[name], other[name]) for name in parts)
    return _agree(first, second)


def _agree(first: str, second: str) -> bool:
    """Either side read as the gold value: a terse ``3.2`` agrees with ``the mean is 3.2``."""
    return rule_match(first, second) or rule_match(second, first)


def majority_answer(answers: Sequence[str | None]) -> str | None:
    """The answer that agrees with the most of ``answers`` (itself included); None when none was given.

    Agreement is :func:`answers_agree`, so ``@mean[3.20]`` and ``@mean[3.2]`` vote together. A tie goes to
    the answer given first, so the order of ``answers`` (sampling order, or best value first) breaks it.
    """
    given = [answer for answer in answers if answer and answer.strip()]
    if not given:
        return None
    votes = [sum(answers_agree(answer, other) for other in given) for answer in given]
    return given[votes.index(max(votes))]
