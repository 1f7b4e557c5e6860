"""``curate report``: what a curation run did, stage by stage, and what its kept data looks like.

``RUN/report/`` gets ``report.json`` (every count), ``report.md`` (the same as tables), PNG plots of
the funnel, the mixes and the lengths, and ``index.html``: a random sample of kept and dropped
trajectories, each dropped one with its stage and reason, each linked to its own page.
"""

from __future__ import annotations

import importlib.resources
import random
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import jinja2
from pydantic import BaseModel

from datalyst.agent import Trajectory, to_html
from datalyst.curate._filter import StageCount
from datalyst.curate._judge import JudgeSummary, read_group_verdicts
from datalyst.curate._records import Curated
from datalyst.curate._run import RunFolder
from datalyst.curate._select import Dropped
from datalyst.files import save_figure, subplots, write_atomic
from datalyst.jsonl import read_appended
from datalyst.provenance import read_manifest
from datalyst.tasks import Task
from datalyst.text import markdown_table

_FIX = "run `datalyst curate filter` again"


class Spread(BaseModel):
    """The distribution of one length over the kept trajectories."""

    mean: float
    median: float
    p90: float
    max: int

    @classmethod
    def of(cls, values: Sequence[int]) -> Spread:
        if not values:
            return cls(mean=0, median=0, p90=0, max=0)
        ordered = sorted(values)
        return cls(mean=round(statistics.fmean(ordered), 1), median=statistics.median(ordered),
                   p90=ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], max=ordered[-1])  # fmt: skip


class Spent(BaseModel):
    """What making a run's trajectories cost (every one made, kept or not), and that divided by those kept."""

    completion_tokens: int
    prompt_tokens: int
    cells: int
    seconds: float
    """Trajectory seconds (each trajectory's, or each tree's, wall time, summed): trajectories made at once overlap."""
    per_kept: dict[str, float]
    """The four figures divided by the kept trajectories (empty when none is kept)."""


class CurationReport(BaseModel):
    run: str
    source: str
    model: str
    dialect: str
    tasks: int
    verified_tasks: int
    trajectories: int
    judge: JudgeSummary | None
    ground_truth_yield: float | None
    """Share of verified tasks with a right trajectory (any round)."""
    consistency_yield: float | None
    """Share of unverified tasks whose trajectories agreed (any round)."""
    funnel: list[StageCount]
    kept: int
    mix: dict[str, dict[str, int]]
    """Of the kept trajectories: by category, level, file format, stratum and how they were selected."""
    lengths: dict[str, Spread]
    """Of the kept trajectories: agent tokens, turns, and code cells that failed."""
    recovered: int = 0
    """Kept trajectories that reached their right answer after a failing cell."""
    spent: Spent | None = None


def curation_report(run: RunFolder, count_tokens: Callable[[str], int] | None = None) -> CurationReport:
    """The report of ``run`` as its files stand; ``count_tokens`` measures turns that carry no token count."""
    config = run.config()
    trajectories = run.trajectories()
    tasks = {t.task.id: t.task for t in trajectories}
    verdicts = read_group_verdicts(run)
    passed = {v.task_id for v in verdicts if v.passed}
    judged = {v.task_id: v.method for v in verdicts}
    gt = [task_id for task_id, method in judged.items() if method == "ground_truth"]
    sc = [task_id for task_id, method in judged.items() if method != "ground_truth"]
    kept = read_curated(run)
    manifest = read_manifest(run.kept)
    judge_manifest = read_manifest(run.verdicts)
    return CurationReport(
        run=str(run.path),
        source=config.source,
        model=config.model,
        dialect=config.agent.dialect,
        tasks=len(tasks),
        verified_tasks=sum(task.checkable(by_model=True) for task in tasks.values()),
        trajectories=len(trajectories),
        judge=JudgeSummary.model_validate(judge_manifest["summary"]) if "summary" in judge_manifest else None,
        ground_truth_yield=_share(sum(t in passed for t in gt), len(gt)),
        consistency_yield=_share(sum(t in passed for t in sc), len(sc)),
        funnel=[StageCount.model_validate(stage) for stage in manifest.get("summary", {}).get("funnel", [])],
        kept=len(kept),
        mix={
            "category": _counts(c.trajectory.task.category or "none" for c in kept),
            "level": _counts(c.trajectory.task.level or "none" for c in kept),
            "format": _counts(c.trajectory.task.file_format for c in kept),
            "asks": _counts(_asks(c.trajectory.task) for c in kept),
            "stratum": _counts(c.stratum.value for c in kept),
            "selected_by": _counts(c.selected_by for c in kept),
        },
        lengths={
            "agent_tokens": Spread.of([_agent_tokens(c.trajectory, count_tokens) for c in kept]),
            "turns": Spread.of([len(c.trajectory.turns) for c in kept]),
            "failed_cells": Spread.of([_failed_cells(c.trajectory) for c in kept]),
        },
        recovered=sum(_failed_cells(c.trajectory) > 0 for c in kept),
        spent=_spent(run, trajectories, len(kept)),
    )


