"""Judging each trajectory's final answer with the judge its task names."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.judge import Judgement, judge_for
from datalyst.llm import ChatModel


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


async def ajudge_trajectories(
    trajectories: Sequence[Trajectory], *, judge_model: ChatModel | None = None, concurrency: int = 8
) -> list[Verdict]:
    """A verdict for every trajectory by its task's judge (:func:`judge_for`); one without an answer scores 0.

    ``judge_model`` grades the tasks judged by a model; at most ``concurrency`` answers are judged at once.
    """
    limit = asyncio.Semaphore(concurrency)

    async def one(trajectory: Trajectory) -> Verdict:
        task, answer = trajectory.task, trajectory.answer
        unanswered = trajectory.error or f"no answer ({trajectory.termination})"
        judgement = Judgement(score=0.0, correct=False, reason=unanswered)
        if answer:
            judge = judge_for(task, model=judge_model)
            async with limit:
                judgement = await judge.ajudge(answer)
        return Verdict(
            trajectory_id=trajectory.id,
            task_id=task.id,
            dialect=trajectory.dialect,
            trial=trajectory.trial,
            answered=bool(answer),
            score=judgement.score,
            correct=judgement.correct,
            detail=judgement.reason,
        )

    return list(await asyncio.gather(*(one(t) for t in trajectories)))
