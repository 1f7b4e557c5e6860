"""``datalyst curate``: turn tasks into trajectories worth training on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.agent import ANALYST_OPTIONS, DIALECTS, AgentConfig, get_dialect, rollout
from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._options import config_command, validated
from datalyst.cli._shared import ManagedModel, absolute_all, drawn, model_spec
from datalyst.curate import (
    EXPERT_SPEC,
    ChainSummary,
    ConsistencyJudge,
    CorrectionOptions,
    Decontaminator,
    ExpertAgent,
    ExpertOptions,
    FilterOptions,
    JudgeSummary,
    LLMConsistency,
    RuleConsistency,
    RunConfig,
    RunFolder,
    category_pass_rates,
    correct_programs,
    curation_report,
    expert_tasks,
    export_examples,
    export_notebooks,
    export_sharegpt,
    export_trl,
    export_verl,
    filter_run,
    judge_run,
    read_curated,
    refine_run,
    render_curation,
    rule_checks,
    sample,
    tasks_in_band,
    write_report,
)
from datalyst.errors import ConfigError
from datalyst.llm import load_tokenizer, resolve_spec
from datalyst.paths import benchmarks_dir
from datalyst.provenance import write_manifest
from datalyst.search import Cost, Tree, answer_paths
from datalyst.tasks import read_tasks, write_tasks

curate_app = typer.Typer(help="Sample, judge, filter and export training trajectories.", no_args_is_help=True)
app.add_typer(curate_app, name="curate")
console = Console(stderr=True, highlight=False)
EXPORTS = {"examples": export_examples, "sharegpt": export_sharegpt, "trl": export_trl, "verl": export_verl,
           "notebooks": export_notebooks}  # fmt: skip

Run = Annotated[Path, typer.Argument(help="A curation run folder.", show_default=False)]


@config_command(
    curate_app, "sample", RunConfig, arguments=["tasks"], inline=["agent", "agent.sampling"],
    skip=["source", "workflows", "expert", "guide", "rounds", "agent.require_isolation", "agent.sandbox_mode",
          "agent.limits"],
    same={"agent.sampling.seed": "seed"},
    convert={"model": model_spec, "tasks": absolute_all},
    presets={"analyst": {f"agent.{name}": value for name, value in ANALYST_OPTIONS.items()}},
    defaults={"source": "sample", "n": 3, "agent.sampling.temperature": 0.7, "agent.sampling.top_p": 0.95},
)  # fmt: skip
def sample_command(
    config: RunConfig,
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes.")],
    limit: Annotated[int | None, typer.Option(help="Only this many tasks of each file, drawn by seed.")] = None,
    concurrency: Annotated[int, typer.Option(help="Trajectories at once.")] = 4,
    analyst: Annotated[
        bool,
        typer.Option(
            help="Run the agent as ask does (its last call, format check and repeat guard): the kept runs then "
            "show the model what the shipped agent says to it."
        ),
    ] = False,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Sample N trajectories of every task with a model (with --knowledge, the category's workflow in the prompt)."""
    if not config.tasks:
        raise ConfigError("give the task files to sample: TASKS... (or tasks in --config)")
    get_dialect(config.agent.dialect)  # an unknown name stops here, in one line
    chosen = [task for path in config.tasks for task in drawn(read_tasks(path), limit, config.seed)]
    agent = config.agent.model_copy(update={"require_isolation": not allow_unisolated})
    config = config.model_copy(update={"agent": agent})
    spec, n, dialect = config.model, config.n, config.agent.dialect
    console.print(f"[dim]{len(chosen)} tasks x {n} samples · {spec} · {dialect} · run folder {out}[/]")

    async def go() -> None:
        async with ManagedModel(spec, eager=True) as loaded:
            summary = await sample(chosen, loaded, RunFolder(out), config, concurrency=concurrency)
        ends = ", ".join(f"{count} {name}" for name, count in sorted(summary.terminations.items()))
        console.print(f"wrote {summary.written} trajectories ({ends or 'none'}), {summary.skipped} done before")

    asyncio.run(go())


