"""``datalyst eval``: run the agent on a benchmark, score response files, compare runs."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from datalyst.agent import get_dialect
from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._options import config_command
from datalyst.cli._shared import ManagedModel, absolute, model_spec
from datalyst.errors import ConfigError, DataFileError
from datalyst.eval import (
    REFORMATTER,
    RESPONSES,
    EvalConfig,
    EvalReport,
    GroupBy,
    areformat_responses,
    arun_eval,
    ascore_run,
    cache_run,
    compare_runs,
    draw_trend,
    failure_counts,
    parse_pot_rows,
    pool_runs,
    prepare_run,
    read_config,
    read_outcomes,
    read_trend,
    render_markdown,
    render_trend,
    run_trajectories,
)
from datalyst.jsonl import read_records
from datalyst.judge import (
    dabench_dir,
    load_concepts,
    load_labels,
    score_responses,
    score_tablebench,
)
from datalyst.llm import CachedModel, ChatModel, resolve_spec
from datalyst.tasks import load_dabench

eval_app = typer.Typer(help="Evaluate agents on benchmarks: run, score, compare.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@config_command(
    eval_app, "run", EvalConfig, inline=["agent", "agent.sampling", "search"],
    skip=["agent.dialect", "agent.require_isolation", "agent.sandbox_mode", "agent.limits", "search.max_live"],
    same={"agent.sampling.seed": "seed", "search.max_depth": "agent.max_turns"},
    convert={"model": model_spec, "value_model": absolute, "completion_cache": absolute},
)  # fmt: skip
def run_command(
    config: EvalConfig,
    out: Annotated[Path, typer.Option(help="Run folder; running again with it resumes the run.")],
    reformat: Annotated[
        bool,
        typer.Option(
            help="DABench: also score answers rewritten into the question's format (the official protocol) beside raw "
            f"ones, by --reformat-model. [default: {REFORMATTER}, the same for every agent]"
        ),
    ] = True,
    shard: Annotated[
        str | None, typer.Option(help="Run only slice I of N of the tasks (I/N, 0-based), e.g. one per machine.")
    ] = None,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Run the agent on every task TRIALS times per dialect, store every trajectory, score and report."""
    slice_ = _parse_shard(shard)
    for name in config.dialects:
        get_dialect(name)  # an unknown name stops here, in one line
    reformat_model = str(resolve_spec(config.reformat_model or REFORMATTER)) if reformat else None
    agent = config.agent.model_copy(update={"require_isolation": not allow_unisolated})
    config = config.model_copy(update={"reformat_model": reformat_model, "agent": agent})
    console = Console(stderr=True, highlight=False)
    dialects = ", ".join(config.dialects)
    console.print(f"[dim]model {config.model} · {dialects} · {config.trials} trials · run folder {out}[/]")
    tasks = prepare_run(config, out)  # checks the benchmark and the folder before the model loads
    console.print(f"[dim]{len(tasks)} tasks x {config.trials} trials x {len(config.dialects)} dialects[/]")
    print(render_markdown(asyncio.run(_run(config, out, shard=slice_))))
    console.print(f"[dim]Reports in {out}: report.json, report.md, chart.png, failures/[/]")


async def _run(config: EvalConfig, out: Path, *, shard: tuple[int, int] | None) -> EvalReport:
    """The whole run in one event loop: the models are made, used and closed in it."""
    async with AsyncExitStack() as stack:
        model: ChatModel = await stack.enter_async_context(ManagedModel(config.model, eager=True))
        if config.completion_cache is not None:
            model = CachedModel(model, Path(config.completion_cache))
        judge = (
            await stack.enter_async_context(ManagedModel(config.judge_model, eager=True))
            if config.judge_model
            else None
        )
        reformatter = None
        if config.reformat_model not in (None, config.model):  # loaded at its first answer: a run may have none
            reformatter = await stack.enter_async_context(ManagedModel(config.reformat_model))
        report = await arun_eval(config, out, model, judge_model=judge, reformat_model=reformatter, shard=shard)
        if isinstance(model, CachedModel):
            Console(stderr=True).print(f"[dim]completion cache: {model.hits} calls found, {model.misses} made[/]")
        return report


