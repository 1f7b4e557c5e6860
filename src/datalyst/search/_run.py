"""Search many tasks into a folder of trees (``<task id>#<trial>.json``), resumable, with a progress display.

A tree is saved after every simulation; running again skips finished trees and goes on with unfinished ones.
:func:`tree_trajectory` turns a finished tree into the trajectory an evaluation judges, :func:`answer_paths` into
every answered path, for curation to judge and keep.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from datalyst.agent import Agent, Trajectory, trajectory_id
from datalyst.errors import ConfigError
from datalyst.judge import answers_agree
from datalyst.llm import SamplingParams
from datalyst.progress import progress_bar
from datalyst.search._mcts import COLLECT, INFER, MCTSConfig, decide, mcts
from datalyst.search._tree import Tree
from datalyst.tasks import Task
from datalyst.train import ValueModel


class SearchRun(BaseModel):
    """What ``datalyst search run`` searches, with which agent, and how."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tasks: list[str] = []
    """Task files (JSONL)."""
    model: str | None = None
    """Model spec of the agent."""
    dialect: str = "jupiter"
    """Turn format: datamind, jupiter or datarus."""
    collect: bool = False
    """JUPITER's collection: explore (c_puct 1.25), 50 simulations at temperature 1.0, answers judged."""
    search: MCTSConfig = INFER
    value_model: str | None = None
    """A value model (`train value`) to value states."""
    trials: int = 1
    """Trees per task."""
    limit: int | None = None
    """Only this many tasks of each file, drawn by seed."""
    seed: int = 0
    """Seed of sampling and of the drawn tasks."""
    sampling: SamplingParams = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=768)
    concurrency: int = 1
    """Trees searched at once."""


COLLECTING = {"search.simulations": COLLECT.simulations, "search.c_puct": COLLECT.c_puct, "sampling.temperature": 1.0}
"""What ``SearchRun.collect`` changes where the run does not say otherwise."""


def tree_path(out_dir: Path, task: Task, trial: int) -> Path:
    """Where the tree of ``task``'s ``trial``-th search is saved (the id made safe as a file name)."""
    return out_dir / f"{re.sub(r'[^A-Za-z0-9_.#-]+', '_', trajectory_id(task.id, trial))}.json"


async def search_tasks(
    tasks: Sequence[Task],
    agent: Agent,
    out_dir: str | Path,
    config: MCTSConfig,
    *,
    trials: int = 1,
    judged: bool = False,
    value_model: ValueModel | None = None,
    concurrency: int = 1,
    progress: bool = True,
) -> list[Tree]:
    """Search every task ``trials`` times into ``out_dir``; the trees, in task and trial order.

    ``judged`` values the answers found with each task's own judge (collecting trees for value data; the task
    must have an answer a program checks). A tree saved with other settings is refused."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(task, trial, tree_path(out_dir, task, trial)) for task in tasks for trial in range(trials)]
    saved = {path: _load(path, config) for _, _, path in jobs if path.exists()}
    trees: dict[Path, Tree] = {path: tree for path, tree in saved.items() if tree.finished}
    bar = progress_bar("{task.fields[now]}", enabled=progress)
    overall = bar.add_task("search", total=len(jobs), completed=len(trees), now="")
    gate = asyncio.Semaphore(concurrency)
    with bar:

        async def one(task: Task, trial: int, path: Path) -> None:
            async with gate:
                label = trajectory_id(task.id, trial)

                def saved_now(tree: Tree) -> None:
                    tree.save(path)
                    bar.update(overall, now=f"{label}: {tree.simulations}/{config.simulations}")

                tree = await mcts(agent, task, config, trial=trial, judged=judged, value_model=value_model,
                                  tree=saved.get(path), on_simulation=saved_now)  # fmt: skip
                trees[path] = tree
                bar.update(overall, advance=1)

        await asyncio.gather(*(one(task, trial, path) for task, trial, path in jobs if path not in trees))
    return [trees[path] for _, _, path in jobs]


def tree_trajectory(tree: Tree) -> Trajectory:
    """The trajectory a search answers with: the path to the likeliest node (highest Q) whose answer agrees with
    the vote; without any answer, the path to the highest-valued node. Its duration is the whole search's."""
    decided = decide(tree)
    if decided is None:
        best = max(tree.nodes[1:] or tree.nodes, key=lambda node: node.q)
    else:
        best = max((node for node in tree.candidates() if answers_agree(node.answer or "", decided)),
                   key=lambda node: node.q)  # fmt: skip
    return tree.trajectory(best).model_copy(update={"answer": decided, "duration_s": tree.cost.seconds})


PATHS_PER_TREE = 1000
"""Trial numbers one tree's paths may take: path ``k`` of the tree of trial ``t`` is trial ``t * 1000 + k``."""


def answer_paths(tree: Tree) -> list[Trajectory]:
    """Every path of ``tree`` from the root to a node that answered, each a trajectory of its own: the tree's trial
    ``t`` and the node's id ``k`` make its trial ``t * PATHS_PER_TREE + k``, so the paths of a task's trees never
    share an id, and a resumed import finds the ones it took."""
    if len(tree.nodes) > PATHS_PER_TREE:
        raise ConfigError(f"tree {tree.root.id} has {len(tree.nodes)} nodes; paths are numbered up to {PATHS_PER_TREE}")
    paths = []
    for node in tree.candidates():
        trial = tree.root.trial * PATHS_PER_TREE + node.id
        path = tree.trajectory(node)
        paths.append(path.model_copy(update={"id": trajectory_id(path.task.id, trial), "trial": trial}))
    return paths


def _load(path: Path, config: MCTSConfig) -> Tree:
    tree = Tree.load(path)
    if tree.settings != config.model_dump():
        raise ConfigError(f"{path} was searched with other settings; use another folder to change them")
    return tree
