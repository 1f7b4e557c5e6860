"""Runs read in order (rounds of training, or a scaffold changed one step at a time): pass@1 with its interval and
the share of runs answered, as a table and a PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ValidationError

from datalyst.errors import ConfigError, DataFileError
from datalyst.eval._metrics import Estimate
from datalyst.eval._report import EvalReport
from datalyst.files import save_figure, subplots
from datalyst.text import markdown_table


class TrendPoint(BaseModel):
    """One run of a trend, for one dialect."""

    label: str
    n_tasks: int
    pass_at_1: Estimate
    answered: float


def read_trend(runs: Sequence[str | Path], labels: Sequence[str] = (), dialect: str | None = None) -> list[TrendPoint]:
    """The points of ``runs`` in their order, from each run's ``report.json``; ``labels`` name them (by default
    their folders' names). ``dialect`` chooses one where a run has several (by default each run's first)."""
    if labels and len(labels) != len(runs):
        raise ConfigError(f"{len(labels)} labels for {len(runs)} runs: give one label per run, or none")
    points = []
    for index, run in enumerate(runs):
        report = _report(Path(run))
        chosen = next((d for d in report.dialects if dialect in (None, d.dialect)), None)
        if chosen is None:
            has = ", ".join(d.dialect for d in report.dialects)
            raise ConfigError(f"{run} has no {dialect} results (it has {has})")
        label = labels[index] if labels else Path(run).name
        points.append(TrendPoint(label=label, n_tasks=chosen.rates.n_tasks, pass_at_1=chosen.rates.pass_at_1,
                                 answered=chosen.behaviour.answered_rate))  # fmt: skip
    return points


def render_trend(points: Sequence[TrendPoint]) -> str:
    rates = [
        f"{100 * p.pass_at_1.value:.1f} [{100 * p.pass_at_1.low:.1f}, {100 * p.pass_at_1.high:.1f}]" for p in points
    ]
    rows = [(p.label, p.n_tasks, rate, f"{100 * p.answered:.1f}") for p, rate in zip(points, rates, strict=True)]
    return "\n".join(markdown_table(["run", "tasks", "pass@1 (95% interval)", "answered"], rows))


def draw_trend(points: Sequence[TrendPoint], path: str | Path, title: str = "") -> None:
    """pass@1 with its interval and the answered share, one point per run, in order."""
    x = range(len(points))
    figure, axes = subplots(figsize=(min(12, 3 + 1.2 * len(points)), 4))
    values = [100 * p.pass_at_1.value for p in points]
    errors = [[100 * (p.pass_at_1.value - p.pass_at_1.low) for p in points],
              [100 * (p.pass_at_1.high - p.pass_at_1.value) for p in points]]  # fmt: skip
    axes.errorbar(x, values, yerr=errors, marker="o", capsize=3, label="pass@1 (95% interval)")
    axes.plot(x, [100 * p.answered for p in points], marker="s", linestyle="--", label="answered")
    axes.set_xticks(list(x), [p.label for p in points], rotation=20, ha="right")
    axes.set_ylabel("% of runs")
    axes.set_ylim(0, 100)
    axes.set_title(title)
    axes.legend(fontsize="small", loc="lower right")
    save_figure(figure, path)


def _report(run: Path) -> EvalReport:
    path = run / "report.json"
    if not path.is_file():
        raise ConfigError(f"{run} has no report.json; write it with: datalyst eval report {run}")
    try:
        return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise DataFileError(f"{path} is not a report this datalyst reads ({exc.error_count()} errors); "
                            f"write it again with: datalyst eval report {run}") from None  # fmt: skip
