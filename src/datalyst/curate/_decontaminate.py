"""Decontamination: drop trajectories whose task repeats a benchmark question or reads a benchmark table.

A task's question text is its question and constraints. It repeats a benchmark question when the Jaccard
similarity of their sets of shingles (runs of ``QUESTION_SHINGLE`` tokens, as ``curate._dedup`` cuts them), as
MinHash estimates it, reaches the threshold. At the default 0.5, every DABench question with five of its
words changed or dropped stays above it, while none of 14,000 tasks synthesized here from other tables
came within 0.35 of any DABench or TableBench question (measured when this was written).
A task reads a benchmark table when one of its files holds a table with the content hash of a benchmark
table, or one that looks like it (mostly the same columns and rows), by ``synth.benchmark_fingerprints``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from datalyst.agent import Trajectory
from datalyst.curate._dedup import ShingleIndex, normalise, shingles
from datalyst.curate._records import KEEP, Decision
from datalyst.paths import benchmarks_dir
from datalyst.synth import benchmark_fingerprints
from datalyst.tasks import Task, load_dabench, load_tablebench

BENCHMARK_QUESTION = "benchmark_question"
BENCHMARK_TABLE = "benchmark_table"
QUESTION_SHINGLE = 2
"""Words per shingle of a question text: short, as questions are."""


class TablePrint(Protocol):
    """What decontamination reads of a table fingerprint (as ``synth.benchmark_fingerprints`` makes them)."""

    content_hash: str

    def looks_like(self, other: Any) -> bool: ...


def question_text(task: Task) -> str:
    """The text of a task compared with benchmark questions: its question and constraints, normalised."""
    return normalise(f"{task.question}\n{task.constraints}")


class Decontaminator:
    """A ``Check`` that drops trajectories on tasks too close to a benchmark's questions or tables."""

    name = "decontamination"
    reasons = (BENCHMARK_QUESTION, BENCHMARK_TABLE)

    def __init__(
        self,
        questions: Sequence[tuple[str, str]] = (),
        tables: Sequence[tuple[str, TablePrint]] = (),
        *,
        threshold: float = 0.5,
        num_perm: int = 128,
        seed: int = 0,
    ) -> None:
        """``questions`` are (name, question text) and ``tables`` (name, fingerprint) of the benchmarks."""
        self._names = [name for name, _ in questions]
        self._index = ShingleIndex(threshold=threshold, num_perm=num_perm, seed=seed)
        for key, (_, text) in enumerate(questions):
            self._index.add(key, self._index.signature(shingles(normalise(text), QUESTION_SHINGLE)))
        self._tables = list(tables)
        self._by_question: dict[str, Decision] = {}
        self._by_files: dict[tuple[str, ...], Decision] = {}

    @classmethod
    def from_tasks(cls, tasks: Iterable[Task], **options: Any) -> Decontaminator:
        """Against the questions and tables of benchmark tasks (each named ``<source>:<id>``)."""
        tasks = list(tasks)
        questions = [(f"{task.source or 'benchmark'}:{task.id}", question_text(task)) for task in tasks]
        return cls(questions, benchmark_fingerprints(tasks), **options)

    @classmethod
    def from_benchmarks(cls, root: str | Path | None = None, **options: Any) -> Decontaminator:
        """Against the benchmarks found under ``root`` (default: the shared benchmarks folder): DABench in
        ``dabench/``, and TableBench in every JSONL file of a ``tablebench*/`` folder or of its
        ``inference_results/``. A benchmark that is absent is skipped."""
        root = Path(root) if root is not None else benchmarks_dir()
        tasks = load_dabench(root / "dabench") if (root / "dabench").is_dir() else []
        for pattern in ("tablebench*/*.jsonl", "tablebench*/inference_results/*.jsonl"):
            for path in sorted(root.glob(pattern)):
                tasks += load_tablebench(path)
        return cls.from_tasks(tasks, **options)

    @property
    def size(self) -> tuple[int, int]:
        """How many benchmark questions and tables it compares against."""
        return len(self._names), len(self._tables)

    def check(self, trajectory: Trajectory) -> Decision:
        task = trajectory.task
        text = question_text(task)
        if text not in self._by_question:
            self._by_question[text] = self._question_verdict(text)
        if not self._by_question[text].kept:
            return self._by_question[text]
        files = tuple(sorted(task.files))
        if files not in self._by_files:
            self._by_files[files] = self._table_verdict(task)
        return self._by_files[files]

    def _question_verdict(self, text: str) -> Decision:
        match = self._index.closest(self._index.signature(shingles(text, QUESTION_SHINGLE)))
        if match is None:
            return KEEP
        key, similarity = match
        return Decision(
            reason=BENCHMARK_QUESTION, detail=f"the question is {similarity:.0%} alike with {self._names[key]}"
        )

    def _table_verdict(self, task: Task) -> Decision:
        if not self._tables or not task.files:
            return KEEP
        for where, found in benchmark_fingerprints([task]):
            for name, table in self._tables:
                if found.content_hash == table.content_hash:
                    return Decision(reason=BENCHMARK_TABLE, detail=f"{where} is the same table as {name}")
                if found.looks_like(table):
                    return Decision(reason=BENCHMARK_TABLE, detail=f"{where} holds mostly the rows of {name}")
        return KEEP
