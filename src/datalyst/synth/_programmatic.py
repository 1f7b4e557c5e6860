"""``synth templates``: tasks with verified answers, made by every template from every collected table.

For each table of a ``synth files`` output, in order, each template draws ``drafts_per_template`` drafts
(each from a generator seeded by the seed, the table and the template, so a rerun writes the same
bytes); each draft's solution runs twice in a sandbox holding only that file, and a draft that passes
every check (``synth._verify``) becomes a task whose answer is what the solution printed. A table's
tasks are appended together, then a line in ``<out>.progress.jsonl`` marks it done with its counts:
a rerun skips done tables and drops tasks of a table that was cut off halfway.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import track

from datalyst.jsonl import drop_torn_tail, read_appended
from datalyst.provenance import write_manifest
from datalyst.sandbox import Limits, Sandbox
from datalyst.synth._files import SourceFile, read_source_files
from datalyst.synth._roles import load_code, roles
from datalyst.synth._templates import TEMPLATES, Draft
from datalyst.synth._verify import CHECKS, near_duplicate, shingles, verify
from datalyst.tasks import Lineage, Task, read_tasks, write_tasks

GENERATOR_VERSION = 1
SOURCE = "synth:templates"
_FIX = "restore the file or move the line out"


class TemplateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    drafts_per_template: int = Field(2, ge=1)
    """Drafts each template makes per table (their questions differ in columns, groups or thresholds)."""


class TableProgress(BaseModel):
    """A table whose tasks are all written, and what became of its drafts."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """The table's ``SourceFile.id``."""
    kept: int
    rejected: dict[str, int]


class TemplateSummary(BaseModel):
    """The tasks of a ``synth templates`` output so far, and the drafts it rejected."""

    tasks: int
    tables: int
    tables_with_tasks: int
    by_category: dict[str, int]
    by_level: dict[str, int]
    by_format: dict[str, int]
    rejected_by_check: dict[str, int]


def make_template_tasks(
    files: str | Path,
    out: str | Path,
    *,
    options: TemplateOptions | None = None,
    progress: bool = True,
    require_isolation: bool = True,
) -> TemplateSummary:
    """Append to ``out`` the verified tasks of every table in ``files`` not done yet; returns the summary."""
    options = options or TemplateOptions()
    out = Path(out)
    progress_path = out.with_name(out.name + ".progress.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    drop_torn_tail(progress_path)
    done = {entry.id: entry for entry in read_appended(progress_path, TableProgress, what="a progress line", fix=_FIX)}
    _drop_unfinished(out, done)
    records = read_source_files(files)
    settings = {"files": str(Path(files).resolve()), "options": options.model_dump(), "version": GENERATOR_VERSION}
    write_manifest(out, **settings)
    todo = [record for record in records if record.id not in done]
    console = Console(stderr=True)
    with out.open("a", encoding="utf-8") as sink, progress_path.open("a", encoding="utf-8") as marks:
        for record in track(todo, description="tables", console=console, disable=not progress):
            tasks, rejected = _table_tasks(record, options, require_isolation)
            sink.write("".join(task.model_dump_json(exclude_defaults=True) + "\n" for task in tasks))
            sink.flush()
            entry = TableProgress(id=record.id, kept=len(tasks), rejected=dict(sorted(rejected.items())))
            marks.write(entry.model_dump_json() + "\n")
            marks.flush()
            done[record.id] = entry
    summary = _summary(read_tasks(out) if out.exists() else [], done, records)
    write_manifest(out, **settings, summary=summary.model_dump())
    return summary


def _table_tasks(record: SourceFile, options: TemplateOptions, require_isolation: bool) -> tuple[list[Task], Counter]:
    """The verified tasks of one table, and the count of rejected drafts by check."""
    columns = roles(record)
    load = load_code(record)
    prompt = record.info.render()
    tasks: list[Task] = []
    kept_shingles: list[frozenset[tuple[str, ...]]] = []
    rejected: Counter[str] = Counter()
    drafts: list[Draft] = []
    for name, (_, make) in sorted(TEMPLATES.items()):
        for attempt in range(options.drafts_per_template):
            rng = random.Random(f"{options.seed}:{record.id}:{name}:{attempt}")
            draft = make(columns, rng)
            if draft is not None and all(draft.question != other.question for other in drafts):
                drafts.append(draft)
    if not drafts:
        return [], rejected
    with Sandbox(files=[record.path], limits=Limits(wall_s=20, cpu_s=20), require_isolation=require_isolation) as box:
        ids: dict[str, str] = {}  # question -> id of the verified task
        for draft in _parents_first(drafts):
            if draft.question in ids:
                continue
            if near_duplicate(draft.question, kept_shingles):
                rejected["near_duplicate"] += 1
                continue
            verdict = verify(draft, load + draft.code, box, prompt)
            if verdict.answer is None:
                rejected[verdict.reason or "solution_failed"] += 1
                continue
            kept_shingles.append(shingles(draft.question))
            parents = [ids[parent.question] for parent in draft.parents if parent.question in ids]
            task = _task(record, draft, load + draft.code, verdict.answer, options.seed, parents)
            ids[draft.question] = task.id
            tasks.append(task)
    return tasks, rejected


def _parents_first(drafts: list[Draft]) -> list[Draft]:
    """Every draft after the easier drafts it composes."""
    ordered: list[Draft] = []
    for draft in drafts:
        ordered += [*_parents_first(list(draft.parents)), draft]
    return ordered


def _task(
    record: SourceFile,
    draft: Draft,
    solution: str,
    answer: dict[str, str],
    seed: int,
    parents: list[str],
) -> Task:
    digest = hashlib.sha256(f"{draft.question}\n{draft.constraints}".encode()).hexdigest()[:8]
    return Task(
        id=f"{record.id[:8]}-{digest}",
        question=draft.question,
        constraints=draft.constraints,
        format="\n".join(answer.format_line for answer in draft.answers),
        files=[record.path],
        answer=answer,
        judge="dabench",
        category=draft.category,
        level=draft.level,
        source=SOURCE,
        solution=solution,
        lineage=Lineage(
            generator=draft.template,
            version=GENERATOR_VERSION,
            seed=seed,
            parents=parents,
            source_hash=record.content_hash,
        ),
    )


def _drop_unfinished(out: Path, done: dict[str, TableProgress]) -> None:
    """Remove the tasks of tables whose run was cut off (they are made again)."""
    if not out.exists():
        return
    drop_torn_tail(out)
    tasks = read_tasks(out)
    finished = [task for task in tasks if task.lineage and (task.lineage.source_hash or "")[:16] in done]
    if len(finished) != len(tasks):
        write_tasks(finished, out)


def _summary(tasks: list[Task], done: dict[str, TableProgress], records: list[SourceFile]) -> TemplateSummary:
    kinds = {record.path: record.kind.value for record in records}
    rejected: Counter[str] = Counter()
    for entry in done.values():
        rejected.update(entry.rejected)
    return TemplateSummary(
        tasks=len(tasks),
        tables=len(done),
        tables_with_tasks=sum(entry.kept > 0 for entry in done.values()),
        by_category=dict(sorted(Counter(task.category or "" for task in tasks).items())),
        by_level=dict(sorted(Counter(task.level or "" for task in tasks).items())),
        by_format=dict(sorted(Counter(kinds.get(task.files[0], "?") for task in tasks).items())),
        rejected_by_check={check: rejected[check] for check in CHECKS if rejected[check]},
    )
