"""Rollout groups for RL: the agent solves each task G times with the current policy, and each run is scored.

A :class:`Scored` run keeps what the rewards read (its :class:`~datalyst.agent.Outcome`: right or not, well
formed or not; and how many tokens the agent wrote) apart from the reward itself, which ``_rewards`` computes.
``collect`` keeps drawing tasks until the step has the groups it needs: DAPO's dynamic sampling drops groups
whose runs are all right or all wrong, so it rolls out more tasks (up to ``max_tasks``) to keep the batch full.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from datalyst.agent import Agent, Outcome, Trajectory, ajudge_trajectory, rollout_groups
from datalyst.tasks import Task


class Scored(BaseModel):
    """One run and what its reward depends on."""

    trajectory: Trajectory
    outcome: Outcome

    @property
    def correct(self) -> bool:
        return self.outcome.correct

    @property
    def well_formed(self) -> bool:
        """DataMind's ``r_format``: an answer in the task's format, every turn parsed, no void turn."""
        return self.outcome.well_formed

    @property
    def length(self) -> int:
        """Tokens the agent wrote over all its turns (environment output excluded)."""
        return self.trajectory.agent_tokens

    @property
    def void(self) -> bool:
        """A run with a void turn is left out of the loss (DataMind)."""
        return self.trajectory.n_void_turns > 0


class Collected(BaseModel):
    """The groups of one step, and how many tasks it took to find them."""

    groups: list[list[Scored]]
    tasks_drawn: int
    dropped: int
    """Groups rolled out but not kept because their runs all agreed (only with dynamic sampling)."""


async def score(trajectory: Trajectory) -> Scored:
    """``trajectory`` with its outcome."""
    return Scored(trajectory=trajectory, outcome=await ajudge_trajectory(trajectory))


def informative(group: Sequence[Scored]) -> bool:
    """Some runs right and some wrong: DataMind's ``0 < #correct < G``."""
    return len({run.correct for run in group}) > 1


async def collect(
    tasks: Sequence[Task], agent: Agent, *, group_size: int, wanted: int, dynamic: bool, concurrency: int
) -> Collected:
    """``wanted`` groups of ``group_size`` scored runs of ``tasks``, taken in order.

    Without ``dynamic`` the first ``wanted`` tasks make the groups. With it, a group whose runs all agree is
    dropped and the next tasks are rolled out, ``wanted`` minus the kept ones at a time, until ``wanted``
    groups are kept or ``tasks`` run out; the dropped groups are returned too, after the kept ones, as
    DataMind's mixed loss still trains on their tasks' expert trajectories.
    """
    kept: list[list[Scored]] = []
    dropped: list[list[Scored]] = []
    cursor = 0
    while len(kept) < wanted and cursor < len(tasks):
        chunk = tasks[cursor : cursor + wanted - len(kept)]
        cursor += len(chunk)
        async for group in rollout_groups(chunk, agent, group_size, concurrency=concurrency):
            scored = [await score(trajectory) for trajectory in group]
            (kept if informative(scored) or not dynamic else dropped).append(scored)
    return Collected(groups=kept + dropped, tasks_drawn=cursor, dropped=len(dropped))
