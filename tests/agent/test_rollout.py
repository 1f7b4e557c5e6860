"""The rollout engine: many trajectories at once, appended as they finish, resumable, crash-tolerant."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

import pytest

from datalyst.agent import Agent, AgentConfig, Termination, Trajectory, rollout, rollout_groups
from datalyst.errors import IsolationUnavailable
from datalyst.llm import ReplayModel, SamplingParams
from datalyst.sandbox import default_forkserver
from datalyst.tasks import Task

TURNS = [
    "<think>look</think>\n<code>\n```python\nprint(7 * 6)\n```\n</code>",
    "<think>done</think>\n<answer>@value[42]</answer>",
]


def make_tasks(examples_dir, count: int) -> list[Task]:
    return [Task(id=f"t{i}", question=f"Question {i}?", files=[str(examples_dir / "sales.csv")]) for i in range(count)]


def read(path) -> list[Trajectory]:
    return [Trajectory.model_validate_json(line) for line in path.read_text().splitlines()]


def test_rollout_writes_every_trajectory_once_and_resumes(tmp_path, examples_dir):
    out = tmp_path / "rollout.jsonl"
    tasks = make_tasks(examples_dir, 3)
    first = asyncio.run(
        rollout(tasks[:2], Agent(ReplayModel(TURNS, per_turn=True)), out, trials=2, concurrency=3, progress=False)
    )
    assert first.written == 4 and first.skipped == 0
    started = json.loads((tmp_path / "rollout.jsonl.manifest.json").read_text())["started_at"]
    again = asyncio.run(
        rollout(tasks, Agent(ReplayModel(TURNS, per_turn=True)), out, trials=2, concurrency=3, progress=False)
    )
    assert again.written == 2 and again.skipped == 4
    trajectories = read(out)
    assert sorted(t.id for t in trajectories) == ["t0#0", "t0#1", "t1#0", "t1#1", "t2#0", "t2#1"]
    assert all(t.answer == "@value[42]" and t.turns[0].observation == "42" for t in trajectories)
    manifest = json.loads((tmp_path / "rollout.jsonl.manifest.json").read_text())
    assert manifest["model"] == "replay" and manifest["trials"] == 2
    # the manifest keeps when the run first started and records the resume
    assert manifest["started_at"] == started < manifest["resumes"][0]["at"] and len(manifest["resumes"]) == 1


def test_a_broken_task_is_recorded_and_does_not_stop_the_others(tmp_path, examples_dir):
    out = tmp_path / "rollout.jsonl"
    tasks = [*make_tasks(examples_dir, 2), Task(id="broken", question="?", files=[str(tmp_path / "missing.csv")])]
    summary = asyncio.run(rollout(tasks, Agent(ReplayModel(TURNS, per_turn=True)), out, concurrency=2, progress=False))
    by_id = {t.id: t for t in read(out)}
    assert summary.terminations == {Termination.ANSWER: 2, Termination.FAILED: 1}
    assert by_id["broken#0"].termination == Termination.FAILED and "missing.csv" in by_id["broken#0"].error


def test_concurrency_does_not_change_the_results(tmp_path, examples_dir):
    tasks = make_tasks(examples_dir, 6)
    results = {}
    for concurrency in (1, 4):
        out = tmp_path / f"c{concurrency}.jsonl"
        agent = Agent(ReplayModel(TURNS, per_turn=True), AgentConfig(max_turns=3))
        asyncio.run(rollout(tasks, agent, out, concurrency=concurrency, progress=False))
        results[concurrency] = {t.id: (t.answer, [turn.observation for turn in t.turns]) for t in read(out)}
    assert results[1] == results[4]


def test_a_line_torn_by_an_interruption_is_dropped_before_resuming(tmp_path, examples_dir):
    out = tmp_path / "rollout.jsonl"
    tasks = make_tasks(examples_dir, 2)
    asyncio.run(rollout(tasks, Agent(ReplayModel(TURNS, per_turn=True)), out, concurrency=1, progress=False))
    first, second = out.read_text().splitlines()
    out.write_text(first + "\n" + second[:40])  # the second trajectory was cut mid-write
    summary = asyncio.run(rollout(tasks, Agent(ReplayModel(TURNS, per_turn=True)), out, progress=False))
    assert summary.written == 1 and summary.skipped == 1
    assert sorted(t.id for t in read(out)) == ["t0#0", "t1#0"]


def test_seeded_trials_get_their_own_seed_per_turn(examples_dir):
    model = ReplayModel(TURNS, per_turn=True)
    agent = Agent(model, AgentConfig(sampling=SamplingParams(temperature=0.7, seed=5)))
    task = make_tasks(examples_dir, 1)[0]
    for trial in (0, 1):
        asyncio.run(agent.arun(task, trial=trial))
    assert [params.seed for _, params in model.calls] == [5, 6, 5 + 100_003, 5 + 100_004]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def test_cancelling_a_rollout_leaves_no_sandbox_behind(tmp_path, examples_dir):
    """Cancelled mid-flight (some waiting for the model, some running cells), every jail and work folder goes."""
    slow_cell = "<code>\n```python\nimport time\ntime.sleep(0.3)\nprint('slept')\n```\n</code>"
    model = ReplayModel([slow_cell] * 5 + TURNS[1:], per_turn=True, latency_s=0.2)
    server = default_forkserver()
    run_root = server.ensure_run_root()

    async def main():
        running = asyncio.create_task(
            rollout(make_tasks(examples_dir, 8), Agent(model), tmp_path / "out.jsonl", concurrency=8, progress=False)
        )
        await asyncio.sleep(1.5)
        assert [name for name in os.listdir(run_root) if name.startswith("sandbox-")], "sandboxes were running"
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    asyncio.run(main())
    assert [name for name in os.listdir(run_root) if name.startswith("sandbox-")] == []
    assert _descendants(server.pid) == [server.disk_maker_pid]  # the fork server's own helper stays


def test_rollout_groups_yield_each_tasks_trials_together(examples_dir):
    tasks = make_tasks(examples_dir, 3)
    seen = []

    async def main():
        agent = Agent(ReplayModel(TURNS, per_turn=True))
        groups = rollout_groups(tasks, agent, 2, concurrency=3, skip_ids={"t2#0"}, on_trajectory=seen.append)
        return [group async for group in groups]

    groups = asyncio.run(main())
    assert sorted([t.id for t in group] for group in groups) == [["t0#0", "t0#1"], ["t1#0", "t1#1"], ["t2#1"]]
    assert all(t.answer == "@value[42]" for group in groups for t in group) and len(seen) == 5


def test_isolation_refused_ends_the_rollout_even_after_other_workers_ran_out_of_tasks(examples_dir):
    """The refusal is about the machine, so it stops everything, and it must not wait on a finished worker."""

    class RefusingAgent(Agent):
        async def arun(self, task, **kwargs):
            if task.id == "t1":
                await asyncio.sleep(0.3)  # the other worker has finished its task and stopped by now
                raise IsolationUnavailable("no user namespaces here")
            return await super().arun(task, **kwargs)

    async def main():
        groups = rollout_groups(make_tasks(examples_dir, 2), RefusingAgent(ReplayModel(TURNS[1:])), 1, concurrency=2)
        return [group async for group in groups]

    with pytest.raises(IsolationUnavailable, match="no user namespaces"):
        asyncio.run(asyncio.wait_for(main(), timeout=30))
