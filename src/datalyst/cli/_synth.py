"""``datalyst synth``: make tasks from data files."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console

from datalyst.cli._app import AllowUnisolated, app
from datalyst.cli._options import config_command
from datalyst.errors import ConfigError
from datalyst.eval import load_bench
from datalyst.llm import ChatModel, load_model, resolve_spec
from datalyst.paths import benchmarks_dir, dabench_dir
from datalyst.synth import (
    FORMATS,
    AddressMap,
    DatasetOptions,
    FileOptions,
    MiningOptions,
    QueryOptions,
    SequenceOptions,
    SqlOptions,
    TaskSummary,
    TemplateOptions,
    benchmark_fingerprints,
    collect_files,
    convert_tasks,
    make_dataset_tasks,
    make_follow_ups,
    make_notebook_tasks,
    make_query_tasks,
    make_sequence_tasks,
    make_sql_tasks,
    make_template_tasks,
    sample_by_category,
    tasks_html,
)
from datalyst.tasks import Task, read_tasks, write_tasks

Options = TypeVar("Options", bound=BaseModel)
synth_app = typer.Typer(help="Synthesize tasks from data files.", no_args_is_help=True)
app.add_typer(synth_app, name="synth")


@config_command(synth_app, "files", FileOptions)
def files_command(
    options: FileOptions,
    roots: Annotated[list[Path], typer.Argument(help="Folders (or files) to scan.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Records of the kept tables (JSONL); running again resumes.")],
    converted_dir: Annotated[
        Path | None, typer.Option(help="Where converted files go. [default: OUT.converted]")
    ] = None,
    against: Annotated[
        list[str] | None,
        typer.Option(
            help="Benchmark whose tables are dropped from the corpus: dabench, tablebench:PATH or tasks:PATH; "
            "repeat for several. [default: dabench, and the shared TableBench example]"
        ),
    ] = None,
    no_decontaminate: Annotated[bool, typer.Option("--no-decontaminate", help="Keep benchmark tables.")] = False,
) -> None:
    """Collect usable tables from ROOTS: load every data file, filter, de-duplicate and drop benchmark tables."""
    console = Console(stderr=True, highlight=False)
    benchmarks = benchmark_fingerprints([] if no_decontaminate else _benchmark_tasks(against, console))
    if benchmarks:
        console.print(f"[dim]decontaminating against {len(benchmarks)} benchmark tables[/]")
    funnel = collect_files(roots, out, options=options, benchmarks=benchmarks, converted_dir=converted_dir)
    kinds = ", ".join(f"{n} {kind}" for kind, n in funnel.kept_by_kind.items())
    dropped = ", ".join(f"{n} {reason}" for reason, n in funnel.dropped_by_reason.items())
    console.print(f"kept {funnel.kept} of {funnel.files} files ({kinds}; {funnel.converted} converted)")
    console.print(f"dropped: {dropped or 'none'}")
    console.print(f"[dim]records in {out}, rejections in {out}.rejected.jsonl[/]")


@config_command(synth_app, "templates", TemplateOptions)
def templates_command(
    options: TemplateOptions,
    files: Annotated[Path, typer.Argument(help="The output of `synth files`.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Tasks (JSONL); running again resumes.")],
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Make tasks with verified answers: every template on every table, each solution run in the sandbox."""
    _print_summary(make_template_tasks(files, out, options=options, require_isolation=not allow_unisolated))


@config_command(synth_app, "sql", SqlOptions)
def sql_command(
    options: SqlOptions,
    files: Annotated[Path, typer.Argument(help="The output of `synth files`.", show_default=False)],
    out: Annotated[Path, typer.Option(help="SQL tasks (JSONL); running again resumes.")],
) -> None:
    """Make questions answered by one SQLite query (gold query run read-only), on SQLite tables and split databases."""
    _print_summary(make_sql_tasks(files, out, options=options))


