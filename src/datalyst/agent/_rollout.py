"""Many trajectories at once: in memory, grouped per task (for RL), or appended to a JSONL file (resumable).

Generation and execution overlap: while some trajectories wait for the model, others run cells.
A failure on our side (model server, sandbox) becomes a FAILED trajectory instead of stopping the
others; a resumed file rollout runs those again. Cancelling a rollout closes every sandbox first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from pathlib import Path

from pydantic import BaseModel

from datalyst.agent._agent import Agent
from datalyst.agent._store import finished_ids
from datalyst.agent._trajectory import Termination, Trajectory, trajectory_id
from datalyst.errors import IsolationUnavailable
from datalyst.jsonl import drop_torn_tail
from datalyst.progress import progress_bar
from datalyst.provenance import write_manifest
from datalyst.tasks import Task

log = logging.getLogger(__name__)


class RolloutSummary(BaseModel):
    """What a rollout did."""

    written: int
    skipped: int
    """Trajectories not run because they were finished already (by an earlier run, or elsewhere)."""
    terminations: dict[str, int]
    duration_s: float


async def rollout_groups(
    tasks: Sequence[Task],
    agent: Agent,
    trials: int,
    *,
    concurrency: int = 8,
    skip_ids: Collection[str] = (),
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> AsyncIterator[list[Trajectory]]:
    """Run every task ``trials`` times, at most ``concurrency`` at once; yield each task's trajectories
    (in trial order) as soon as all of them have finished.

    Trials whose ids (``<task id>#<trial>``) are in ``skip_ids`` are not run, so a group holds only the
    others (a task with none left yields nothing). ``on_trajectory`` sees every trajectory as it finishes.
    """
    jobs = [(task, trial) for task in tasks for trial in range(trials) if trajectory_id(task.id, trial) not in skip_ids]
    expected = Counter(task.id for task, _ in jobs)
    queue: asyncio.Queue[tuple[Task, int]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    groups: asyncio.Queue[list[Trajectory]] = asyncio.Queue()
    pending: defaultdict[str, list[Trajectory]] = defaultdict(list)

    async def worker() -> None:
        while not queue.empty():
            task, trial = queue.get_nowait()
            trajectory = await _run_one(agent, task, trial)
            if on_trajectory is not None:
                on_trajectory(trajectory)
            pending[task.id].append(trajectory)
            if len(pending[task.id]) == expected[task.id]:
                groups.put_nowait(sorted(pending.pop(task.id), key=lambda t: t.trial))

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(jobs)))]
    try:
        for _ in expected:
            yield await _next_group(groups, workers)
    finally:
        for running in workers:
            running.cancel()
        await asyncio.gather(*workers, return_exceptions=True)  # each cancelled trajectory closes its sandbox


async def _next_group(groups: asyncio.Queue[list[Trajectory]], workers: list[asyncio.Task[None]]) -> list[Trajectory]:
    """The next finished group; a worker that died of a bug (not a trajectory failure) raises here."""
    getter = asyncio.ensure_future(groups.get())
    running = list(workers)
    try:
        while True:
            await asyncio.wait([getter, *running], return_when=asyncio.FIRST_COMPLETED)
            for worker in running:
                if worker.done() and not worker.cancelled() and worker.exception() is not None:
                    raise worker.exception()  # type: ignore[misc]
            if getter.done():
                return getter.result()
            running = [worker for worker in running if not worker.done()]  # one ran out of jobs: keep watching the rest
    finally:
        getter.cancel()


async def rollout(
    tasks: Sequence[Task],
    agent: Agent,
    out_path: str | Path,
    *,
    trials: int = 1,
    concurrency: int = 8,
    skip_ids: Collection[str] = (),
    progress: bool = True,
) -> RolloutSummary:
    """Run ``agent`` on every task ``trials`` times into ``out_path``, each trajectory appended as it finishes.

    Trajectories finished in ``out_path`` already, or named in ``skip_ids`` (finished elsewhere), are
    skipped; failed ones are run again (the failed attempt stays in the file; readers take the latest).
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(out_path)
    done = finished_ids(out_path) | set(skip_ids)
    todo = sum(trajectory_id(task.id, trial) not in done for task in tasks for trial in range(trials))
    write_manifest(
        out_path,
        resumed=bool(done),
        model=agent.model.spec,
        agent=agent.config.model_dump(mode="json"),
        trials=trials,
        concurrency=concurrency,
    )
    counts: Counter[str] = Counter()
    started = time.monotonic()
    bar = progress_bar("{task.fields[rate]}", eta=True, enabled=progress)
    bar_task = bar.add_task("rollout", total=todo, rate="")
    with bar, out_path.open("a", encoding="utf-8") as sink:

        def record(trajectory: Trajectory) -> None:
            sink.write(trajectory.model_dump_json() + "\n")
            sink.flush()
            counts[trajectory.termination] += 1
            rate = sum(counts.values()) / (time.monotonic() - started)
            bar.update(bar_task, advance=1, rate=f"{rate:.2f} traj/s")

        groups = rollout_groups(tasks, agent, trials, concurrency=concurrency, skip_ids=done, on_trajectory=record)
        async for _ in groups:
            pass
    return RolloutSummary(
        written=sum(counts.values()),
        skipped=len(tasks) * trials - todo,
        terminations=dict(counts),
        duration_s=time.monotonic() - started,
    )


async def _run_one(agent: Agent, task: Task, trial: int) -> Trajectory:
    """One trajectory; any failure of ours becomes a FAILED trajectory instead of stopping the others."""
    try:
        return await agent.arun(task, trial=trial)
    except IsolationUnavailable:
        raise  # a fact about this machine, not this task: every trajectory would fail the same way
    except Exception as exc:  # recorded, never raised: one broken task must not end the rollout
        log.warning("trajectory %s#%d failed: %s", task.id, trial, exc)
        return agent.new_trajectory(
            task,
            trial,
            system_prompt="",
            first_message="",
            termination=Termination.FAILED,
            error=f"{type(exc).__name__}: {exc}",
        )
