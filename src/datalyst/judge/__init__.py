"""Judges for benchmark answers: the official InfiAgent-DABench closed-form scorer."""

from datalyst.judge._dabench import (
    ANSWER_PATTERN,
    DABenchReport,
    QuestionVerdict,
    dabench_dir,
    extract_answers,
    is_correct,
    load_concepts,
    load_labels,
    score_responses,
)

__all__ = [
    "ANSWER_PATTERN",
    "DABenchReport",
    "QuestionVerdict",
    "dabench_dir",
    "extract_answers",
    "is_correct",
    "load_concepts",
    "load_labels",
    "score_responses",
]
