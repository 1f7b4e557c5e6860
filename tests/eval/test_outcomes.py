"""Each task's judge scores the agent's final answer; trajectories without an answer score 0."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from datalyst.agent import Termination, Trajectory
from datalyst.errors import ConfigError
from datalyst.eval import ajudge_trajectories
from datalyst.llm import ReplayModel, SamplingParams
from datalyst.tasks import Task


def trajectory(task: Task, answer: str | None, trial: int = 0) -> Trajectory:
    return Trajectory(
        id=f"{task.id}#{trial}",
        task=task,
        trial=trial,
        dialect="datamind",
        model="replay",
        sampling=SamplingParams(),
        system_prompt="",
        first_message="",
        answer=answer,
        termination=Termination.ANSWER if answer else Termination.MAX_TURNS,
        started_at=datetime.now(UTC),
    )


def test_answers_are_judged_by_their_tasks_judge():
    dabench = Task(id="6", question="?", judge="dabench", answer={"a": "1.50", "c": "3"})
    causal = Task(id="c", question="?", judge="tablebench", answer="red blue", subcategory="CausalAnalysis")
    verdicts = asyncio.run(
        ajudge_trajectories([trajectory(dabench, "@a[1.5] @c[4]"), trajectory(causal, "red green blue", trial=1)])
    )
    assert [(v.task_id, v.trial, v.score, v.correct, v.detail) for v in verdicts] == [
        ("6", 0, 0.0, False, "wrong: c"),
        ("c", 1, pytest.approx(0.8), False, None),
    ]


def test_unanswered_trajectories_score_zero_with_the_reason():
    task = Task(id="r", question="?", answer=1)
    [verdict] = asyncio.run(ajudge_trajectories([trajectory(task, None)]))
    assert not verdict.answered and verdict.score == 0.0 and verdict.detail == "no answer (max_turns)"


def test_model_judged_tasks_ask_the_judge_model():
    task = Task(id="m", question="Which region sells most?", judge="llm", answer="West")
    judge = ReplayModel(["<thought>Same region.</thought><score>1</score>"])
    [verdict] = asyncio.run(ajudge_trajectories([trajectory(task, "The West region")], judge_model=judge))
    assert verdict.correct and verdict.detail == "Same region."
    with pytest.raises(ConfigError, match="judge model"):
        asyncio.run(ajudge_trajectories([trajectory(task, "West")]))