@config_command(curate_app, "sequences", CorrectionOptions, inline=["sampling"])
def sequences_command(
    options: CorrectionOptions,
    tasks: Annotated[
        list[Path], typer.Argument(help="Programming problems (`synth sequences` output).", show_default=False)
    ],
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes.")],
    model: Annotated[str | None, typer.Option(help="The working model that writes the programs.")] = None,
    guide: Annotated[
        str | None, typer.Option(help="The model that explains failing programs. [default: the working model]")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only this many problems of each file, drawn by seed.")] = None,
    concurrency: Annotated[int, typer.Option(help="Chains at once.")] = 2,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Self-correction chains (CodeSeq): each failing program gets its failing case and the guide's explanation
    back, up to --rounds times; chains that end passing are kept for `curate export`."""
    seed = options.sampling.seed or 0
    chosen = [task for path in tasks for task in drawn(read_tasks(path), limit, seed) if task.judge == "cases"]
    if not chosen:
        raise ConfigError("no problem with test cases in those files; make some with `datalyst synth sequences`")
    worker_spec = str(resolve_spec(model))
    guide_spec = str(resolve_spec(guide)) if guide else worker_spec

    async def go() -> ChainSummary:
        async with AsyncExitStack() as stack:
            worker = await stack.enter_async_context(ManagedModel(worker_spec))
            explainer = (
                worker if guide_spec == worker_spec else await stack.enter_async_context(ManagedModel(guide_spec))
            )
            return await correct_programs(chosen, [str(p.resolve()) for p in tasks], RunFolder(out), worker, explainer,
                                          options=options, concurrency=concurrency,
                                          require_isolation=not allow_unisolated)  # fmt: skip

    summary = asyncio.run(go())

    def share(n: int) -> str:
        return f"{n} ({100 * n / max(summary.chains, 1):.1f}%)"

    console.print(f"{summary.chains} chains: {share(summary.first_try)} passed at once, {share(summary.passed)} "
                  f"after corrections (mean {summary.mean_rounds:.2f} rounds); {summary.failed} broke")  # fmt: skip


@config_command(
    curate_app, "expert", RunConfig, arguments=["tasks"], inline=["expert"],
    skip=["source", "model", "agent", "n", "knowledge", "workflows", "guide", "rounds", "expert.seed",
          "expert.mistakes"],
    same={"expert.seed": "seed"},
    convert={"tasks": absolute_all},
    defaults={"source": "expert", "model": EXPERT_SPEC, "agent": {}, "expert": {}},
)  # fmt: skip
def expert_command(
    config: RunConfig,
    out: Annotated[Path, typer.Option(help="Run folder; running again resumes.")],
    dialect: Annotated[str, typer.Option(help=f"Turn format: {', '.join(DIALECTS)}.")] = "datamind",
    limit: Annotated[int | None, typer.Option(help="Only this many tasks of each file, drawn by seed.")] = None,
    concurrency: Annotated[int, typer.Option(help="Trajectories at once.")] = 2,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Play each task's canonical solution as a real trajectory (cells run in the sandbox), some with a mistake
    and its fix: training data without a strong model."""
    if not config.tasks:
        raise ConfigError("give the task files to play: TASKS... (or tasks in --config)")
    get_dialect(dialect)  # an unknown name stops here, in one line
    chosen = (task for path in config.tasks for task in drawn(read_tasks(path), limit, config.seed))
    playable, skipped = expert_tasks(chosen)
    agent = validated(AgentConfig, dict(dialect=dialect, require_isolation=not allow_unisolated))
    config = config.model_copy(update={"agent": agent})
    options = config.expert or ExpertOptions()
    folder = RunFolder(out)
    folder.start(config)
    console.print(f"[dim]{len(playable)} tasks ({len(skipped)} without a usable solution) · {dialect} · {out}[/]")
    summary = asyncio.run(rollout(playable, ExpertAgent(agent, options), folder.samples, concurrency=concurrency))
    ends = ", ".join(f"{count} {name}" for name, count in sorted(summary.terminations.items()))
    console.print(f"wrote {summary.written} trajectories ({ends or 'none'}), {summary.skipped} done before")


@curate_app.command("trees")
def trees_command(
    trees: Annotated[
        list[Path], typer.Argument(help="Folders of trees from `datalyst search run`.", show_default=False)
    ],
    out: Annotated[Path, typer.Option(help="Run folder; running again adds the paths of trees finished since.")],
) -> None:
    """Take every answered path of finished search trees as a trajectory (JUPITER's collection), to judge, filter
    and export like samples: all the paths of one task are one group."""
    files = sorted(file for folder in trees for file in folder.glob("*.json"))
    if not files:
        raise ConfigError(f"{', '.join(map(str, trees))}: no trees; make them with `datalyst search run --collect`")
    loaded = [Tree.load(file) for file in files]
    finished = [tree for tree in loaded if tree.finished]
    if not finished:
        raise ConfigError(f"none of the {len(loaded)} trees is finished yet; finish them with `datalyst search run`")
    setups = {(tree.root.model, tree.root.dialect) for tree in finished}
    if len(setups) > 1:
        raise ConfigError(f"trees of {len(setups)} setups ({', '.join(sorted(' '.join(s) for s in setups))}): give "
                          "the trees of one model and dialect")  # fmt: skip
    first = finished[0].root
    agent = AgentConfig(dialect=first.dialect, sampling=first.sampling.model_copy(update={"seed": None}))  # per tree
    config = RunConfig(source="search", tasks=[str(folder.resolve()) for folder in trees], model=first.model,
                       agent=agent, n=None)  # fmt: skip
    folder = RunFolder(out)
    folder.start(config)
    added = folder.add(path for tree in finished for path in answer_paths(tree))
    cost = {field: sum(getattr(tree.cost, field) for tree in finished) for field in Cost.model_fields}
    write_manifest(folder.samples, trees=len(finished), unfinished=len(loaded) - len(finished), cost=cost)
    console.print(
        f"{added} answered paths added from {len(finished)} finished trees"
        + (f" ({len(loaded) - len(finished)} still searching)" if len(loaded) > len(finished) else "")
    )


@curate_app.command("judge")
def judge_command(
    run: Run,
    judge: Annotated[
        str,
        typer.Option(
            help="Consistency judge for tasks without a verified answer: rule, or a model spec (which also grades "
            "verified tasks whose judge is a model)."
        ),
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
    if config.source in ("expert", "search") and reflect:
        reflect = 0  # the expert has no model to reflect with, and search paths have no rounds to sample again
    sampler = model or config.model

    async def go() -> JudgeSummary:
        async with AsyncExitStack() as stack:
            chosen: ConsistencyJudge = RuleConsistency()
            judging = None
            if judge != "rule":
                judging = await stack.enter_async_context(ManagedModel(str(resolve_spec(judge))))
                chosen = LLMConsistency(judging)
            reflecting = await stack.enter_async_context(ManagedModel(sampler)) if reflect else None
            return await judge_run(
                folder, chosen, rounds=reflect, model=reflecting, judge_model=judging, concurrency=concurrency
            )

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


@curate_app.command("band")
def band_command(
    run: Run,
    out: Annotated[Path, typer.Option(help="The task file to write (JSONL).")],
    low: Annotated[float, typer.Option(min=0.0, max=1.0, help="The lowest share of right samples kept.")] = 0.2,
    high: Annotated[float, typer.Option(min=0.0, max=1.0, help="The highest share of right samples kept.")] = 0.8,
) -> None:
    """Write the verified tasks whose first-round samples were right at a rate between --low and --high: the
    tasks the sampling model solves only sometimes, for `train rl`."""
    if low > high:
        raise ConfigError(f"--low {low} is above --high {high}")
    chosen = tasks_in_band(RunFolder(run), low, high)
    write_tasks(chosen, out)
    console.print(f"{len(chosen)} tasks right in {low:.0%} to {high:.0%} of their samples written to {out}")


@curate_app.command("refine")
def refine_command(
    run: Run,
    model: Annotated[str | None, typer.Option(help="Model that rewrites workflows. [default: the run's model]")] = None,
    below: Annotated[float, typer.Option(help="Refine categories whose tasks passed less often than this.")] = 0.5,
    min_tasks: Annotated[int, typer.Option(help="Only categories with at least this many judged tasks.")] = 3,
) -> None:
    """Rewrite the workflows of categories whose samples rarely pass as finer steps, for later sampling."""
    folder = RunFolder(run)
    spec = str(resolve_spec(model or folder.config().model))

    async def go() -> dict[str, str]:
        async with ManagedModel(spec) as loaded:
            return await refine_run(folder, loaded, below=below, min_tasks=min_tasks)

    for name, rate in category_pass_rates(folder).items():
        console.print(f"{name}: {rate.passed} of {rate.tasks} passed")
    refined = asyncio.run(go())
    console.print(f"refined: {', '.join(refined) or 'none'} (saved in {folder.config_path})")


@config_command(curate_app, "filter", FilterOptions)
def filter_command(
    options: FilterOptions,
    run: Run,
    tokenizer: Annotated[str, typer.Option(help="Model whose tokenizer measures answers (at most 1,024 tokens).")] = (
        "embedded:small"
    ),
    decontaminate: Annotated[
        bool, typer.Option(help="Drop tasks on DABench or TableBench questions or tables.")
    ] = True,
) -> None:
    """Select judged trajectories, apply the rule filters, drop duplicates and score what is left."""
    folder = RunFolder(run)
    folder.config()
    checks = rule_checks(_token_counter(tokenizer))
    if decontaminate:
        decontaminator = Decontaminator.from_benchmarks(benchmarks_dir())
        questions, tables = decontaminator.size
        if not questions + tables:
            console.print(f"[yellow]no benchmark found under {benchmarks_dir()}: nothing to decontaminate against[/]")
        console.print(f"[dim]decontaminating against {questions} benchmark questions and {tables} tables[/]")
        checks.append(decontaminator)
    summary = filter_run(folder, checks, options)
    for stage in summary.funnel:
        dropped = ", ".join(f"{reason} {n}" for reason, n in stage.dropped.items()) or "none dropped"
        console.print(f"{stage.stage}: {stage.kept} left ({dropped})")
    strata = ", ".join(f"{name} {n}" for name, n in summary.by_stratum.items())
    console.print(f"kept {summary.kept} of {summary.trajectories} trajectories ({strata or 'none'})")
    console.print(f"[dim]{folder.kept}, and why the others were dropped: {folder.dropped}[/]")


@curate_app.command("export")
def export_command(
    run: Run,
    formats: Annotated[
        list[str], typer.Option("--format", help=f"What to write: {', '.join(EXPORTS)}; repeat for several.")
    ],
    out: Annotated[Path | None, typer.Option(help="Folder to write into. [default: RUN/exports]")] = None,
    tokenizer: Annotated[str, typer.Option(help="Model whose chat template and tokenizer make the examples.")] = (
        "embedded:small"
    ),
    guidance: Annotated[
        bool, typer.Option(help="Keep the sampling guidance in the task message (left out by default).")
    ] = False,
    failed_turns: Annotated[
        bool,
        typer.Option(
            help="Train on the turns that went wrong too (a failed cell, an answer the format check sent back; "
            "examples only; by default they stay in the context with no loss, so the model learns to fix mistakes, "
            "not to make them)."
        ),
    ] = False,
) -> None:
    """Write the kept trajectories as training examples (ids and loss masks), LLaMA-Factory's sharegpt,
    a TRL dataset, verl's parquet, or executed notebooks with their data files."""
    folder = RunFolder(run)
    unknown = sorted(set(formats) - set(EXPORTS))
    if unknown:
        raise ConfigError(f"unknown --format {', '.join(unknown)}; choose among {', '.join(EXPORTS)}")
    kept = read_curated(folder)
    if not kept:
        raise ConfigError(f"{folder.kept} holds no kept trajectories; run `datalyst curate filter {run}` first")
    target = out or folder.exports
    spec = str(resolve_spec(tokenizer))
    done = []
    for name in dict.fromkeys(formats):
        if name == "examples":
            written = export_examples(kept, target, load_tokenizer(spec), guidance=guidance, failed_turns=failed_turns)
        else:
            written = EXPORTS[name](kept, target, guidance=guidance)
        done.append(written.model_dump(mode="json"))
        console.print(f"{name}: {written.records} records in {', '.join(str(p) for p in written.paths)}")
    write_manifest(
        target / "export",
        run=str(folder.path),
        tokenizer=spec,
        guidance=guidance,
        failed_turns=failed_turns,
        exports=done,
    )


@curate_app.command("report")
def report_command(
    run: Run,
    sample: Annotated[int, typer.Option(help="Kept and dropped trajectories shown on the page, each.")] = 20,
    tokenizer: Annotated[str, typer.Option(help="Model whose tokenizer counts turns without token ids.")] = (
        "embedded:small"
    ),
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
) -> None:
    """Write RUN/report: counts at every stage, yields, mixes, lengths, plots and a page of examples."""
    folder = RunFolder(run)
    report = curation_report(folder, count_tokens=_token_counter(tokenizer))
    index = write_report(folder, report, sample=sample, seed=seed)
    print(render_curation(report))
    console.print(f"[dim]Report in {index}[/]")


def _token_counter(model: str) -> Callable[[str], int]:
    """How many tokens a text is for ``model``'s tokenizer."""
    encode = load_tokenizer(str(resolve_spec(model))).encode
    return lambda text: len(encode(text))
