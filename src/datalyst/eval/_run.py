"""An evaluation run: the agent on every task x trial x dialect, stored, judged and reported.

A run lives in one folder (``config.json``, ``tasks.jsonl``, ``trajectories/<dialect>.jsonl``,
``reformatted.jsonl`` for DABench's official protocol, ``outcomes.jsonl``, the reports). Running it
again continues where it stopped and re-judges.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from datalyst.agent import Agent, Trajectory, finished_ids, read_trajectories, recorded_calls
from datalyst.errors import ConfigError
from datalyst.eval._benches import load_bench
from datalyst.eval._config import EvalConfig
from datalyst.eval._outcomes import EvalOutcome, ajudge_trajectories
from datalyst.eval._reformat import areformat_run
from datalyst.eval._report import EvalReport, build_report, write_reports
from datalyst.eval._strategies import run_strategy, strategy_costs, trajectory_files
from datalyst.files import write_atomic
from datalyst.jsonl import split_lines
from datalyst.llm import CachedModel, ChatModel
from datalyst.tasks import Task, read_tasks, split_tasks, stratified_subset, write_tasks
from datalyst.train import load_value_model

P = ParamSpec("P")
R = TypeVar("R")

Shard = tuple[int, int]
"""``(i, n)``: the i-th of n interleaved slices of the tasks (``tasks[i::n]``), 0-based."""


def trajectory_path(out_dir: Path, dialect: str, shard: Shard | None = None) -> Path:
    name = dialect if shard is None else f"{dialect}.shard{shard[0]}of{shard[1]}"
    return out_dir / "trajectories" / f"{name}.jsonl"


def read_config(out_dir: str | Path) -> EvalConfig:
    """The settings stored in a run folder's ``config.json`` (one-line error when missing or damaged)."""
    path = Path(out_dir) / "config.json"
    try:
        return EvalConfig.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{out_dir} has no config.json; is it a run folder made by `datalyst eval run`?") from None
    except (OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"{path} is not a run's settings ({reason}); use a new --out or restore the file") from None


def prepare_run(config: EvalConfig, out_dir: str | Path) -> list[Task]:
    """Create or reopen the run folder and return its tasks; refuse a folder made differently."""
    out_dir = Path(out_dir)
    config_path = out_dir / "config.json"
    if config_path.exists():
        stored = read_config(out_dir)
        if changed := stored.changed_settings(config):
            raise ConfigError(
                f"{out_dir} holds a run made with other settings ({', '.join(changed)}); use a new --out to change them"
            )
        if stored != config:
            write_atomic(config_path, config.model_dump_json(indent=2))
        return run_tasks(out_dir)
    tasks = _chosen_tasks(config)  # before anything is written: a bench that cannot be read leaves no folder behind
    out_dir.mkdir(parents=True, exist_ok=True)
    write_tasks(tasks, out_dir / "tasks.jsonl")
    write_atomic(config_path, config.model_dump_json(indent=2))
    return tasks


def run_tasks(out_dir: str | Path) -> list[Task]:
    """The run's tasks, from its ``tasks.jsonl``; chosen from the benchmark by its settings and written there when
    the file is missing (a run folder kept without it, as ``results/eval`` keeps them)."""
    tasks_path = Path(out_dir) / "tasks.jsonl"
    if tasks_path.exists():
        return read_tasks(tasks_path)
    tasks = _chosen_tasks(read_config(out_dir))
    write_tasks(tasks, tasks_path)
    return tasks


def _chosen_tasks(config: EvalConfig) -> list[Task]:
    """The benchmark's tasks that ``config`` runs: its split, its stratified subset, or all of them."""
    tasks = load_bench(config.bench, config.bench_path)
    if config.split is not None:
        return split_tasks(tasks, config.bench, config.split)
    if config.subset is not None:
        return stratified_subset(tasks, config.subset, seed=config.seed, by=config.stratify_by)
    return tasks


