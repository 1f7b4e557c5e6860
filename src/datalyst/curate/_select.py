"""Which judged trajectories go on to the rule filters: the four strategies of DataMind's ablation.

- ``con-select``: from each task that passed, the one trajectory the judge found best;
- ``random-select``: from each task that passed, one right trajectory at random;
- ``non-select``: every right trajectory of each task that passed;
- ``non-con``: every trajectory, judged or not (no check at all).

A right trajectory is one the task's judge accepts or, for a task without a verified answer, one of a
group whose answers agree; that agreed answer becomes the task's answer in what is kept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.curate._judge import GROUND_TRUTH, GroupVerdict
from datalyst.tasks import Task, extract_answers


class Strategy(StrEnum):
    CON_SELECT = "con-select"
    RANDOM_SELECT = "random-select"
    NON_SELECT = "non-select"
    NON_CON = "non-con"


class Selected(BaseModel):
    """A trajectory that goes on, how it was chosen, and whether its answer is right."""

    model_config = ConfigDict(frozen=True)

    trajectory: Trajectory
    selected_by: str
    """``ground_truth``, ``consistency`` or, with ``non-con``, ``unfiltered``."""
    correct: bool


class Dropped(BaseModel):
    """A trajectory left out by a stage, and why (``reason`` is stable; ``detail`` is for people)."""

    model_config = ConfigDict(frozen=True)

    id: str
    stage: str
    reason: str
    detail: str = ""


def with_agreed_answer(task: Task, answer: str) -> Task:
    """``task`` with the answer its samples agreed on (``@name[value]`` parts when it has them)."""
    parts = extract_answers(answer)
    if parts:
        return task.model_copy(update={"answer": parts, "judge": "dabench"})
    return task.model_copy(update={"answer": answer, "judge": "rule"})


def select(
    trajectories: Sequence[Trajectory], verdicts: Sequence[GroupVerdict], strategy: Strategy, *, seed: int = 0
) -> tuple[list[Selected], list[Dropped]]:
    """The trajectories ``strategy`` keeps (in input order), and the others with their reason."""
    verdict_of = {tid: verdict for verdict in verdicts for tid in verdict.trajectory_ids}
    chosen = _chosen(verdicts, strategy, seed)
    kept: list[Selected] = []
    dropped: list[Dropped] = []
    for trajectory in trajectories:
        verdict = verdict_of.get(trajectory.id)
        right = verdict is not None and verdict.correct[verdict.trajectory_ids.index(trajectory.id)]
        if verdict is not None and verdict.answer is not None:
            trajectory = trajectory.model_copy(update={"task": with_agreed_answer(trajectory.task, verdict.answer)})
        if strategy == Strategy.NON_CON:
            kept.append(Selected(trajectory=trajectory, selected_by="unfiltered", correct=right))
        elif verdict is None:
            dropped.append(Dropped(id=trajectory.id, stage="select", reason="not_judged"))
        elif not right:
            reason = "wrong_answer" if verdict.method == GROUND_TRUTH else "inconsistent"
            dropped.append(Dropped(id=trajectory.id, stage="select", reason=reason, detail=verdict.critique))
        elif trajectory.id not in chosen:
            dropped.append(Dropped(id=trajectory.id, stage="select", reason="not_chosen", detail=str(strategy)))
        else:
            by = GROUND_TRUTH if verdict.method == GROUND_TRUTH else "consistency"
            kept.append(Selected(trajectory=trajectory, selected_by=by, correct=True))
    return kept, dropped


def _chosen(verdicts: Sequence[GroupVerdict], strategy: Strategy, seed: int) -> set[str]:
    """The ids the strategy keeps among the right trajectories of every passed group."""
    chosen: set[str] = set()
    for verdict in verdicts:
        right = [tid for tid, ok in zip(verdict.trajectory_ids, verdict.correct, strict=True) if ok]
        if not verdict.passed or not right:
            continue
        if strategy == Strategy.CON_SELECT:
            chosen.add(verdict.best or right[0])
        elif strategy == Strategy.RANDOM_SELECT:
            chosen.add(random.Random(f"{seed}:{verdict.id}").choice(right))
        else:
            chosen.update(right)
    return chosen
