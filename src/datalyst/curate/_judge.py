"""``curate judge``: which trajectories reached a right answer, and a second chance for tasks none did.

Each task's trajectories of one round form a group, judged once into ``verdicts.jsonl``:

- a task with a gold answer (``Task.checkable``) has each trajectory's :class:`~datalyst.agent.Outcome` judged
  and kept in the verdict: the ground-truth filter. The group passes when one answer is right.
- a task without one goes to a consistency judge: the group passes when all its answers agree, and
  the agreed answer becomes the task's answer.

A group that fails is sampled again with the judge's critique and the failed answers in the prompt
(DataMind's reflection), for up to ``rounds`` rounds, and the new group is judged the same way.
Verdicts record which trajectories passed and which the judge thinks best; which of them are kept is
decided later, by the selection strategy of ``curate filter``.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from datalyst.agent import ActionKind, Outcome, Trajectory, ajudge_trajectory, rollout, trajectory_id
from datalyst.curate._consistency import Attempt, ConsistencyJudge
from datalyst.curate._guidance import reflection_text
from datalyst.curate._run import RunConfig, RunFolder
from datalyst.curate._sample import round_of, sampling_agent
from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.llm import ChatModel
from datalyst.provenance import write_manifest
from datalyst.tasks import Task

GROUND_TRUTH = "ground_truth"


class GroupVerdict(BaseModel):
    """The judgement of one task's trajectories of one round."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """``<task id>@<round>``."""
    task_id: str
    round: int
    method: str
    """``ground_truth``, or the consistency judge's name (``rule``, ``llm:<spec>``)."""
    trajectory_ids: list[str]
    correct: list[bool]
    """Per trajectory: right by the task's judge, or part of an agreement."""
    passed: bool
    best: str | None = None
    """The trajectory that states the answer best: the judge's choice, or the most concise right one."""
    answer: str | None = None
    """The agreed answer, for a task without a gold one."""
    critique: str = ""
    outcomes: list[Outcome] = []
    """Per trajectory, for a task with a gold answer: its outcome (``correct`` is theirs)."""


class JudgeSummary(BaseModel):
    """What judging found, by round (round 0 is the first sampling, the others reflections)."""

    groups: int
    passed_by_round: dict[int, int]
    failed_by_round: dict[int, int]
    by_method: dict[str, dict[str, int]]
    """Method -> {"passed": tasks passed in some round, "tasks": tasks judged}."""
    rescued: int
    """Tasks that failed round 0 and passed a reflection round."""
    incomplete: int
    """Groups left out because some of their trajectories are missing (a sampling run cut short)."""


def attempt(trajectory: Trajectory) -> Attempt:
    """What a consistency judge reads of a trajectory."""
    last = trajectory.turns[-1] if trajectory.turns else None
    reasoning = last.thought if last is not None and last.kind == ActionKind.ANSWER else ""
    return Attempt(
        answer=trajectory.answer, reasoning=reasoning, length=sum(len(turn.text) for turn in trajectory.turns)
    )


async def judge_group(
    trajectories: Sequence[Trajectory],
    round: int,
    consistency: ConsistencyJudge,
    *,
    judge_model: ChatModel | None = None,
) -> GroupVerdict:
    """The verdict on one task's trajectories of one round (``judge_model`` grades tasks judged by a model)."""
    task = trajectories[0].task
    ids = [trajectory.id for trajectory in trajectories]
    attempts = [attempt(trajectory) for trajectory in trajectories]
    common = {"id": f"{task.id}@{round}", "task_id": task.id, "round": round, "trajectory_ids": ids}
    if task.checkable(by_model=True):
        outcomes = [await ajudge_trajectory(trajectory, judge_model=judge_model) for trajectory in trajectories]
        right = [i for i, outcome in enumerate(outcomes) if outcome.correct]
        best = min(right, key=lambda i: attempts[i].length) if right else None
        notes = [f"attempt {i + 1}: {o.detail}" for i, o in enumerate(outcomes) if o.detail and task.judge == "dabench"]
        critique = f"{len(right)} of {len(ids)} answers are right" + (f" ({'; '.join(notes)})" if notes else "") + "."
        best_id = ids[best] if best is not None else None
        correct = [outcome.correct for outcome in outcomes]
        return GroupVerdict(**common, method=GROUND_TRUTH, correct=correct, passed=bool(right), best=best_id,
                            critique=critique, outcomes=outcomes)  # fmt: skip
    agreement = await consistency.acheck(task.question, attempts)
    best = agreement.best if agreement.agree else None
    return GroupVerdict(
        **common,
        method=consistency.name,
        correct=[agreement.agree] * len(ids),
        passed=agreement.agree,
        best=ids[best] if best is not None else None,
        answer=attempts[best].answer if best is not None else None,
        critique=agreement.critique,
    )


def read_group_verdicts(run: RunFolder) -> list[GroupVerdict]:
    return read_appended(
        run.verdicts, GroupVerdict, what="a group verdict", fix="restore the file or move the line out"
    )


