"""Judging each trajectory's final answer with the judge its task names."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

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
    reformatted_score: float | None = None
    """DABench, when the run reformats answers (the official protocol): the score of the reformatted answer
    (0 without an answer)."""


async def ajudge_trajectories(
    trajectories: Sequence[Trajectory],
    *,
    judge_model: ChatModel | None = None,
    reformatted: Mapping[tuple[str, str], str] | None = None,
    concurrency: int = 8,
    require_isolation: bool = True,
) -> list[Verdict]:
    """A verdict for every trajectory by its task's judge (:func:`judge_for`); one without an answer scores 0.

    ``judge_model`` grades the tasks judged by a model; at most ``concurrency`` answers are judged at once.
    ``reformatted`` maps (dialect, trajectory id) to the reformatted answer of each answered DABench
    trajectory; with it, DABench verdicts carry ``reformatted_score`` too. ``require_isolation=False`` lets
    judges that run programs (HumanEval, test cases) do so where the sandbox cannot isolate them.
    """
    limit = asyncio.Semaphore(concurrency)

    async def one(trajectory: Trajectory) -> Verdict:
        task, answer = trajectory.task, trajectory.answer
        unanswered = trajectory.error or f"no answer ({trajectory.termination})"
        judgement = Judgement(score=0.0, correct=False, reason=unanswered)
        reformatted_score = 0.0 if reformatted is not None and task.judge == "dabench" else None
        if answer:
            judge = judge_for(task, model=judge_model, require_isolation=require_isolation)
            async with limit:
                judgement = await judge.ajudge(answer)
                if reformatted_score is not None:
                    reformatted_score = (await judge.ajudge(reformatted[trajectory.dialect, trajectory.id])).score
        return Verdict(
            trajectory_id=trajectory.id,
            task_id=task.id,
            dialect=trajectory.dialect,
            trial=trajectory.trial,
            answered=bool(answer),
            score=judgement.score,
            correct=judgement.correct,
            detail=judgement.reason,
            reformatted_score=reformatted_score,
        )

    return list(await asyncio.gather(*(one(t) for t in trajectories)))
