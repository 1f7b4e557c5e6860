"""How a run answers each task and trial, and what that cost.

- ``react``: one trajectory (``trajectories/<dialect>.jsonl``).
- ``vote``: ``votes`` trajectories (``samples/<dialect>.jsonl``, trial ``t`` made of samples ``t*votes`` to
  ``t*votes + votes - 1``); the trial answers with their majority, along the first sample that gave it.
- ``mcts``: a tree search (``trees/<dialect>/``); the trial answers with the vote of the answers it found.

Either way ``trajectories/<dialect>.jsonl`` holds one trajectory per task and trial, so judging and reports
read every strategy alike; :func:`strategy_costs` adds what each answer cost (model tokens, cells, wall time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path

from datalyst.agent import Agent, Trajectory, read_trajectories, rollout, trajectory_id
from datalyst.eval._config import EvalConfig
from datalyst.eval._metrics import trajectory_cost
from datalyst.files import write_atomic
from datalyst.judge import answers_agree, majority_answer
from datalyst.search import Cost, Tree, search_tasks, tree_path, tree_trajectory
from datalyst.tasks import Task
from datalyst.train import ValueModel


async def run_strategy(
    config: EvalConfig,
    tasks: Sequence[Task],
    agent: Agent,
    results: Path,
    *,
    skip_ids: Collection[str] = (),
    value_model: ValueModel | None = None,
    progress: bool = True,
) -> None:
    """Answer every task ``config.trials`` times with ``config.strategy`` into the trajectories file ``results``
    (``skip_ids``: trajectories finished elsewhere, by another shard)."""
    out_dir, name = results.parent.parent, results.stem
    if config.strategy == "react":
        await rollout(tasks, agent, results, trials=config.trials, concurrency=config.concurrency,
                      skip_ids=skip_ids, progress=progress)  # fmt: skip
        return
    todo = [task for task in tasks if any(trajectory_id(task.id, t) not in skip_ids for t in range(config.trials))]
    if config.strategy == "vote":
        samples = out_dir / "samples" / f"{name}.jsonl"
        await rollout(todo, agent, samples, trials=config.trials * config.votes, concurrency=config.concurrency,
                      progress=progress)  # fmt: skip
        answers = voted(read_trajectories(samples), config.votes)
    else:
        trees = await search_tasks(todo, agent, _trees(out_dir, agent.dialect.name), config.search,
                                   trials=config.trials, value_model=value_model, concurrency=config.concurrency,
                                   progress=progress)  # fmt: skip
        answers = [tree_trajectory(tree) for tree in trees]
    write_atomic(results, "".join(answer.model_dump_json() + "\n" for answer in answers))


def voted(samples: Sequence[Trajectory], votes: int) -> list[Trajectory]:
    """One trajectory per task and trial from its ``votes`` samples: the first sample that gives the majority
    answer, with that answer and the samples' summed time (all failed on our side: the first, to run again)."""
    groups: dict[tuple[str, int], list[Trajectory]] = defaultdict(list)
    for sample in samples:
        groups[sample.task.id, sample.trial // votes].append(sample)
    tasks = list(dict.fromkeys(task_id for task_id, _ in groups))
    answers = []
    for task_id, trial in sorted(groups, key=lambda key: (tasks.index(key[0]), key[1])):
        group = sorted(groups[task_id, trial], key=lambda s: s.trial)
        ran = [sample for sample in group if not sample.failed] or group[:1]
        majority = majority_answer([sample.answer for sample in ran])
        chosen = next((s for s in ran if majority and answers_agree(s.answer or "", majority)), ran[0])
        update = {"id": trajectory_id(task_id, trial), "trial": trial, "answer": majority,
                  "duration_s": sum(sample.duration_s for sample in group)}  # fmt: skip
        answers.append(chosen.model_copy(update=update))
    return answers


Costs = dict[tuple[str, str], Cost]
"""What each answer cost, by (dialect, trajectory id)."""


def strategy_costs(out_dir: Path, config: EvalConfig, trajectories: Sequence[Trajectory]) -> Costs:
    """What the answers of a vote or a search cost beyond their own trajectory (a react answer costs just that)."""
    costs: Costs = {}
    if config.strategy == "mcts":
        for answer in trajectories:
            path = tree_path(_trees(out_dir, answer.dialect), answer.task, answer.trial)
            if path.exists():
                costs[answer.dialect, answer.id] = Tree.load(path).cost
    elif config.strategy == "vote":
        for dialect in config.dialects:
            groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
            for sample in read_trajectories(trajectory_files(out_dir, dialect, "samples")):
                groups[dialect, trajectory_id(sample.task.id, sample.trial // config.votes)].append(sample)
            costs |= {key: trajectory_cost(group) for key, group in groups.items()}
    return costs


def trajectory_files(out_dir: Path, dialect: str, folder: str = "trajectories") -> list[Path]:
    """The files of ``folder`` holding a dialect's trajectories (or a vote's samples): the main one and any shards'."""
    return sorted(p for p in (out_dir / folder).glob(f"{dialect}*.jsonl") if p.name.split(".")[0] == dialect)


def _trees(out_dir: Path, dialect: str) -> Path:
    return out_dir / "trees" / dialect
