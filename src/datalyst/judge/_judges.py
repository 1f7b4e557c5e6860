"""Judges behind one protocol: ``await judge_for(task).ajudge(answer)`` gives a :class:`Judgement`.

A task names its judge (``Task.judge``); :func:`judge_for` builds that judge with the task's gold
answer inside, so every caller (evaluation verdicts, RL rewards, curation filters) scores an answer
the same way without knowing which rules apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from datalyst.errors import ConfigError, DataFileError
from datalyst.judge._dabench import judge_sub_answers
from datalyst.judge._llm import LLMGrader
from datalyst.judge._programs import (
    arun_cases,
    cases_summary,
    humaneval_completion,
    humaneval_program,
    program_text,
    run_program,
)
from datalyst.judge._rule import rule_match
from datalyst.judge._sql import execution_match, extract_sql
from datalyst.judge._tablebench import tablebench_item_score, tablebench_prediction
from datalyst.llm import ChatModel
from datalyst.tasks import Case, Task


class Judgement(BaseModel):
    """How one answer was judged."""

    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=0.0, le=1.0)
    """1 or 0 for all-or-nothing judges; a partial credit (TableBench ROUGE-L) in between."""
    correct: bool
    reason: str | None = None
    """What the judge saw beyond the score: wrong sub-answers, an SQL error, the judge model's reasoning."""
    share: float | None = Field(default=None, ge=0.0, le=1.0)
    """The share of sub-answers that are right, where the answer has several (DABench's ``@name[value]``)."""


@runtime_checkable
class Judge(Protocol):
    """Scores answers to one task."""

    async def ajudge(self, answer: str) -> Judgement: ...


def _all_or_nothing(right: bool, reason: str | None = None) -> Judgement:
    return Judgement(score=float(right), correct=right, reason=reason)


@dataclass(frozen=True)
class RuleJudge:
    """The deterministic rule (numbers within 3%, loose text and list matching) against a gold JSON value."""

    gold: JsonValue

    async def ajudge(self, answer: str) -> Judgement:
        return _all_or_nothing(rule_match(answer, self.gold))


@dataclass(frozen=True)
class DABenchJudge:
    """DABench's closed-form rules: right only when every ``@name[value]`` sub-answer is right."""

    expected: Mapping[str, str]

    async def ajudge(self, answer: str) -> Judgement:
        if not self.expected:
            return _all_or_nothing(False, "the task has no @name[value] answers to compare with")
        verdicts = judge_sub_answers(answer, self.expected)
        wrong = [name for name, right in verdicts.items() if not right]
        reason = f"wrong: {', '.join(wrong)}" if wrong else None
        return Judgement(
            score=float(not wrong), correct=not wrong, reason=reason, share=sum(verdicts.values()) / len(verdicts)
        )


@dataclass(frozen=True)
class TableBenchJudge:
    """TableBench's per-answer metric for the question's subtype (EM, EM within 10% or ROUGE-L)."""

    reference: str
    subtype: str

    async def ajudge(self, answer: str) -> Judgement:
        score = tablebench_item_score(tablebench_prediction(answer), self.reference, self.subtype)
        return Judgement(score=score, correct=score == 1.0)


@dataclass(frozen=True)
class SqlJudge:
    """Execution accuracy: the answer's query and the gold query run on the task's SQLite file."""

    database: str
    gold_sql: str
    compare: Literal["rows", "columns"] = "rows"

    async def ajudge(self, answer: str) -> Judgement:
        verdict = await asyncio.to_thread(
            execution_match, self.database, extract_sql(answer), self.gold_sql, compare=self.compare
        )
        return _all_or_nothing(verdict.correct, verdict.error)


@dataclass(frozen=True)
class LLMJudge:
    """A judge model grades the answer against the gold answer (see :class:`LLMGrader`)."""

    grader: LLMGrader
    question: str
    gold: JsonValue

    async def ajudge(self, answer: str) -> Judgement:
        verdict = await self.grader.agrade(self.question, answer, self.gold)
        return _all_or_nothing(verdict.is_correct, verdict.error or verdict.reasoning)


@dataclass(frozen=True)
class CasesJudge:
    """The answer's program must print every case's output from its input; the first failing case is the reason."""

    cases: tuple[Case, ...]
    require_isolation: bool = True

    async def ajudge(self, answer: str) -> Judgement:
        runs = await arun_cases(program_text(answer), self.cases, require_isolation=self.require_isolation)
        passed = sum(run.passed for run in runs)
        right = passed == len(runs)
        reason = None if right else cases_summary(self.cases, runs)
        return Judgement(score=float(right), correct=right, reason=reason, share=passed / len(runs) if runs else 0.0)


@dataclass(frozen=True)
class HumanEvalJudge:
    """HumanEval's rule: the prompt, the completion, the test and ``check(entry_point)`` run to the end in 3 s."""

    prompt: str
    check: str
    entry_point: str
    require_isolation: bool = True

    async def ajudge(self, answer: str) -> Judgement:
        source = humaneval_program(self.prompt, humaneval_completion(self.prompt, answer), self.check,
                                   self.entry_point)  # fmt: skip
        run = await asyncio.to_thread(run_program, source, require_isolation=self.require_isolation)
        return _all_or_nothing(run.passed, None if run.passed else run.result)


def judge_for(task: Task, *, model: ChatModel | None = None, require_isolation: bool = True) -> Judge:
    """The judge ``task.judge`` names, holding the task's gold answer; ``model`` grades ``llm``-judged tasks.

    ``require_isolation=False`` lets the judges that run programs do so where the sandbox cannot isolate them.
    """
    if task.judge == "dabench":
        gold = task.answer if isinstance(task.answer, dict) else {}
        return DABenchJudge({name: str(value) for name, value in gold.items()})
    if task.judge == "tablebench":
        return TableBenchJudge(str(task.answer), task.subcategory or "")
    if task.judge in ("sql", "csv"):
        if not task.files or not task.answer_sql:
            raise DataFileError(f"SQL task {task.id} needs its database in files and a gold query in answer_sql")
        return SqlJudge(task.files[0], task.answer_sql, "rows" if task.judge == "sql" else "columns")
    if task.judge == "cases":
        if not task.tests:
            raise ConfigError(f"task {task.id} is judged by its test cases but has none")
        return CasesJudge(tuple(task.tests), require_isolation)
    if task.judge == "humaneval":
        if not task.check or not task.entry_point:
            raise ConfigError(f"HumanEval task {task.id} needs its check function and entry point")
        return HumanEvalJudge(task.question, task.check, task.entry_point, require_isolation)
    if task.judge == "llm":
        if model is None:
            raise ConfigError(f"task {task.id} is judged by a model; give a judge model (--judge-model)")
        return LLMJudge(LLMGrader(model), task.question, task.answer)
    return RuleJudge(task.answer)
