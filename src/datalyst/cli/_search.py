"""``datalyst search``: JUPITER's tree search over tasks, and value data from the trees it saves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.agent import Agent, AgentConfig, get_dialect
from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._options import config_command, validated
from datalyst.cli._shared import ManagedModel, drawn, model_spec
from datalyst.errors import ConfigError
from datalyst.search import COLLECTING, SearchRun, Tree, decide, search_tasks, value_examples
from datalyst.tasks import read_tasks
from datalyst.train import load_value_model, write_value_examples

search_app = typer.Typer(help="Tree search (MCTS) over tasks, and value data from its trees.", no_args_is_help=True)
app.add_typer(search_app, name="search")
console = Console(stderr=True, highlight=False)


@config_command(
    search_app, "run", SearchRun, arguments=["tasks"], inline=["search", "sampling"],
    skip=["search.max_live"], same={"sampling.seed": "seed"}, convert={"model": model_spec},
    presets={"collect": COLLECTING},
)  # fmt: skip
def run_command(
    config: SearchRun,
    out: Annotated[Path, typer.Option(help="Folder of trees, one per task and trial; running again resumes.")],
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Search every task with MCTS, saving a tree per task and trial; with --collect, for value data."""
    if not config.tasks:
        raise ConfigError("give the task files to search: TASKS... (or tasks in --config)")
    get_dialect(config.dialect)  # an unknown name stops here, in one line
    chosen = [task for path in config.tasks for task in drawn(read_tasks(path), config.limit, config.seed)]
    if config.collect and (unchecked := [task.id for task in chosen if not task.checkable(by_model=True)]):
        raise ConfigError(f"--collect judges answers, but {len(unchecked)} tasks have none (first: {unchecked[0]})")
    agent_config = validated(AgentConfig, dict(dialect=config.dialect, sampling=config.sampling,
                                               require_isolation=not allow_unisolated))  # fmt: skip
    valuer = load_value_model(config.value_model) if config.value_model is not None else None
    search = config.search
    console.print(f"[dim]{len(chosen)} tasks x {config.trials} trees · {config.model} · {config.dialect} · "
                  f"{search.simulations} simulations, c_puct {search.c_puct:g} · trees in {out}[/]")  # fmt: skip

    async def go() -> list[Tree]:
        async with ManagedModel(str(config.model), eager=True) as loaded:
            agent = Agent(loaded, agent_config)
            return await search_tasks(chosen, agent, out, search, trials=config.trials, judged=config.collect,
                                      value_model=valuer, concurrency=config.concurrency)  # fmt: skip

    trees = asyncio.run(go())
    answered = sum(decide(tree) is not None for tree in trees)
    line = f"{len(trees)} trees, {answered} with an answer, {sum(len(tree.nodes) - 1 for tree in trees)} states"
    if config.collect:
        best = [max((node.estimate for node in tree.candidates()), default=-1.0) for tree in trees]
        right, partly = sum(b >= 1 for b in best), sum(0 < b < 1 for b in best)
        line += f"; {right} found a right answer, {partly} only a partly right one"
    console.print(line)


@search_app.command("value-data")
def value_data_command(
    trees: Annotated[Path, typer.Argument(help="A folder of trees from `search run --collect`.", show_default=False)],
    out: Annotated[Path, typer.Option(help="The value data file to write (JSONL), for `train value`.")],
    paths: Annotated[int, typer.Option(help="Won and lost paths kept per tree, each.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the paths drawn.")] = 0,
) -> None:
    """Value the states on a few won and lost paths of every tree by their Q (JUPITER's value data)."""
    files = sorted(trees.glob("*.json"))
    if not files:
        raise ConfigError(f"{trees} holds no trees; make them with: datalyst search run TASKS --collect --out {trees}")
    examples = [example for file in files for example in value_examples(Tree.load(file), paths=paths, seed=seed)]
    write_value_examples(out, examples)
    console.print(f"{len(examples)} states from {len(files)} trees written to {out}")
