"""Judging each trajectory's final answer with the judge its task names."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.errors import ConfigError, DataFileError
from datalyst.judge import (
    LLMJudge,
    execution_match,
    extract_sql,
    judge_sub_answers,
    parse_final_answer,
    rule_match,
    tablebench_item_score,
)
from datalyst.tasks import Task


class Verdict(BaseModel):
    """How one trajectory's answer was judged."""

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    task_id: str
    dialect: str
    trial: int
    answered: bool
    score: float
    """In [0, 1]: 1 or 0 (for DABench, 1 only when every sub-answer is right); ROUGE-L F for TableBench."""
    correct: bool
    detail: str | None = None
    """What the judge saw: wrong sub-answers, an SQL error, the judge model's reasoning."""


def tablebench_prediction(answer: str) -> str:
    """The TableBench prediction in an agent's answer: after ``Final Answer:`` when written, else all of it."""
    return parse_final_answer(answer) if "Final Answer:" in answer else answer.strip()


def judge_answer(task: Task, answer: str) -> tuple[float, str | None]:
    """Score ``answer`` against ``task``'s gold with a deterministic judge."""
    if task.judge == "dabench":
        gold = task.answer if isinstance(task.answer, dict) else {}
        correctness = judge_sub_answers(answer, {name: str(value) for name, value in gold.items()})
        wrong = [name for name, right in correctness.items() if not right]
        return float(bool(gold) and not wrong), f"wrong: {', '.join(wrong)}" if wrong else None
    if task.judge == "tablebench":
        return tablebench_item_score(tablebench_prediction(answer), str(task.answer), task.subcategory or ""), None
    if task.judge in ("sql", "csv"):
        if not task.files or not task.answer_sql:
            raise DataFileError(f"SQL task {task.id} needs its database in files and a gold query in answer_sql")
        compare = "rows" if task.judge == "sql" else "columns"
        verdict = execution_match(task.files[0], extract_sql(answer), task.answer_sql, compare=compare)
        return float(verdict.correct), verdict.error
    if task.judge == "rule":
        return float(rule_match(answer, task.answer)), None
    raise ConfigError(f"task {task.id} needs the {task.judge!r} judge, which needs a judge model (--judge-model)")


async def ajudge_trajectories(
    trajectories: Sequence[Trajectory], *, llm_judge: LLMJudge | None = None, concurrency: int = 8
) -> list[Verdict]:
    """A verdict for every trajectory; a trajectory without an answer scores 0."""
    limit = asyncio.Semaphore(concurrency)

    async def one(trajectory: Trajectory) -> Verdict:
        task, answer = trajectory.task, trajectory.answer
        score, detail = 0.0, trajectory.error or f"no answer ({trajectory.termination})"
        if answer:
            if task.judge == "llm":
                if llm_judge is None:
                    raise ConfigError(f"task {task.id} is judged by a model; pass --judge-model")
                async with limit:
                    verdict = await llm_judge.ajudge(task.question, answer, task.answer)
                score, detail = float(verdict.score or 0), verdict.error or verdict.reasoning
            else:
                score, detail = judge_answer(task, answer)
        return Verdict(
            trajectory_id=trajectory.id,
            task_id=task.id,
            dialect=trajectory.dialect,
            trial=trajectory.trial,
            answered=bool(answer),
            score=score,
            correct=score == 1.0,
            detail=detail,
        )

    return list(await asyncio.gather(*(one(t) for t in trajectories)))
