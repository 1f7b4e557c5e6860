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

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from datalyst.errors import DataFileError
from datalyst.paths import benchmarks_dir

ANSWER_PATTERN = re.compile(r"@(\w+)\[(.*?)\]")
FLOAT_TOLERANCE = 1e-6
DIGITS = 4

View = Literal["official", "strict"]


class QuestionVerdict(BaseModel):
    """How one question was judged."""

    model_config = ConfigDict(frozen=True)

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


def dabench_dir() -> Path:
    """The folder holding the DABench ``questions.jsonl`` and ``labels.jsonl``."""
    return benchmarks_dir() / "dabench"


def extract_answers(response: str) -> dict[str, str]:
    """Every ``@name[value]`` in ``response``; a repeated name keeps its last value."""
    return {name: value for name, value in ANSWER_PATTERN.findall(response)}


def _read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(f"cannot read {path}: {exc}; check the path") from exc
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(f"{path} line {number} is not JSON ({exc}); fix or remove that line") from exc
        if not isinstance(record, dict) or "id" not in record:
            raise DataFileError(f"{path} line {number} is not an object with an 'id'; fix or remove that line")
        records.append(record)
    return records


def load_labels(path: str | Path) -> dict[int, dict[str, str]]:
    """Label id -> {answer name: expected text}; with a repeated name the later pair wins."""
    labels: dict[int, dict[str, str]] = {}
    for record in _read_jsonl(path):
        pairs = record.get("common_answers")
        if not isinstance(pairs, list) or not pairs:
            raise DataFileError(f"label {record['id']} in {path} has no 'common_answers' pairs; it cannot be scored")
        labels[record["id"]] = {str(name): str(value) for name, value in pairs}
    return labels


def load_concepts(questions_path: str | Path) -> dict[int, list[str]]:
    """Question id -> its list of concepts (empty when the record has none)."""
    return {record["id"]: list(record.get("concepts") or []) for record in _read_jsonl(questions_path)}


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


def _rate(numerator: float, denominator: int) -> float:
    return round(numerator / denominator, DIGITS) if denominator else 0.0


def _question_accuracy(verdicts: Sequence[QuestionVerdict]) -> float:
    return _rate(sum(v.all_correct for v in verdicts), len(verdicts))


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
    concepts = concepts or {}
    for qid, expected in labels.items():
        if not expected:
            raise ValueError(f"label {qid} has no sub-answers; it cannot be scored")
    texts = _first_responses(responses, labels)
    verdicts: list[QuestionVerdict] = []
    for qid, expected in labels.items():
        answered = qid in texts
        if not answered and not strict:
            continue
        found = extract_answers(texts[qid]) if answered else {}
        correctness = {name: is_correct(found.get(name), value) for name, value in expected.items()}
        verdicts.append(
            QuestionVerdict(
                id=qid,
                answered=answered,
                n_correct=sum(correctness.values()),
                n_total=len(correctness),
                correctness=correctness,
            )
        )

    by_concept: dict[str, list[QuestionVerdict]] = {}
    by_count: dict[int, list[QuestionVerdict]] = {}
    for verdict in verdicts:
        tags = list(concepts.get(verdict.id, ()))
        for tag in dict.fromkeys(tags):
            by_concept.setdefault(tag, []).append(verdict)
        if tags:
            by_count.setdefault(len(tags), []).append(verdict)

    n_missing = len(labels) - len(texts)
    return DABenchReport(
        view="strict" if strict else "official",
        accuracy_by_question=_question_accuracy(verdicts),
        accuracy_by_sub_question=_rate(sum(v.n_correct for v in verdicts), sum(v.n_total for v in verdicts)),
        proportional_accuracy=_rate(sum(v.n_correct / v.n_total for v in verdicts), len(verdicts)),
        n_scored=len(verdicts),
        n_skipped=len(labels) - len(verdicts),
        n_missing=n_missing,
        per_concept={tag: _question_accuracy(group) for tag, group in sorted(by_concept.items())},
        by_concept_count={count: _question_accuracy(group) for count, group in sorted(by_count.items())},
        verdicts=verdicts,
    )