async def _report(run: Path, *, judge_model: str | None, reformat_model: str | None) -> EvalReport:
    """Rescore a run in one event loop, loading a model only if it is asked something (a report may need none)."""
    async with AsyncExitStack() as stack:
        judge = await stack.enter_async_context(ManagedModel(judge_model)) if judge_model else None
        reformatter = await stack.enter_async_context(ManagedModel(reformat_model)) if reformat_model else None
        return await ascore_run(run, judge_model=judge, reformat_model=reformatter)


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not int(index) < int(count):
        raise ConfigError(f"--shard {text!r} should be I/N with 0 <= I < N, e.g. 0/2 and 1/2")
    return int(index), int(count)


@eval_app.command("report")
def report_command(
    run: Annotated[Path, typer.Argument(help="A run folder made by `datalyst eval run`.", show_default=False)],
    judge_model: Annotated[
        str | None,
        typer.Option(help="Model spec of the judge for tasks judged by a model (default: the run's own judge)."),
    ] = None,
) -> None:
    """Judge the trajectories a run has so far and rewrite its reports, without running anything."""
    config = read_config(run)
    report = asyncio.run(
        _report(run, judge_model=judge_model or config.judge_model, reformat_model=config.reformat_model)
    )
    print(render_markdown(report))


@eval_app.command("score")
def score_command(
    responses: Annotated[
        Path, typer.Option(help='JSONL of {"id", "response"} records (DABench) or TableBench result rows.')
    ],
    bench: Annotated[str, typer.Option(help="Benchmark whose official rules apply: dabench, tablebench.")] = "dabench",
    bench_path: Annotated[Path | None, typer.Option(help="DABench folder (default: the shared copy).")] = None,
    strict: Annotated[bool, typer.Option(help="DABench: count questions without a response as wrong.")] = False,
    official_overall_bug: Annotated[
        bool, typer.Option(help="TableBench: add the chart term as a 0-1 fraction, as the official script does.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as one JSON object.")] = False,
    reformat_model: Annotated[
        str | None,
        typer.Option(
            help="DABench: also score the responses as rewritten into each question's format by this model "
            "(the official protocol)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Responses reformatted at once.")] = 1,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Score a responses file with the benchmark's official rules (results of any system)."""
    if bench == "tablebench":
        if reformat_model:
            raise ConfigError("--reformat-model is DABench's protocol; TableBench answers are scored as written")
        _score_tablebench(
            responses, official_overall_bug=official_overall_bug, as_json=as_json, allow_unisolated=allow_unisolated
        )
        return
    if bench != "dabench":
        raise ConfigError(f"`eval score` knows the official rules of dabench and tablebench (got {bench!r})")
    if concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency} leaves nothing to run; use 1 or more")
    root = bench_path or dabench_dir()
    labels = load_labels(root / "labels.jsonl")
    concepts = load_concepts(root / "questions.jsonl")
    records = {"raw": read_records(responses)}
    spec = str(resolve_spec(reformat_model)) if reformat_model else None
    if spec:
        records["reformatted"] = asyncio.run(_reformat(records["raw"], root, spec, concurrency=concurrency))
    reports = {name: score_responses(rows, labels, concepts, strict=strict) for name, rows in records.items()}
    if as_json:
        dumped = {name: report.model_dump(mode="json") for name, report in reports.items()}
        print(json.dumps({**dumped, "reformat_model": spec} if spec else dumped["raw"]))
        return
    console = Console(highlight=False, soft_wrap=True)
    for name, report in reports.items():
        label = f"{RESPONSES[name]}: " if spec else ""
        console.print(
            f"[bold]{label}{report.view} view[/]: {report.n_scored} questions scored, {report.n_skipped} skipped"
        )
        for metric in ("accuracy_by_question", "accuracy_by_sub_question", "proportional_accuracy"):
            console.print(f"{metric:<26}{getattr(report, metric):.4f}")


async def _reformat(records: list[dict], root: Path, spec: str, *, concurrency: int) -> list[dict]:
    async with ManagedModel(spec, eager=True) as model:
        return await areformat_responses(records, load_dabench(root), model, concurrency=concurrency)


