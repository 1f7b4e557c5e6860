"""``synth templates``: tasks with verified answers, made by every template from every collected table.

For each table (``synth._stage`` runs them in order, resumably), each template draws ``drafts_per_template``
drafts, each from a generator seeded by the seed, the table and the template, so a rerun writes the same
bytes. Each draft's solution runs twice in a sandbox holding only that file, and a draft that passes
every check (``synth._verify``) becomes a task whose answer is what the solution printed.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from functools import partial
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datalyst.sandbox import Limits, Sandbox
from datalyst.synth._files import SourceFile, read_source_files
from datalyst.synth._roles import load_code, roles
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.synth._templates import TEMPLATES, Draft
from datalyst.synth._verify import CHECKS, near_duplicate, shingles, verify
from datalyst.tasks import Lineage, Task

GENERATOR_VERSION = 1
SOURCE = "synth:templates"


class TemplateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = 0
    """Seed of the templates' choices."""
    drafts_per_template: int = Field(2, ge=1)
    """Drafts each template makes per table (their questions differ in columns, groups or thresholds)."""


def make_template_tasks(
    files: str | Path,
    out: str | Path,
    *,
    options: TemplateOptions | None = None,
    progress: bool = True,
    require_isolation: bool = True,
) -> TaskSummary:
    """Append to ``out`` the verified tasks of every table in ``files`` not done yet; returns the summary."""
    options = options or TemplateOptions()
    settings = {"stage": "templates", "files": str(Path(files).resolve()), "options": options.model_dump(),
                "version": GENERATOR_VERSION}  # fmt: skip
    return run_units(
        read_source_files(files),
        out,
        partial(_table_tasks, options=options, require_isolation=require_isolation),
        checks=CHECKS,
        settings=settings,
        progress=progress,
    )


def _table_tasks(record: SourceFile, *, options: TemplateOptions, require_isolation: bool) -> Made:
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
            draft = make(columns, random.Random(f"{options.seed}:{record.id}:{name}:{attempt}"))
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
    lineage = Lineage(
        generator=draft.template,
        version=GENERATOR_VERSION,
        seed=seed,
        parents=parents,
        source_hash=record.content_hash,
    )
    return draft.task(f"{record.id[:8]}-{digest}", record.path, answer, solution, SOURCE, lineage)