def _asks(task: Task) -> str:
    """What the question asks for: an answer or a chart too, and whether it follows an earlier question."""
    asks = "chart" if task.figure else "answer"
    return f"follow-up {asks}" if task.earlier else asks


def _failed_cells(trajectory: Trajectory) -> int:
    return sum(turn.cell_failed for turn in trajectory.turns)


def _spent(run: RunFolder, trajectories: Sequence[Trajectory], kept: int) -> Spent:
    """A search's cost is its trees' (``curate trees`` records it: the paths are a small part of the turns it made);
    any other run's is that of its trajectories' turns."""
    cost = read_manifest(run.samples).get("cost") if run.config().source == "search" else None
    if cost is None:
        turns = [turn for trajectory in trajectories for turn in trajectory.turns]
        cost = {"completion_tokens": sum(turn.completion_tokens for turn in turns),
                "prompt_tokens": sum(turn.prompt_tokens for turn in turns),
                "cells": sum(turn.code is not None for turn in turns),
                "seconds": sum(trajectory.duration_s for trajectory in trajectories)}  # fmt: skip
    cost = {name: round(value, 1) for name, value in cost.items()}  # the trees' seconds too
    per_kept = {name: round(value / kept, 1) for name, value in cost.items()} if kept else {}
    return Spent(**cost, per_kept=per_kept)


def read_curated(run: RunFolder) -> list[Curated]:
    return read_appended(run.kept, Curated, what="a curated trajectory", fix=_FIX)


def write_report(run: RunFolder, report: CurationReport, *, sample: int = 20, seed: int = 0) -> Path:
    """Write the report folder of ``run``; returns the path of its ``index.html``."""
    out = run.report
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    write_atomic(out / "report.json", report.model_dump_json(indent=2))
    write_atomic(out / "report.md", render_curation(report))
    _plot(report, out)
    rng = random.Random(seed)
    kept = read_curated(run)
    dropped = read_appended(run.dropped, Dropped, what="a dropped trajectory", fix=_FIX)
    by_id = {t.id: t for t in run.trajectories()}
    kept_rows = [(c.trajectory, f"kept · {c.stratum.value} · overthinking {c.overthinking:.2f}")
                 for c in rng.sample(kept, min(sample, len(kept)))]  # fmt: skip
    dropped_rows = [(by_id[d.id], f"dropped at {d.stage}: {d.reason}" + (f" ({d.detail})" if d.detail else ""))
                    for d in rng.sample(dropped, min(sample, len(dropped))) if d.id in by_id]  # fmt: skip
    for trajectory, _ in kept_rows + dropped_rows:
        write_atomic(out / "trajectories" / _page(trajectory), to_html(trajectory))
    index = out / "index.html"
    write_atomic(index, _index_html(report, kept_rows, dropped_rows))
    return index


