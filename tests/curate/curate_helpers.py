"""Building trajectories by hand for curation tests (imported by the test modules of this folder)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from datalyst.agent import ActionKind, Termination, Trajectory, Turn
from datalyst.llm import SamplingParams
from datalyst.tasks import Task


def trajectory_of(
    turns: Sequence[Turn],
    task: Task,
    *,
    trial: int = 0,
    dialect: str = "datamind",
    termination: Termination | None = None,
    first_message: str | None = None,
) -> Trajectory:
    """A trajectory of ``task`` made of ``turns``; it answers with its last turn when that is an answer."""
    last = turns[-1] if turns else None
    answer = last.answer if last is not None and last.kind == ActionKind.ANSWER else None
    return Trajectory(
        id=f"{task.id}#{trial}",
        task=task,
        trial=trial,
        dialect=dialect,
        model="replay",
        sampling=SamplingParams(),
        system_prompt="system",
        first_message=first_message or f"Question: {task.question}",
        turns=list(turns),
        answer=answer,
        termination=termination or (Termination.ANSWER if answer is not None else Termination.MAX_TURNS),
        started_at=datetime.now(UTC),
    )