async def arun_eval(
    config: EvalConfig,
    out_dir: str | Path,
    model: ChatModel,
    *,
    judge_model: ChatModel | None = None,
    reformat_model: ChatModel | None = None,
    shard: Shard | None = None,
    progress: bool = True,
) -> EvalReport:
    """Run (or finish) every trajectory of the run, then judge and report it.

    ``judge_model`` judges the tasks whose judge is ``llm`` (loaded from ``config.judge_model``);
    ``reformat_model`` reformats DABench answers (loaded from ``config.reformat_model``; when that
    names the agent's own model, ``model`` serves). ``shard=(i, n)`` runs only ``tasks[i::n]``, into
    a file of its own, so several processes or machines can share a run; trajectories finished by
    any shard are never run again, and those whose latest attempt failed are run again.
    """
    out_dir = Path(out_dir)
    tasks = prepare_run(config, out_dir)
    if shard is not None:
        index, count = shard
        if not 0 <= index < count:
            raise ConfigError(f"shard {index}/{count} does not exist; use 0/{count} to {count - 1}/{count}")
        tasks = tasks[index::count]
    value_model = load_value_model(config.value_model) if config.strategy == "mcts" and config.value_model else None
    for dialect in config.dialects:
        path = trajectory_path(out_dir, dialect, shard)
        elsewhere = finished_ids(other for other in trajectory_files(out_dir, dialect) if other != path)
        agent = Agent(model, config.agent.model_copy(update={"dialect": dialect}))
        await run_strategy(config, tasks, agent, path, skip_ids=elsewhere, value_model=value_model, progress=progress)
    if reformat_model is None and config.reformat_model == config.model:
        reformat_model = model
    return await ascore_run(out_dir, judge_model=judge_model, reformat_model=reformat_model)


async def ascore_run(
    out_dir: str | Path, *, judge_model: ChatModel | None = None, reformat_model: ChatModel | None = None
) -> EvalReport:
    """Judge the run's trajectories (the latest attempt of each, written so far) and write its reports.

    With ``config.reformat_model`` set, DABench answers are judged raw and reformatted; ``reformat_model``
    (that model) reformats those not reformatted before and may be None when there are none.
    """
    out_dir = Path(out_dir)
    config = read_config(out_dir)
    trajectories = run_trajectories(out_dir, config)
    reformatted = None
    if config.reformat_model is not None:
        reformatted = await areformat_run(
            out_dir, trajectories, config.reformat_model, reformat_model, concurrency=config.concurrency
        )
    outcomes = await ajudge_trajectories(
        trajectories,
        judge_model=judge_model,
        reformatted=reformatted,
        require_isolation=config.agent.require_isolation,
    )
    write_atomic(out_dir / "outcomes.jsonl", "".join(v.model_dump_json() + "\n" for v in outcomes))
    costs = strategy_costs(out_dir, config, trajectories)
    report = build_report(config, run_tasks(out_dir), trajectories, outcomes, costs, reformatted)
    write_reports(report, trajectories, outcomes, out_dir)
    return report


def _blocking(coroutine_function: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """``coroutine_function`` as a function that blocks: one event loop for the whole call (not in a running one)."""

    @functools.wraps(coroutine_function)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        return asyncio.run(coroutine_function(*args, **kwargs))

    blocking.__name__ = blocking.__qualname__ = coroutine_function.__name__.removeprefix("a")
    blocking.__doc__ = f"Blocking :func:`{coroutine_function.__name__}`, with the same arguments."
    return blocking


run_eval = _blocking(arun_eval)
score_run = _blocking(ascore_run)


def run_trajectories(out_dir: Path, config: EvalConfig) -> list[Trajectory]:
    """The latest attempt of every trajectory of the run, dialect by dialect (shards included)."""
    return [t for dialect in config.dialects for t in read_trajectories(trajectory_files(out_dir, dialect))]


def cache_run(out_dir: str | Path, cache: CachedModel) -> int:
    """Put the model calls that wrote the run's trajectories into ``cache`` (its model's), so a later run that
    repeats a trajectory's start reads it from there; returns how many calls were new to it."""
    out_dir = Path(out_dir)
    config = read_config(out_dir)
    if config.model != cache.spec:
        raise ConfigError(f"{out_dir} was run with {config.model}, not {cache.spec}; cache it under its own model")
    calls = [call for t in run_trajectories(out_dir, config) if not t.failed for call in recorded_calls(t)]
    return sum(cache.store(messages, params, [completion], replace=False) for messages, params, completion in calls)


def read_outcomes(out_dir: str | Path) -> list[EvalOutcome]:
    path = Path(out_dir) / "outcomes.jsonl"
    if not path.exists() and (path.parent / "verdicts.jsonl").exists():
        raise ConfigError(
            f"{out_dir} was judged by an older datalyst; `datalyst eval report {out_dir}` judges it again"
        )
    if not path.exists():
        raise ConfigError(f"{out_dir} has no outcomes.jsonl; is it a run folder made by `datalyst eval run`?")
    lines = split_lines(path.read_text(encoding="utf-8"))
    return [EvalOutcome.model_validate_json(line) for line in lines if line.strip()]


def dialects_of(outcomes: Sequence[EvalOutcome]) -> list[str]:
    return list(dict.fromkeys(v.dialect for v in outcomes))
