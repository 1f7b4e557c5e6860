"""Run many tasks x samples concurrently, appending each trajectory to a JSONL file as it finishes.

Generation and execution overlap: while some trajectories wait for the model, others run cells.
A re-run skips the ids already in the file, so an interrupted rollout resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from datalyst import __version__
from datalyst.agent._loop import Agent
from datalyst.agent._trajectory import Termination, Trajectory
from datalyst.files import write_atomic
from datalyst.provenance import git_revision
from datalyst.tasks import Task

log = logging.getLogger(__name__)


class RolloutSummary(BaseModel):
    """What a rollout did."""

    written: int
    skipped: int
    """Trajectories not run because they were finished already (by an earlier run, or elsewhere)."""
    terminations: dict[str, int]
    duration_s: float

    @property
    def per_second(self) -> float:
        return self.written / self.duration_s if self.duration_s else 0.0


def finished_ids(path: Path) -> set[str]:
    """Ids of the trajectories already written (a torn last line is ignored)."""
    ids: set[str] = set()
    if path.exists():
        with path.open() as f:
            for line in f:
                try:
                    ids.add(json.loads(line)["id"])
                except (ValueError, KeyError, TypeError):
                    continue
    return ids


async def rollout(
    tasks: Sequence[Task],
    agent: Agent,
    out_path: str | Path,
    *,
    n_samples: int = 1,
    concurrency: int = 8,
    skip_ids: Collection[str] = (),
    progress: bool = True,
) -> RolloutSummary:
    """Run ``agent`` on every task ``n_samples`` times, at most ``concurrency`` at once.

    Trajectories already in ``out_path``, or named in ``skip_ids`` (finished elsewhere), are skipped.
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    _drop_torn_tail(out_path)
    done = finished_ids(out_path) | set(skip_ids)
    jobs = [(task, s) for task in tasks for s in range(n_samples) if f"{task.id}#{s}" not in done]
    _write_manifest(out_path, agent, n_samples=n_samples, concurrency=concurrency)
    queue: asyncio.Queue[tuple[Task, int] | None] = asyncio.Queue(maxsize=2 * concurrency)
    counts: Counter[str] = Counter()
    started = time.monotonic()
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="datalyst-rollout")
    bar = _progress(progress)
    bar_task = bar.add_task("rollout", total=len(jobs), rate="")
    with bar, out_path.open("a") as sink:

        async def worker() -> None:
            while (job := await queue.get()) is not None:
                trajectory = await _run_one(agent, *job, executor)
                sink.write(trajectory.model_dump_json() + "\n")
                sink.flush()
                counts[trajectory.termination] += 1
                done_count = sum(counts.values())
                bar.update(bar_task, advance=1, rate=f"{done_count / (time.monotonic() - started):.2f} traj/s")

        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        try:
            for job in jobs:
                await queue.put(job)
            for _ in workers:
                await queue.put(None)
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            executor.shutdown(wait=False, cancel_futures=True)
    return RolloutSummary(
        written=sum(counts.values()),
        skipped=len(tasks) * n_samples - len(jobs),
        terminations=dict(counts),
        duration_s=time.monotonic() - started,
    )


async def _run_one(agent: Agent, task: Task, sample: int, executor: ThreadPoolExecutor) -> Trajectory:
    """One trajectory; any failure of ours becomes a FAILED trajectory instead of stopping the others."""
    try:
        return await agent.arun(task, sample=sample, executor=executor)
    except Exception as exc:  # recorded, never raised: one broken task must not end the rollout
        log.warning("trajectory %s#%d failed: %s", task.id, sample, exc)
        return Trajectory(
            id=f"{task.id}#{sample}",
            task=task,
            sample=sample,
            dialect=agent.dialect.name,
            model=agent.model.spec,
            sampling=agent.config.sampling,
            system_prompt="",
            first_message="",
            termination=Termination.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            started_at=datetime.now(UTC),
            datalyst_version=__version__,
        )


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left half-written by an interrupted run, so new lines do not join it."""
    if not path.exists():
        return
    with path.open("rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[rate]}"),
        console=Console(stderr=True),  # stdout stays free for results
        disable=not enabled,
    )


def _write_manifest(out_path: Path, agent: Agent, **settings: int) -> None:
    """Record how the rollout was made beside its output (config, versions, git revision)."""
    manifest = {
        "datalyst_version": __version__,
        "git_revision": git_revision(),
        "model": agent.model.spec,
        "agent": agent.config.model_dump(mode="json"),
        "started_at": datetime.now(UTC).isoformat(),
        **settings,
    }
    manifest_path = out_path.with_name(out_path.name + ".manifest.json")
    write_atomic(manifest_path, json.dumps(manifest, indent=2))
