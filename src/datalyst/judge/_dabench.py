"""Scoring of InfiAgent-DABench responses, following the official closed-form rules.

The rules reproduced here (see ``shared/benchmarks/dabench/SOURCE.md``):

* a response is ``{"id": ..., "response": "..."}``; per label id the first record with a
  non-empty ``response`` string is used, the rest are ignored;
* a question without such a response is left out of every denominator (the ``"official"``
  view); the ``"strict"`` view instead counts it with every sub-answer wrong;
* answers are read with ``@(\\w+)\\[(.*?)\\]`` (non-greedy, single line, case-sensitive
  names) and a name seen twice keeps its last value;
* a sub-answer is right when it equals the label text, or when both sides go through
  ``float()`` and differ by less than ``1e-6``;
* every reported rate is rounded to 4 decimals (``0.0`` when nothing is counted).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from datalyst.errors import DataFileError
from datalyst.jsonl import read_records
from datalyst.tasks import extract_answers

FLOAT_TOLERANCE = 1e-6
DIGITS = 4

View = Literal["official", "strict"]


@dataclass(slots=True)
class QuestionVerdict:
    """How one question was judged (a plain slotted record: a run can hold hundreds of thousands)."""

    id: int
    answered: bool
    """False when no usable response existed (only listed in the strict view)."""
    n_correct: int
    n_total: int
    correctness: dict[str, bool]
    """Label name -> whether the extracted answer matched."""

    @property
    def all_correct(self) -> bool:
        return self.n_correct == self.n_total


class DABenchReport(BaseModel):
    """Aggregate DABench metrics for one set of responses."""

    model_config = ConfigDict(frozen=True)

    view: View
    accuracy_by_question: float
    accuracy_by_sub_question: float
    proportional_accuracy: float
    n_scored: int
    """Questions inside the denominators."""
    n_skipped: int
    """Questions left out of the denominators (always 0 in the strict view)."""
    n_missing: int
    """Questions with no usable response, whichever the view."""
    per_concept: dict[str, float]
    """Concept -> accuracy by question over the scored questions tagged with it."""
    by_concept_count: dict[int, float]
    """Number of concepts -> accuracy by question over the scored questions with that many."""
    verdicts: list[QuestionVerdict]


def judge_sub_answers(response: str | None, expected: Mapping[str, str]) -> dict[str, bool]:
    """Label name -> whether ``response`` (None: no response) gives that sub-answer right."""
    found = extract_answers(response) if response is not None else {}
    return {name: is_correct(found.get(name), value) for name, value in expected.items()}


def load_labels(path: str | Path) -> dict[int, dict[str, str]]:
    """Label id -> {answer name: expected text}; with a repeated name the later pair wins."""
    labels: dict[int, dict[str, str]] = {}
    for record in read_records(path):
        pairs = record.get("common_answers")
        if not isinstance(pairs, list) or not pairs:
            raise DataFileError(f"label {record['id']} in {path} has no 'common_answers' pairs; it cannot be scored")
        labels[record["id"]] = {str(name): str(value) for name, value in pairs}
    return labels


def load_concepts(questions_path: str | Path) -> dict[int, list[str]]:
    """Question id -> its list of concepts (empty when the record has none)."""
    return {record["id"]: list(record.get("concepts") or []) for record in read_records(questions_path)}


def is_correct(extracted: str | None, expected: str) -> bool:
    """One sub-answer: exact text, else both floats within ``FLOAT_TOLERANCE``; missing is wrong."""
    if extracted is None:
        return False
    if extracted == expected:
        return True
    try:
        return abs(float(extracted) - float(expected)) < FLOAT_TOLERANCE
    except ValueError:
        return False


def _first_responses(responses: Iterable[Mapping], wanted: Mapping[int, object]) -> dict[int, str]:
    chosen: dict[int, str] = {}
    for record in responses:
        qid = record.get("id")
        text = record.get("response")
        if qid in wanted and qid not in chosen and isinstance(text, str) and text:
            chosen[qid] = text
    return chosen


class _Totals(NamedTuple):
    n_all_correct: int
    n_correct: int
    n_total: int
    sum_of_fractions: float


def _verdicts(
    labels: Mapping[int, Mapping[str, str]], texts: Mapping[int, str], strict: bool
) -> tuple[list[QuestionVerdict], _Totals]:
    """One verdict per scored label, in label order, and their totals (the hot loop: benchmarks/score_bench.py)."""
    verdicts: list[QuestionVerdict] = []
    n_all_correct = n_correct = n_total = 0
    fractions: list[float] = []
    for qid, expected in labels.items():
        text = texts.get(qid)
        if text is None and not strict:
            continue
        correctness = judge_sub_answers(text, expected)
        right, total = sum(correctness.values()), len(correctness)
        verdicts.append(QuestionVerdict(qid, text is not None, right, total, correctness))
        n_all_correct += right == total
        n_correct += right
        n_total += total
        fractions.append(right / total)
    return verdicts, _Totals(n_all_correct, n_correct, n_total, sum(fractions))


def _concept_groups(
    verdicts: list[QuestionVerdict], concepts: Mapping[int, Sequence[str]]
) -> tuple[dict[str, list[QuestionVerdict]], dict[int, list[QuestionVerdict]]]:
    """Verdicts by concept tag (a repeated tag counts once) and by number of tags (untagged left out)."""
    by_concept: dict[str, list[QuestionVerdict]] = {}
    by_count: dict[int, list[QuestionVerdict]] = {}
    if not concepts:
        return by_concept, by_count
    for verdict in verdicts:
        tags = list(concepts.get(verdict.id, ()))
        for tag in dict.fromkeys(tags):
            by_concept.setdefault(tag, []).append(verdict)
        if tags:
            by_count.setdefault(len(tags), []).append(verdict)
    return by_concept, by_count


def _rate(numerator: float, denominator: int) -> float:
    return round(numerator / denominator, DIGITS) if denominator else 0.0


def _question_accuracy(verdicts: Sequence[QuestionVerdict]) -> float:
    return _rate(sum(v.all_correct for v in verdicts), len(verdicts))


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, restoring its state after.

    Scoring allocates one record per question and keeps them all; the full collections this sets
    off find nothing to free and cost a quarter of the time (benchmarks/score_bench.py).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def score_responses(
    responses: Iterable[Mapping],
    labels: Mapping[int, Mapping[str, str]],
    concepts: Mapping[int, Sequence[str]] | None = None,
    *,
    strict: bool = False,
) -> DABenchReport:
    """Judge ``responses`` against ``labels`` (from :func:`load_labels`).

    ``concepts`` (from :func:`load_concepts`) feeds the per-concept tables; a question
    missing from it is counted in the overall metrics only. ``strict=True`` counts a
    question without a usable response as entirely wrong instead of leaving it out.
    """
    for qid, expected in labels.items():
        if not expected:
            raise ValueError(f"label {qid} has no sub-answers; it cannot be scored")
    texts = _first_responses(responses, labels)
    with _collection_paused():
        verdicts, totals = _verdicts(labels, texts, strict)
    by_concept, by_count = _concept_groups(verdicts, concepts or {})
    return DABenchReport(
        view="strict" if strict else "official",
        accuracy_by_question=_rate(totals.n_all_correct, len(verdicts)),
        accuracy_by_sub_question=_rate(totals.n_correct, totals.n_total),
        proportional_accuracy=_rate(totals.sum_of_fractions, len(verdicts)),
        n_scored=len(verdicts),
        n_skipped=len(labels) - len(verdicts),
        n_missing=len(labels) - len(texts),
        per_concept={tag: _question_accuracy(group) for tag, group in sorted(by_concept.items())},
        by_concept_count={count: _question_accuracy(group) for count, group in sorted(by_count.items())},
        verdicts=verdicts,
    )
