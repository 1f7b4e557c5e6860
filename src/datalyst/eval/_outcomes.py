"""Every trajectory of a run judged once (:func:`datalyst.agent.ajudge_trajectory`), with DABench's official
protocol beside it: the score of the reformatted answer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from datalyst.agent import Outcome, Trajectory, ajudge_trajectory
from datalyst.judge import judge_for
from datalyst.llm import ChatModel


class EvalOutcome(Outcome):
    """A trajectory's outcome in an evaluation run (``outcomes.jsonl``)."""

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
) -> list[EvalOutcome]:
    """The outcome of every trajectory; at most ``concurrency`` are judged at once.

    ``judge_model`` grades the tasks judged by a model. ``reformatted`` maps (dialect, trajectory id) to the
    reformatted answer of each answered DABench trajectory; with it, DABench outcomes carry ``reformatted_score``
    too. ``require_isolation=False`` lets judges that run programs (HumanEval, test cases) do so where the sandbox
    cannot isolate them.
    """
    limit = asyncio.Semaphore(concurrency)

    async def one(trajectory: Trajectory) -> EvalOutcome:
        async with limit:
            outcome = await ajudge_trajectory(trajectory, judge_model=judge_model, require_isolation=require_isolation)
            reformatted_score = None
            if reformatted is not None and trajectory.task.judge == "dabench":
                answer = reformatted.get((trajectory.dialect, trajectory.id)) if outcome.answered else None
                judge = judge_for(trajectory.task, model=judge_model, require_isolation=require_isolation)
                reformatted_score = (await judge.ajudge(answer)).score if answer is not None else 0.0
        return EvalOutcome(**outcome.model_dump(), reformatted_score=reformatted_score)

    return list(await asyncio.gather(*(one(t) for t in trajectories)))