def render_curation(report: CurationReport) -> str:
    what = f"{report.source} · {report.model} · {report.dialect}"
    counts = f"{report.tasks} tasks ({report.verified_tasks} verified) · {report.trajectories} trajectories"
    lines = [f"# Curation report: {report.run}", "", f"{what} · {counts} · {report.kept} kept", ""]
    if report.judge is not None:
        lines += [f"- ground-truth yield: {_percent(report.ground_truth_yield)}",
                  f"- consistency yield: {_percent(report.consistency_yield)}",
                  f"- rescued by reflection: {report.judge.rescued}", ""]  # fmt: skip
    stages = [(s.stage, s.kept, ", ".join(f"{r} {n}" for r, n in s.dropped.items()) or "-") for s in report.funnel]
    lines += markdown_table(["stage", "kept", "dropped"], stages)
    for name, counts in report.mix.items():
        lines += ["", f"**{name}**: " + ", ".join(f"{key} {n}" for key, n in counts.items())]
    lengths = [(name, s.mean, s.median, s.p90, s.max) for name, s in report.lengths.items()]
    lines += ["", *markdown_table(["length", "mean", "median", "p90", "max"], lengths)]
    lines += ["", f"{report.recovered} of the {report.kept} kept reached their answer after a failing cell."]
    if report.spent is not None:
        spent, each = report.spent, report.spent.per_kept
        rows = [(name.replace("_", " "), f"{value:,}", each.get(name, "-"))
                for name, value in spent.model_dump(exclude={"per_kept"}).items()]  # fmt: skip
        lines += ["", *markdown_table(["spent", "in all", "per kept trajectory"], rows)]
    return "\n".join(lines) + "\n"


def _agent_tokens(trajectory: Trajectory, count_tokens: Callable[[str], int] | None) -> int:
    """Tokens the agent wrote: as generated when the turns record them, else counted."""
    total = 0
    for turn in trajectory.turns:
        if turn.token_ids is not None:
            total += len(turn.token_ids)
        elif count_tokens is not None:
            total += count_tokens(turn.text)
        else:
            total += turn.completion_tokens
    return total


def _counts(values: object) -> dict[str, int]:
    return dict(Counter(values).most_common())  # type: ignore[arg-type]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _page(trajectory: Trajectory) -> str:
    return trajectory.id.replace("/", "_").replace("#", "-") + ".html"


def _plot(report: CurationReport, out: Path) -> None:
    """``funnel.png``, ``mix.png`` (strata and categories) and ``lengths.png``."""
    figure, axes = subplots(figsize=(8, 3.5))
    stages = [("sampled", report.trajectories)] + [(s.stage, s.kept) for s in report.funnel]
    axes.bar([s for s, _ in stages], [n for _, n in stages], color="C0")
    axes.set_ylabel("trajectories")
    axes.set_title("Trajectories left after each stage")
    axes.tick_params(axis="x", rotation=30)
    save_figure(figure, out / "funnel.png")

    figure, (left, right) = subplots(1, 2, figsize=(11, 4))
    for axes, name in ((left, "stratum"), (right, "category")):
        counts = report.mix.get(name, {})
        axes.barh(list(counts)[::-1], list(counts.values())[::-1], color="C1")
        axes.set_title(f"Kept trajectories by {name}")
    save_figure(figure, out / "mix.png")

    figure, axes = subplots(figsize=(6, 3.5))
    names = list(report.lengths)
    axes.bar(names, [report.lengths[n].median for n in names], color="C2", label="median")
    axes.scatter(names, [report.lengths[n].p90 for n in names], color="black", label="90th percentile", zorder=3)
    axes.set_yscale("symlog")
    axes.legend()
    axes.set_title("Lengths of kept trajectories")
    save_figure(figure, out / "lengths.png")


def _index_html(
    report: CurationReport, kept: list[tuple[Trajectory, str]], dropped: list[tuple[Trajectory, str]]
) -> str:
    source = importlib.resources.files("datalyst.curate") / "templates" / "report.html.j2"
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(source.read_text())
    sections = [
        (title, [(t, _page(t), note) for t, note in rows]) for title, rows in (("Kept", kept), ("Dropped", dropped))
    ]
    return template.render(summary=render_curation(report), sections=sections)
