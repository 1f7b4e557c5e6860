"""Hand-made trajectories for curation tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from datalyst.agent import ActionKind, Termination, Trajectory, Turn
from datalyst.llm import SamplingParams
from datalyst.tasks import Task


def _answered(
    task: Task, trial: int, answer: str | None, *, thought: str = "Done.", dialect: str = "datamind"
) -> Trajectory:
    """A one-turn trajectory of ``task`` ending with ``answer`` (None: it ran out of turns without one)."""
    turns = []
    if answer is not None:
        text = f"<think>{thought}</think>\n<answer>{answer}</answer>"
        turns.append(Turn(index=0, raw=text, text=text, thought=thought, kind=ActionKind.ANSWER, answer=answer))
    return Trajectory(
        id=f"{task.id}#{trial}",
        task=task,
        trial=trial,
        dialect=dialect,
        model="replay",
        sampling=SamplingParams(),
        system_prompt="system",
        first_message=f"Question: {task.question}",
        turns=turns,
        answer=answer,
        termination=Termination.ANSWER if answer is not None else Termination.MAX_TURNS,
        started_at=datetime.now(UTC),
    )


@pytest.fixture
def answered() -> Callable[..., Trajectory]:
    """``answered(task, trial, answer, thought=..., dialect=...)``: a one-turn trajectory ending with ``answer``."""
    return _answered
