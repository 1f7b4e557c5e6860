"""DABench's official protocol in a run: each answer reformatted once by a model and kept in ``reformatted.jsonl``.

A record is kept for a trajectory (dialect and id), the reformatting model's spec and the raw answer it
rewrote; a resumed run or a new report reuses it, and a retried trajectory (a new raw answer) or another
reformat model gets a new one. The file is append-only: the last record for a key wins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.errors import ConfigError
from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.judge import areformat_dabench
from datalyst.llm import ChatModel
from datalyst.tasks import Task

REFORMATTED_FILE = "reformatted.jsonl"
REFORMATTER = "embedded:medium"
"""The one model that reformats every run's answers, whatever the agent's model, as InfiAgent used one fixed
model for every agent under test: the strongest local model (Qwen2.5-Coder-1.5B, far ahead of the 0.5B on
DABench, docs/RESULTS.md). A model reformatting its own answers would make each row's figure depend on the
agent twice (the 0.5B reformatter flipped right answers)."""

Key = tuple[str, str]
"""(dialect, trajectory id)."""


class Reformatted(BaseModel):
    """One line of ``reformatted.jsonl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dialect: str
    trajectory_id: str
    model: str
    """Spec of the model that reformatted."""
    response: str
    """The agent's raw answer."""
    reformatted: str


async def areformat_all(
    model: ChatModel,
    items: Sequence[tuple[Task, str]],
    *,
    concurrency: int = 1,
    on_done: Callable[[int, str], None] | None = None,
) -> list[str]:
    """Each ``(task, response)`` reformatted, in input order, ``concurrency`` at a time; ``on_done(i, text)``
    sees each as it finishes."""
    limit = asyncio.Semaphore(concurrency)

    async def one(index: int, task: Task, response: str) -> str:
        async with limit:
            text = await areformat_dabench(model, task, response)
        if on_done is not None:
            on_done(index, text)
        return text

    return list(await asyncio.gather(*(one(i, task, response) for i, (task, response) in enumerate(items))))


async def areformat_responses(
    records: Sequence[Mapping], tasks: Sequence[Task], model: ChatModel, *, concurrency: int = 1
) -> list[dict]:
    """Copies of DABench ``{"id", "response"}`` records, each non-empty response of a known question reformatted."""
    by_id = {task.id: task for task in tasks}
    chosen = [
        i
        for i, record in enumerate(records)
        if str(record.get("id")) in by_id and isinstance(record.get("response"), str) and record["response"]
    ]
    items = [(by_id[str(records[i]["id"])], records[i]["response"]) for i in chosen]
    texts = await areformat_all(model, items, concurrency=concurrency)
    copies = [dict(record) for record in records]
    for i, text in zip(chosen, texts, strict=True):
        copies[i]["response"] = text
    return copies


def needs_reformat(trajectory: Trajectory) -> bool:
    return trajectory.task.judge == "dabench" and bool(trajectory.answer)


async def areformat_run(
    out_dir: Path,
    trajectories: Sequence[Trajectory],
    spec: str,
    model: ChatModel | None,
    *,
    concurrency: int = 1,
) -> dict[Key, str]:
    """The reformatted answer of every answered DABench trajectory, reformatting those not stored yet.

    ``spec`` names the reformatting model (the run's ``reformat_model``); ``model`` is that model, and
    may be None when every answer is stored already.
    """
    path = out_dir / REFORMATTED_FILE
    stored = {(r.dialect, r.trajectory_id): r for r in _read(path) if r.model == spec}
    found = {
        (t.dialect, t.id): stored[t.dialect, t.id].reformatted
        for t in trajectories
        if needs_reformat(t) and (t.dialect, t.id) in stored and stored[t.dialect, t.id].response == t.answer
    }
    missing = [t for t in trajectories if needs_reformat(t) and (t.dialect, t.id) not in found]
    if not missing:
        return found
    if model is None:
        raise ConfigError(f"{len(missing)} DABench answers in {out_dir} are not reformatted yet; give the model {spec}")
    drop_torn_tail(path)
    with path.open("a", encoding="utf-8") as sink:

        def record(index: int, text: str) -> None:
            trajectory = missing[index]
            found[trajectory.dialect, trajectory.id] = text
            line = Reformatted(
                dialect=trajectory.dialect,
                trajectory_id=trajectory.id,
                model=spec,
                response=trajectory.answer or "",
                reformatted=text,
            )
            sink.write(line.model_dump_json() + "\n")
            sink.flush()

        items = [(t.task, t.answer or "") for t in missing]
        await areformat_all(model, items, concurrency=concurrency, on_done=record)
    return found


def _read(path: Path) -> list[Reformatted]:
    return read_appended(
        path, Reformatted, what="a reformatted answer", fix="remove that line to reformat that answer again"
    )