def _print_summary(summary: TaskSummary, unit: str = "tables") -> None:
    console = Console(stderr=True, highlight=False)
    console.print(f"{summary.tasks} tasks from {summary.units_with_tasks} of {summary.units} {unit}")
    for title, counts in (
        ("categories", summary.by_category),
        ("levels", summary.by_level),
        ("formats", summary.by_format),
        ("rejected drafts", summary.rejected_by_check),
    ):
        console.print(f"{title}: " + (", ".join(f"{name} {n}" for name, n in counts.items()) or "none"))


@config_command(synth_app, "queries", QueryOptions)
def queries_command(
    options: QueryOptions,
    files: Annotated[Path, typer.Argument(help="The output of `synth files`.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Tasks without answers (JSONL); running again resumes.")],
    model: Annotated[str | None, typer.Option(help="The model that writes the questions.")] = None,
) -> None:
    """Have a model write questions (and harder questions built on them) about each table; answers come later."""
    with opened_model(str(resolve_spec(model))) as writer:
        summary = make_query_tasks(files, out, writer, options=options)
    _print_summary(summary)


@config_command(synth_app, "datasets", DatasetOptions)
def datasets_command(
    options: DatasetOptions,
    out: Annotated[Path, typer.Option(help="Tasks (JSONL); running again resumes.")],
    model: Annotated[
        str | None, typer.Option(help="A model that writes each generator script (else datalyst's own generators).")
    ] = None,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Make synthetic datasets that hide a trap (sentinel codes, outliers, Simpson's paradox, ...) and questions
    whose answer depends on handling it."""
    with opened_model(model and str(resolve_spec(model))) as writer:
        summary = make_dataset_tasks(out, options=options, model=writer, require_isolation=not allow_unisolated)
    _print_summary(summary, unit="datasets")


@config_command(synth_app, "sequences", SequenceOptions)
def sequences_command(
    options: SequenceOptions,
    out: Annotated[Path, typer.Option(help="Sequence problems (JSONL); running again resumes.")],
    guide: Annotated[
        str | None, typer.Option(help="A guiding model that checks each statement by predicting its examples.")
    ] = None,
) -> None:
    """Make programming problems that ask for the general term of integer sequences, with hidden test cases."""
    with opened_model(guide and str(resolve_spec(guide))) as guide_model:
        summary = make_sequence_tasks(out, guide=guide_model, options=options)
    _print_summary(summary, unit="sequences")


@config_command(synth_app, "notebooks", MiningOptions, inline=["filters"])
def notebooks_command(
    options: MiningOptions,
    roots: Annotated[list[Path], typer.Argument(help="Folders of executed notebooks.", show_default=False)],
    out: Annotated[Path, typer.Option(help="Mined tasks (JSONL); running again resumes.")],
    model: Annotated[str | None, typer.Option(help="The model that scores notebooks and writes the tasks.")] = None,
    address: Annotated[
        list[str] | None,
        typer.Option("--map", help="Where web data lives here: OWNER/REPO=FOLDER or ADDRESS=FILE; repeat."),
    ] = None,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Mine tasks and their multi-step solutions from executed notebooks (NbQA): coarse filters, a quality
    score, tasks whose answers come from the notebooks' outputs, checked and re-run in the sandbox."""
    addresses = AddressMap.parse(address or ())
    with opened_model(str(resolve_spec(model))) as writer:
        funnel, summary = make_notebook_tasks(roots, out, writer, addresses=addresses, options=options,
                                              require_isolation=not allow_unisolated)  # fmt: skip
    console = Console(stderr=True, highlight=False)
    dropped = ", ".join(f"{reason} {n}" for reason, n in funnel.dropped.items()) or "none"
    console.print(f"{funnel.found} notebooks: dropped {dropped}; {funnel.capped} over the caps; {funnel.mined} mined")
    verified = sum(bool(task.lineage and task.lineage.verified) for task in read_tasks(out)) if out.exists() else 0
    console.print(f"{verified} of {summary.tasks} tasks verified by running their solutions")
    _print_summary(summary, unit="notebooks")


@synth_app.command("convert")
def convert_command(
    tasks: Annotated[
        Path, typer.Argument(help="A task file (JSONL), e.g. a run folder's tasks.jsonl.", show_default=False)
    ],
    out: Annotated[Path, typer.Option(help="The converted tasks (JSONL); their files go to a folder beside it.")],
    kinds: Annotated[
        str,
        typer.Option(
            help="Formats given to the tasks in turn: every file kind, json-nested (records under a key) and "
            "xlsx-sheets (the rows over several sheets)."
        ),
    ] = ",".join(FORMATS),
) -> None:
    """Rewrite each task's data files in another format, the questions and answers unchanged (paired runs then
    measure what a format costs the agent)."""
    chosen = [name.strip() for name in kinds.split(",") if name.strip()]
    converted = convert_tasks(read_tasks(tasks), out.with_name(out.stem + ".files"), chosen)
    write_tasks(converted, out)
    counts = {layout: sum(Path(path).parent.name == layout for t in converted for path in t.files) for layout in chosen}
    Console(stderr=True).print(f"{len(converted)} tasks written to {out}; files by format: {counts}")


@synth_app.command("followups")
def followups_command(
    tasks: Annotated[
        Path, typer.Argument(help="A task file (JSONL), e.g. synth templates' output.", show_default=False)
    ],
    out: Annotated[Path, typer.Option(help="The follow-up tasks (JSONL).")],
    per_files: Annotated[int, typer.Option(help="Follow-up tasks made for each set of files the tasks share.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the pairing.")] = 0,
) -> None:
    """Pair tasks on the same files into two-question conversations: the agent answers one question, then the
    task's own in the same sandbox (only the second is judged)."""
    if per_files < 1:
        raise ConfigError(f"--per-files must be at least 1, not {per_files}")
    made = make_follow_ups(read_tasks(tasks), per_files=per_files, seed=seed)
    write_tasks(made, out)
    Console(stderr=True).print(f"{len(made)} follow-up tasks written to {out}")


@synth_app.command("show")
def show_command(
    tasks: Annotated[Path, typer.Argument(help="A task file (JSONL).", show_default=False)],
    per_category: Annotated[int, typer.Option(help="Tasks shown per category.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    html: Annotated[Path | None, typer.Option(help="Write the sample as a standalone HTML page instead.")] = None,
) -> None:
    """Show a random sample of each category of TASKS: question, constraints, format and answer."""
    sample = sample_by_category(read_tasks(tasks), per_category, seed)
    if html is not None:
        html.write_text(tasks_html(sample, title=tasks.name))
        Console(stderr=True).print(f"[dim]Saved page to {html}[/]")
        return
    console = Console(highlight=False, soft_wrap=True)
    for category, chosen in sample.items():
        console.rule(f"{category} ({len(chosen)})")
        for task in chosen:
            console.print(f"{task.id} · {task.level or 'no level'}", style="dim", markup=False)
            console.print(task.question, style="bold", markup=False)
            for text in (task.constraints, task.format):
                if text:
                    console.print(text, markup=False)
            console.print(f"answer: {task.answer}\n", style="green", markup=False)


@contextmanager
def opened_model(spec: str | None) -> Iterator[ChatModel | None]:
    """The model of ``spec`` (None without a spec), closed when the block ends."""
    model = load_model(spec) if spec is not None else None
    try:
        yield model
    finally:
        if model is not None:
            asyncio.run(model.aclose())


def _benchmark_tasks(against: list[str] | None, console: Console) -> list[Task]:
    """The tasks whose tables are dropped: those named, or by default DABench and the TableBench example
    when they are on this machine (a named benchmark that is missing is an error)."""
    if against is None:
        against = ["dabench"] if dabench_dir().is_dir() else []
        examples = sorted((benchmarks_dir() / "tablebench-example" / "inference_results").glob("*.jsonl"))
        against += [f"tablebench:{path}" for path in examples[:1]]
        if not against:
            console.print(
                f"[yellow]warning:[/] no benchmark found under {benchmarks_dir()} to decontaminate against; "
                "set DATALYST_BENCHMARKS or give --against"
            )
    tasks: list[Task] = []
    for item in against:
        name, _, path = item.partition(":")
        tasks += load_bench(name, path or None)
    return tasks
