"""``datalyst search``: JUPITER's tree search over tasks, and value data from the trees it saves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.agent import DIALECTS, Agent, AgentConfig, get_dialect
from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._options import validated
from datalyst.cli._shared import ManagedModel, drawn
from datalyst.errors import ConfigError
from datalyst.llm import SamplingParams, resolve_spec
from datalyst.search import COLLECT, INFER, MCTSConfig, Tree, decide, search_tasks, value_examples
from datalyst.tasks import read_tasks
from datalyst.train import load_value_model, write_value_examples

search_app = typer.Typer(help="Tree search (MCTS) over tasks, and value data from its trees.", no_args_is_help=True)
app.add_typer(search_app, name="search")
console = Console(stderr=True, highlight=False)


@search_app.command("run")
def run_command(
    tasks: Annotated[list[Path], typer.Argument(help="Task files (JSONL).", show_default=False)],
    out: Annotated[Path, typer.Option(help="Folder of trees, one per task and trial; running again resumes.")],
    model: Annotated[str | None, typer.Option(help="Model spec of the agent.")] = None,
    collect: Annotated[
        bool, typer.Option(help="JUPITER's collection: explore (c_puct 1.25), 50 simulations, answers judged.")
    ] = False,
    value_model: Annotated[Path | None, typer.Option(help="A value model (`train value`) to value states.")] = None,
    simulations: Annotated[int | None, typer.Option(help="Expansions per tree (50 with --collect, else 40).")] = None,
    c_puct: Annotated[float | None, typer.Option(help="Exploration weight (1.25 with --collect, else 0).")] = None,
    expansions: Annotated[int, typer.Option(help="Turns proposed per expansion.")] = 3,
    max_depth: Annotated[int, typer.Option(help="Turns on one branch at most.")] = 10,
    max_errors: Annotated[int, typer.Option(help="Failing cells in a row that end a branch.")] = 3,
    seconds: Annotated[float | None, typer.Option(help="Wall-time budget per tree.")] = None,
    tokens: Annotated[int | None, typer.Option(help="Model-token budget per tree.")] = None,
    dialect: Annotated[str, typer.Option(help=f"Turn format: {', '.join(DIALECTS)}.")] = "jupiter",
    trials: Annotated[int, typer.Option(help="Trees per task.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Only this many tasks of each file, drawn by seed.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of sampling and of the drawn tasks.")] = 0,
    temperature: Annotated[float | None, typer.Option(help="1.0 with --collect, else 0.7.")] = None,
    top_p: Annotated[float, typer.Option()] = 0.95,
    max_tokens: Annotated[int, typer.Option(help="Tokens per model turn.")] = 768,
    concurrency: Annotated[int, typer.Option(help="Trees searched at once.")] = 1,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Search every task with MCTS, saving a tree per task and trial; with --collect, for value data."""
    get_dialect(dialect)  # an unknown name stops here, in one line
    chosen = [task for path in tasks for task in drawn(read_tasks(path), limit, seed)]
    if collect and (unchecked := [task.id for task in chosen if task.answer is None and not task.answer_sql]):
        raise ConfigError(f"--collect judges answers, but {len(unchecked)} tasks have none (first: {unchecked[0]})")
    overrides: dict[str, object] = {"expansions": expansions, "max_depth": max_depth, "max_errors": max_errors,
                                    "seconds": seconds, "tokens": tokens}  # fmt: skip
    if simulations is not None:
        overrides["simulations"] = simulations
    if c_puct is not None:
        overrides["c_puct"] = c_puct
    config = validated(MCTSConfig, dict(**((COLLECT if collect else INFER).model_dump() | overrides)))
    temperature = temperature if temperature is not None else 1.0 if collect else 0.7
    sampling = validated(SamplingParams, dict(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed))
    agent_config = validated(AgentConfig, dict(dialect=dialect, sampling=sampling,
                                 require_isolation=not allow_unisolated))  # fmt: skip
    spec = str(resolve_spec(model))
    valuer = load_value_model(value_model) if value_model is not None else None
    console.print(f"[dim]{len(chosen)} tasks x {trials} trees · {spec} · {dialect} · {config.simulations} "
                  f"simulations, c_puct {config.c_puct:g} · trees in {out}[/]")  # fmt: skip

    async def go() -> list[Tree]:
        async with ManagedModel(spec, eager=True) as loaded:
            agent = Agent(loaded, agent_config)
            return await search_tasks(chosen, agent, out, config, trials=trials, judged=collect,
                                      value_model=valuer, concurrency=concurrency)  # fmt: skip

    trees = asyncio.run(go())
    answered = sum(decide(tree) is not None for tree in trees)
    line = f"{len(trees)} trees, {answered} with an answer, {sum(len(tree.nodes) - 1 for tree in trees)} states"
    if collect:
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
