"""``datalyst curate``: turn tasks into trajectories worth training on."""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.agent import DIALECTS, AgentConfig
from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._eval import ManagedModel
from datalyst.cli._synth import parse_options
from datalyst.curate import (
    ConsistencyJudge,
    JudgeSummary,
    LLMConsistency,
    RuleConsistency,
    RunConfig,
    RunFolder,
    judge_run,
    sample,
)
from datalyst.errors import ConfigError
from datalyst.llm import SamplingParams, resolve_spec
from datalyst.tasks import Task, read_tasks

curate_app = typer.Typer(help="Sample, judge, filter and export training trajectories.", no_args_is_help=True)
app.add_typer(curate_app, name="curate")
console = Console(stderr=True, highlight=False)

Run = Annotated[Path, typer.Argument(help="A curation run folder.", show_default=False)]


@curate_app.command("sample")
def sample_command(
    tasks: Annotated[list[Path], typer.Argument(help="Task files (JSONL).", show_default=False)],
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes.")],
    model: Annotated[str | None, typer.Option(help="Model spec of the expert that samples.")] = None,
    n: Annotated[int, typer.Option(help="Trajectories per task (DataMind samples 3).")] = 3,
    dialect: Annotated[str, typer.Option(help=f"Turn format: {', '.join(DIALECTS)}.")] = "datamind",
    knowledge: Annotated[bool, typer.Option(help="Put the category's workflow in the prompt.")] = True,
    limit: Annotated[int | None, typer.Option(help="Only this many tasks of each file, drawn by seed.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of sampling and of the drawn tasks.")] = 0,
    temperature: Annotated[float, typer.Option()] = 0.7,
    top_p: Annotated[float, typer.Option()] = 0.95,
    max_tokens: Annotated[int, typer.Option(help="Tokens per model turn.")] = 1024,
    max_turns: Annotated[int, typer.Option(help="Turns per trajectory.")] = 10,
    concurrency: Annotated[int, typer.Option(help="Trajectories at once.")] = 4,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Sample N trajectories of every task with a model, the category's workflow in the prompt."""
    if dialect not in DIALECTS:
        raise ConfigError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    chosen = [task for path in tasks for task in _drawn(read_tasks(path), limit, seed)]
    spec = str(resolve_spec(model))
    sampling = parse_options(SamplingParams, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    agent = parse_options(
        AgentConfig, dialect=dialect, sampling=sampling, max_turns=max_turns, require_isolation=not allow_unisolated
    )
    files = [str(path.resolve()) for path in tasks]
    config = parse_options(
        RunConfig, source="sample", tasks=files, model=spec, agent=agent, n=n, knowledge=knowledge, seed=seed
    )
    console.print(f"[dim]{len(chosen)} tasks x {n} samples · {spec} · {dialect} · run folder {out}[/]")

    async def go() -> None:
        async with ManagedModel(spec, eager=True) as loaded:
            summary = await sample(chosen, loaded, RunFolder(out), config, concurrency=concurrency)
        ends = ", ".join(f"{count} {name}" for name, count in sorted(summary.terminations.items()))
        console.print(f"wrote {summary.written} trajectories ({ends or 'none'}), {summary.skipped} done before")

    asyncio.run(go())


@curate_app.command("judge")
def judge_command(
    run: Run,
    judge: Annotated[
        str, typer.Option(help="Consistency judge for tasks without a verified answer: rule, or a model spec.")
    ] = "rule",
    reflect: Annotated[int, typer.Option(help="Rounds of reflection for tasks whose samples fail (0: none).")] = 1,
    model: Annotated[
        str | None, typer.Option(help="Model that samples the reflections. [default: the run's model]")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Groups judged, or reflections sampled, at once.")] = 4,
) -> None:
    """Judge each task's samples (its verified answer, else their agreement) and reflect on the failures."""
    folder = RunFolder(run)
    config = folder.config()
    if reflect < 0:
        raise ConfigError(f"--reflect {reflect}: use 0 or more rounds")
    if config.source == "expert" and reflect:
        reflect = 0  # the expert's tasks are verified, and it has no model to reflect with
    sampler = model or config.model

    async def go() -> JudgeSummary:
        async with AsyncExitStack() as stack:
            chosen: ConsistencyJudge = RuleConsistency()
            if judge != "rule":
                chosen = LLMConsistency(await stack.enter_async_context(ManagedModel(str(resolve_spec(judge)))))
            reflecting = await stack.enter_async_context(ManagedModel(sampler)) if reflect else None
            return await judge_run(folder, chosen, rounds=reflect, model=reflecting, concurrency=concurrency)

    summary = asyncio.run(go())
    for method, counts in summary.by_method.items():
        console.print(f"{method}: {counts['passed']} of {counts['tasks']} tasks passed")
    rounds = ", ".join(
        f"round {r}: {summary.passed_by_round.get(r, 0)} passed, {summary.failed_by_round.get(r, 0)} failed"
        for r in sorted({*summary.passed_by_round, *summary.failed_by_round})
    )
    console.print(f"{rounds}; rescued by reflection: {summary.rescued}")
    if summary.incomplete:
        console.print(f"[yellow]{summary.incomplete} groups are incomplete: finish sampling, then judge again[/]")


def _drawn(tasks: list[Task], limit: int | None, seed: int) -> list[Task]:
    """``limit`` of ``tasks`` drawn by ``seed``, in their order (all of them without a limit)."""
    if limit is None or limit >= len(tasks):
        return tasks
    drawn = set(random.Random(seed).sample(range(len(tasks)), limit))
    return [task for index, task in enumerate(tasks) if index in drawn]
