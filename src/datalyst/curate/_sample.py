"""``curate sample``: N trajectories per task, with the category's workflow in the prompt (DataMind's sampling)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from datalyst.agent import Agent, RolloutSummary, Trajectory, rollout
from datalyst.curate._guidance import Guide
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.llm import ChatModel
from datalyst.tasks import Task


def round_of(trajectory: Trajectory, n: int | None) -> int:
    """Which round made a trajectory: 0 for the first N samples, k for the k-th reflection (always 0 without N)."""
    return trajectory.trial // n if n else 0


def sampling_agent(model: ChatModel, config: RunConfig, reflections: Mapping[str, str] | None = None) -> Agent:
    """The agent of a run, guided by its workflows and by the reflection feedback of each task, if any."""
    guide = Guide(knowledge=config.knowledge, workflows=config.workflows, reflections=reflections)
    return Agent(model, config.agent, guidance=guide)


async def sample(
    tasks: Sequence[Task],
    model: ChatModel,
    run: RunFolder,
    config: RunConfig,
    *,
    concurrency: int = 4,
    progress: bool = True,
) -> RolloutSummary:
    """Append ``config.n`` trajectories of every task to ``run.samples``; a rerun resumes where it stopped."""
    agent = sampling_agent(model, run.start(config))
    return await rollout(tasks, agent, run.samples, trials=config.n, concurrency=concurrency, progress=progress)