def tasks_in_band(run: RunFolder, low: float, high: float) -> list[Task]:
    """The verified tasks whose first-round trajectories were right at a rate within [``low``, ``high``]: those the
    sampling model solves sometimes, whose groups disagree (the tasks RL learns from)."""
    tasks = {trajectory.task.id: trajectory.task for trajectory in run.trajectories()}
    return [tasks[verdict.task_id] for verdict in read_group_verdicts(run)
            if verdict.round == 0 and verdict.method == "ground_truth" and verdict.correct
            and low <= sum(verdict.correct) / len(verdict.correct) <= high]  # fmt: skip


async def judge_run(
    run: RunFolder,
    consistency: ConsistencyJudge,
    *,
    rounds: int = 1,
    model: ChatModel | None = None,
    judge_model: ChatModel | None = None,
    concurrency: int = 4,
    progress: bool = True,
) -> JudgeSummary:
    """Judge every complete group of the run; with ``model``, reflect up to ``rounds`` times on groups that fail.
    ``judge_model`` grades the verified tasks whose judge is a model (``Task.judge == "llm"``).

    Resumable: groups already in ``verdicts.jsonl`` are not judged again, and reflection rollouts skip
    the trajectories they wrote before.
    """
    config = run.config()
    drop_torn_tail(run.verdicts)
    done = {verdict.id: verdict for verdict in read_group_verdicts(run)}
    gate = asyncio.Semaphore(concurrency)

    async def one(group: list[Trajectory], round: int) -> GroupVerdict:
        async with gate:
            return await judge_group(group, round, consistency, judge_model=judge_model)

    trajectories = run.trajectories()
    for current in range(rounds + 1):
        groups, _ = _groups(trajectories, config.n, current)
        todo = [group for group in groups if f"{group[0].task.id}@{current}" not in done]
        with run.verdicts.open("a", encoding="utf-8") as sink:
            for finished in asyncio.as_completed([one(group, current) for group in todo]):
                verdict = await finished
                sink.write(verdict.model_dump_json() + "\n")
                sink.flush()
                done[verdict.id] = verdict
        failed = [group for group in groups if not done[f"{group[0].task.id}@{current}"].passed]
        if current == rounds or model is None or config.n is None or not failed:
            break  # a run without N (search paths) has no round to sample again
        await _reflect(run, config, model, failed, done, current, concurrency=concurrency, progress=progress)
        trajectories = run.trajectories()  # with the reflections just written
    summary = _summary(list(done.values()), trajectories, config.n)
    write_manifest(run.verdicts, judge=consistency.name, rounds=rounds, reflect_model=model and model.spec,
                   summary=summary.model_dump())  # fmt: skip
    return summary


async def _reflect(
    run: RunFolder,
    config: RunConfig,
    model: ChatModel,
    failed: list[list[Trajectory]],
    verdicts: dict[str, GroupVerdict],
    round: int,
    *,
    concurrency: int,
    progress: bool,
) -> None:
    """Sample round ``round + 1`` of the failed tasks with their critique in the prompt."""
    reflections = {
        group[0].task.id: reflection_text([t.answer for t in group], verdicts[f"{group[0].task.id}@{round}"].critique)
        for group in failed
    }
    tasks = [group[0].task for group in failed]
    earlier = {trajectory_id(task.id, trial) for task in tasks for trial in range((round + 1) * config.n)}
    agent = sampling_agent(model, config, reflections)
    trials = (round + 2) * config.n
    await rollout(
        tasks, agent, run.samples, trials=trials, skip_ids=earlier, concurrency=concurrency, progress=progress
    )


def _groups(trajectories: Sequence[Trajectory], n: int | None, round: int) -> tuple[list[list[Trajectory]], int]:
    """The complete groups of ``round`` (all ``n`` trajectories there; any number without ``n``), and how many are
    incomplete."""
    by_task: defaultdict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        if round_of(trajectory, n) == round:
            by_task[trajectory.task.id].append(trajectory)
    complete = [sorted(group, key=lambda t: t.trial) for group in by_task.values() if n is None or len(group) == n]
    return complete, len(by_task) - len(complete)


def _summary(verdicts: list[GroupVerdict], trajectories: list[Trajectory], n: int | None) -> JudgeSummary:
    passed, failed = Counter[int](), Counter[int]()
    outcome: dict[str, bool] = {}
    method: dict[str, str] = {}
    first: dict[str, bool] = {}
    for verdict in sorted(verdicts, key=lambda v: v.round):
        (passed if verdict.passed else failed)[verdict.round] += 1
        outcome[verdict.task_id] = outcome.get(verdict.task_id, False) or verdict.passed
        method.setdefault(verdict.task_id, verdict.method)
        if verdict.round == 0:
            first[verdict.task_id] = verdict.passed
    by_method: dict[str, dict[str, int]] = {}
    for task_id, name in method.items():
        entry = by_method.setdefault(name, {"passed": 0, "tasks": 0})
        entry["tasks"] += 1
        entry["passed"] += outcome[task_id]
    incomplete = sum(_groups(trajectories, n, round)[1] for round in {round_of(t, n) for t in trajectories})
    return JudgeSummary(
        groups=len(verdicts),
        passed_by_round=dict(sorted(passed.items())),
        failed_by_round=dict(sorted(failed.items())),
        by_method=dict(sorted(by_method.items())),
        rescued=sum(outcome[task] and not passed_first for task, passed_first in first.items()),
        incomplete=incomplete,
    )