def _score_tablebench(responses: Path, *, official_overall_bug: bool, as_json: bool, allow_unisolated: bool) -> None:
    """Rows that carry ``parsed_result`` are scored as they are; rows with a raw ``prediction`` are parsed
    first (the code of PoT rows runs in the sandbox)."""
    rows = read_records(responses)
    try:
        pending = [row for row in rows if "parsed_result" not in row]
        parsed = iter(parse_pot_rows(pending, require_isolation=not allow_unisolated))
        rows = [row if "parsed_result" in row else next(parsed) for row in rows]
        report = score_tablebench(rows, official_overall_bug=official_overall_bug)
    except ValueError as exc:
        raise DataFileError(f"{responses}: {exc}") from exc
    official = report.model_dump(mode="json", by_alias=True, exclude_none=True)
    if as_json:
        print(json.dumps(official))
        return
    console = Console(highlight=False, soft_wrap=True)
    for name, group in official["types"].items():
        figures = ", ".join(f"{k} {v}" for k, v in group.items())
        console.print(f"[bold]{name}[/]: {figures}")
    overall = report.overall
    console.print(
        f"[bold]Overall[/]: Mix_Metric {overall.mix_metric} "
        f"({'official, chart term as a fraction' if official_overall_bug else 'corrected'}); "
        f"corrected {overall.mix_metric_corrected}; Parse@1 {overall.parse_at_1}"
    )


@eval_app.command("compare")
def compare_command(
    run_a: Annotated[Path, typer.Argument(help="The baseline run folder.", show_default=False)],
    run_b: Annotated[Path, typer.Argument(help="The run compared with it.", show_default=False)],
    dialect_a: Annotated[str | None, typer.Option(help="Compare only this dialect of RUN_A.")] = None,
    dialect_b: Annotated[str | None, typer.Option(help="...with this dialect of RUN_B (may be RUN_A again).")] = None,
    by: Annotated[
        GroupBy | None, typer.Option(help="Also compare pass@1 in each group of tasks: level, category or format.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Print B - A on the tasks both runs share, per dialect, with a paired test of significance."""
    comparison = compare_runs(run_a, run_b, dialect_a=dialect_a, dialect_b=dialect_b, by=by)
    if as_json:
        print(comparison.model_dump_json(indent=2))
    else:
        Console(highlight=False, soft_wrap=True).print(comparison.render())


@eval_app.command("cache")
def cache_command(
    runs: Annotated[list[Path], typer.Argument(help="Run folders of one model.", show_default=False)],
    to: Annotated[Path, typer.Option(help="The completion cache folder (`eval run --completion-cache`).")],
) -> None:
    """Keep the model calls that wrote RUNS' trajectories in the completion cache TO: a later run whose trajectories
    start as theirs did (one scaffold change apart) reads those turns from it and computes only what differs."""
    for run in runs:
        cache = CachedModel(ManagedModel(read_config(run).model), to)  # the model itself is never loaded
        print(f"{run}: {cache_run(run, cache)} new calls of {cache.spec} kept in {to}")


@eval_app.command("pool")
def pool_command(
    runs: Annotated[
        list[Path], typer.Argument(help="Run folders of one setup over disjoint tasks.", show_default=False)
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the pooled rates as JSON.")] = False,
) -> None:
    """Pass rates over the tasks of several runs of one setup taken together (dev and test: the whole benchmark)."""
    pool = pool_runs(runs)
    print(pool.model_dump_json(indent=2) if as_json else pool.render())


@eval_app.command("trend")
def trend_command(
    runs: Annotated[list[Path], typer.Argument(help="Run folders, in order.", show_default=False)],
    out: Annotated[Path | None, typer.Option(help="Also draw the trend as a PNG here.")] = None,
    label: Annotated[list[str] | None, typer.Option(help="A name for each run, in order. [default: folders']")] = None,
    dialect: Annotated[str | None, typer.Option(help="The dialect to show. [default: each run's first]")] = None,
    title: Annotated[str, typer.Option(help="The chart's title.")] = "",
) -> None:
    """pass@1 and the answered share of runs in order (rounds of training, a scaffold changed step by step)."""
    points = read_trend(runs, label or (), dialect)
    print(render_trend(points))
    if out is not None:
        draw_trend(points, out, title)
        Console(stderr=True).print(f"[dim]chart in {out}[/]")


@eval_app.command("failures")
def failures_command(
    run: Annotated[Path, typer.Argument(help="A run folder made by `datalyst eval run`.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Count the run's trajectories that were not fully right by kind of failure (rules, not reading them)."""
    counts = failure_counts(run_trajectories(run, read_config(run)), read_outcomes(run))
    if as_json:
        print(json.dumps(counts, indent=2))
        return
    total = sum(counts.values())
    print(f"{total} trajectories not fully right")
    for kind, count in counts.items():
        print(f"{kind:>15}  {count:4}  {100 * count / total:5.1f}%")
