"""The run's report: ``report.json``, a Markdown summary, a PNG chart and pages of failed trajectories."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from datalyst import __version__
from datalyst.agent import Trajectory, to_html
from datalyst.eval._config import EvalConfig
from datalyst.eval._metrics import Behaviour, PassRates, behaviour, humaneval_pass_at_k, pass_rates
from datalyst.eval._outcomes import EvalOutcome
from datalyst.files import save_figure, subplots, write_atomic
from datalyst.judge import score_responses, score_tablebench, tablebench_prediction
from datalyst.provenance import git_revision, short_revision
from datalyst.search import Cost
from datalyst.tasks import Task
from datalyst.text import markdown_table

SCHEMA_VERSION = 2
LEVELS = ("easy", "simple", "medium", "moderate", "hard", "challenging")
DABENCH_METRICS = ("accuracy_by_question", "accuracy_by_sub_question", "proportional_accuracy")


RESPONSES = {"raw": "raw", "reformatted": "reformatted (official protocol)"}
"""The responses DABench figures are computed on, and their labels in reports."""


class DABenchFigures(BaseModel):
    """DABench's figures for one kind of response: pass rates and its own metrics (mean over trials)."""

    model_config = ConfigDict(frozen=True)

    rates: PassRates
    official: dict[str, float]
    """Unanswered questions left out, as the official scorer does."""
    strict: dict[str, float]
    """Unanswered questions counted wrong."""


class DialectReport(BaseModel):
    """Results of one dialect: pass rates overall and by group, behaviour, failures."""

    model_config = ConfigDict(extra="forbid")

    dialect: str
    rates: PassRates
    behaviour: Behaviour
    by_level: dict[str, PassRates]
    by_category: dict[str, PassRates]
    by_format: dict[str, PassRates] = {}
    """By the format of the task's first file (``Task.file_format``)."""
    dabench: dict[str, DABenchFigures] | None = None
    """DABench runs: the figures of the ``raw`` answers and, when the run reformats them, of the
    ``reformatted`` ones (the official protocol)."""
    tablebench_official: dict[str, float] | None = None
    """TableBench's own figures (per-type metric, overall mix, Parse@1; mean over trials)."""
    humaneval_official: dict[str, float] | None = None
    """HumanEval's unbiased pass@k over the trials (k = 1, 10, 100 where every problem has k samples)."""
    failures: list[str]
    """Pages of the trajectories that were not fully right, relative to the run folder."""


class EvalReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    config: EvalConfig
    created_at: datetime
    datalyst_version: str
    git_revision: str | None
    n_tasks: int
    dialects: list[DialectReport]


def build_report(
    config: EvalConfig,
    tasks: Sequence[Task],
    trajectories: Sequence[Trajectory],
    outcomes: Sequence[EvalOutcome],
    costs: Mapping[tuple[str, str], Cost] | None = None,
    reformatted: Mapping[tuple[str, str], str] | None = None,
) -> EvalReport:
    """The report of a run; ``costs`` says what each answer cost by (dialect, trajectory id), ``reformatted``
    holds the reformatted DABench answers, when the run reformats."""
    by_id = {task.id: task for task in tasks}
    dialects = []
    for dialect in config.dialects:
        mine = [v for v in outcomes if v.dialect == dialect]
        runs = [t for t in trajectories if t.dialect == dialect]
        dialects.append(
            DialectReport(
                dialect=dialect,
                rates=pass_rates(mine, seed=config.seed),
                behaviour=behaviour(runs, costs),
                by_level=_grouped(mine, lambda v: by_id[v.task_id].level, config.seed),
                by_category=_grouped(mine, lambda v: by_id[v.task_id].category, config.seed),
                by_format=_grouped(mine, lambda v: by_id[v.task_id].file_format, config.seed),
                dabench=_dabench_figures(tasks, runs, mine, config, reformatted),
                **_tablebench_view(tasks, runs, config.trials, config.seed),
                humaneval_official=humaneval_pass_at_k(mine) if _all_judged(tasks, "humaneval") else None,
                failures=[failure_page(v) for v in mine if not v.correct],
            )
        )
    return EvalReport(
        config=config,
        created_at=datetime.now(UTC),
        datalyst_version=__version__,
        git_revision=git_revision(),
        n_tasks=len(tasks),
        dialects=dialects,
    )


def _all_judged(tasks: Sequence[Task], judge: str) -> bool:
    return bool(tasks) and all(task.judge == judge for task in tasks)


def failure_page(outcome: EvalOutcome) -> str:
    return f"failures/{outcome.dialect}/{outcome.trajectory_id.replace('#', '-')}.html"


def _grouped(
    outcomes: Sequence[EvalOutcome], key: Callable[[EvalOutcome], str | None], seed: int
) -> dict[str, PassRates]:
    groups: dict[str, list[EvalOutcome]] = {}
    for outcome in outcomes:
        if (name := key(outcome)) is not None:  # tasks without a level or category are in no group
            groups.setdefault(name, []).append(outcome)
    return {name: pass_rates(groups[name], seed=seed) for name in sorted(groups, key=group_order)}


def group_order(name: str) -> tuple[int, str]:
    """Difficulty levels easiest first (DABench's and BIRD's names), everything else alphabetically."""
    return (LEVELS.index(name), "") if name in LEVELS else (len(LEVELS), name)


def _dabench_figures(
    tasks: Sequence[Task],
    runs: Sequence[Trajectory],
    outcomes: Sequence[EvalOutcome],
    config: EvalConfig,
    reformatted: Mapping[tuple[str, str], str] | None,
) -> dict[str, DABenchFigures] | None:
    """Raw and reformatted DABench figures of one dialect, when every task is a DABench task."""
    if not _all_judged(tasks, "dabench") or any(not isinstance(task.answer, dict) for task in tasks):
        return None
    numbers = {task.id: number for number, task in enumerate(tasks)}  # the official scorer keys by number
    labels = {numbers[task.id]: {str(k): str(v) for k, v in task.answer.items()} for task in tasks}
    raw = {(t.dialect, t.id): t.answer or "" for t in runs}
    figures = {
        "raw": DABenchFigures(
            rates=pass_rates(outcomes, seed=config.seed), **_dabench_views(runs, raw, labels, numbers, config.trials)
        )
    }
    if reformatted is not None:
        rescored = [v.model_copy(update={"score": v.reformatted_score or 0.0}) for v in outcomes]
        views = _dabench_views(runs, reformatted, labels, numbers, config.trials)
        figures["reformatted"] = DABenchFigures(rates=pass_rates(rescored, seed=config.seed), **views)
    return figures


def _dabench_views(
    runs: Sequence[Trajectory],
    texts: Mapping[tuple[str, str], str],
    labels: Mapping[int, Mapping[str, str]],
    numbers: Mapping[str, int],
    trials: int,
) -> dict[str, dict[str, float]]:
    """DABench's metrics of ``texts`` (by dialect and trajectory id) per trial, averaged, in both views;
    ``numbers`` gives each task id the number its label has in ``labels``."""
    views = {"official": False, "strict": True}
    totals = {view: dict.fromkeys(DABENCH_METRICS, 0.0) for view in views}
    for trial in range(trials):
        responses = [
            {"id": numbers[t.task.id], "response": texts.get((t.dialect, t.id), "")} for t in runs if t.trial == trial
        ]
        for view, strict in views.items():
            report = score_responses(responses, labels, strict=strict)
            for metric in DABENCH_METRICS:
                totals[view][metric] += getattr(report, metric) / trials
    return {view: {metric: round(value, 4) for metric, value in values.items()} for view, values in totals.items()}


def _tablebench_view(
    tasks: Sequence[Task], runs: Sequence[Trajectory], trials: int, seed: int
) -> dict[str, dict[str, float]]:
    """TableBench's official figures per trial, averaged, when every task is a TableBench task."""
    if not _all_judged(tasks, "tablebench"):
        return {}
    totals: dict[str, float] = {}
    for trial in range(trials):
        answers = {t.task.id: t.answer or "" for t in runs if t.trial == trial}
        rows = []
        for task in tasks:
            prediction = tablebench_prediction(answers.get(task.id, ""))
            rows.append(
                {
                    "id": task.id,
                    "qtype": task.category,
                    "qsubtype": task.subcategory,
                    "answer": str(task.answer),
                    "parsed_result": {"parsed_prediction": prediction, "Parse@1": prediction != ""},
                }
            )
        report = score_tablebench(rows, bootstrap_seed=seed)
        figures = {f"{qtype} EM": group.em for qtype, group in report.types.items() if qtype != "DataAnalysis"}
        if "DataAnalysis" in report.types:
            figures["DataAnalysis Mix_Metric"] = report.types["DataAnalysis"].mix_metric
        figures |= {"Overall Mix_Metric": report.overall.mix_metric, "Parse@1": report.overall.parse_at_1}
        for name, value in figures.items():
            totals[name] = totals.get(name, 0.0) + (value or 0.0) / trials
    return {"tablebench_official": {name: round(value, 2) for name, value in totals.items()}}


def write_reports(
    report: EvalReport, trajectories: Sequence[Trajectory], outcomes: Sequence[EvalOutcome], out_dir: Path
) -> None:
    """``report.json``, ``report.md``, ``chart.png`` and one HTML page per failed trajectory."""
    write_atomic(out_dir / "report.json", report.model_dump_json(indent=2))
    write_atomic(out_dir / "report.md", render_markdown(report))
    draw_chart(report, out_dir / "chart.png")
    by_id = {(t.dialect, t.id): t for t in trajectories}
    for outcome in outcomes:
        page = out_dir / failure_page(outcome)
        if not outcome.correct and not page.exists():
            write_atomic(page, to_html(by_id[outcome.dialect, outcome.trajectory_id]))


def render_markdown(report: EvalReport) -> str:
    config = report.config
    k = config.trials
    if config.split is not None:
        subset = f", the {config.split} split"
    elif config.subset is not None:
        subset = f", stratified subset of {config.subset} by {config.stratify_by} (seed {config.seed})"
    else:
        subset = ""
    revision = f" ({short_revision(report.git_revision)})" if report.git_revision else ""
    lines = [
        f"# Evaluation: {config.bench} with {config.model}",
        "",
        f"{report.n_tasks} tasks{subset}, {k} trial{'s' if k != 1 else ''}, "
        f"strategy {_strategy(config)}, "
        f"temperature {config.agent.sampling.temperature}, top-p {config.agent.sampling.top_p}, "
        f"at most {config.agent.max_turns} turns of {config.agent.sampling.max_tokens} tokens. "
        f"datalyst {report.datalyst_version}"
        f"{revision}, {report.created_at:%Y-%m-%d %H:%M} UTC.",
        "",
        "Rates in %, with 95% bootstrap intervals over the tasks with finished trajectories "
        "(`done` counts trajectories; an unfinished run is resumed by running the same command again)."
        + (
            " Model calls found in the completion cache took no time: `s / answer` is not a speed."
            if config.completion_cache
            else ""
        ),
        "",
        f"| dialect | done | pass@1 |{f' pass@{k} |' if k > 1 else ''} mean turns | void turns | exec errors | "
        "answered | tokens / answer | cells / answer | s / answer |",
        "|---|---|---|" + ("---|" if k > 1 else "") + "---|---|---|---|---|---|---|",
    ]
    for d in report.dialects:
        b = d.behaviour
        lines.append(
            f"| {d.dialect} | {b.n_trajectories}/{report.n_tasks * k} | {d.rates.pass_at_1} |"
            f"{f' {d.rates.pass_at_k} |' if k > 1 else ''} {b.mean_turns:.2f} | "
            f"{100 * b.void_turn_rate:.1f} | {100 * b.execution_error_rate:.1f} | {100 * b.answered_rate:.1f} | "
            f"{b.mean_tokens:,.0f} | {b.mean_cells:.1f} | {b.mean_wall_s:.1f} |"
        )
    for title, attribute in (("level", "by_level"), ("category", "by_category"), ("file format", "by_format")):
        groups = list(dict.fromkeys(name for d in report.dialects for name in getattr(d, attribute)))
        if not groups or (attribute == "by_format" and len(groups) == 1):
            continue
        rows = []
        for group in groups:
            cells = [getattr(d, attribute).get(group) for d in report.dialects]
            n = next(c.n_tasks for c in cells if c is not None)
            rows.append([group, n, *(f"{100 * c.pass_at_1.value:.1f}" if c else "" for c in cells)])
        header = [title, "n", *(d.dialect for d in report.dialects)]
        lines += ["", f"## pass@1 by {title}", "", *markdown_table(header, rows)]
    if any(d.dabench for d in report.dialects):
        lines += _dabench_markdown(report)
    if any(d.tablebench_official for d in report.dialects):
        names = list(dict.fromkeys(name for d in report.dialects for name in d.tablebench_official or {}))
        rows = [
            [d.dialect, *(f"{(d.tablebench_official or {}).get(n, 0.0):.2f}" for n in names)] for d in report.dialects
        ]
        table = markdown_table(["dialect", *names], rows)
        lines += ["", "## TableBench metrics (official rules, mean over trials)", "", *table, ""]
        lines += ["Unanswered questions count as wrong; chart questions are not part of these runs."]
    if any(d.humaneval_official for d in report.dialects):
        lines += ["", "## HumanEval (official unbiased pass@k over the trials)", ""]
        for d in report.dialects:
            figures = (d.humaneval_official or {}).items()
            lines.append(f"- {d.dialect}: " + ", ".join(f"{name} {100 * value:.1f}%" for name, value in figures))
    lines += ["", "## Failed trajectories", ""]
    for d in report.dialects:
        links = ", ".join(f"[{Path(page).stem}]({page})" for page in d.failures)
        lines.append(f"- {d.dialect} ({len(d.failures)}): {links or 'none'}")
    return "\n".join(lines) + "\n"


def _strategy(config: EvalConfig) -> str:
    if config.strategy == "vote":
        return f"vote (majority of {config.votes})"
    if config.strategy == "mcts":
        search = config.search
        guide = f"value model {config.value_model}" if config.value_model else "no value model"
        return (f"mcts ({search.simulations} simulations of {search.expansions} turns, c_puct {search.c_puct:g}, "
                f"depth {search.max_depth}, {guide})")  # fmt: skip
    return config.strategy


def _dabench_markdown(report: EvalReport) -> list[str]:
    k = report.config.trials
    rows = [
        (d.dialect, RESPONSES[name], figures) for d in report.dialects for name, figures in (d.dabench or {}).items()
    ]
    at_k = [f"pass@{k}"] if k > 1 else []
    rates = [(dialect, name, f.rates.pass_at_1, *([f.rates.pass_at_k] if k > 1 else [])) for dialect, name, f in rows]
    lines = ["", "## DABench (mean over trials)", "", *markdown_table(["dialect", "responses", "pass@1", *at_k], rates)]
    views = [
        (dialect, name, view, *(f"{getattr(f, view)[m]:.4f}" for m in DABENCH_METRICS))
        for dialect, name, f in rows
        for view in ("official", "strict")
    ]
    lines += ["", *markdown_table(["dialect", "responses", "view", *DABENCH_METRICS], views)]
    reformatter = report.config.reformat_model
    how = (
        f"reformatted answers were rewritten into each question's format by {reformatter} before scoring, "
        "as the official pipeline does"
        if any("reformatted" in (d.dabench or {}) for d in report.dialects)
        else "answers were not reformatted (the official pipeline reformats them first)"
    )
    lines += [
        "",
        f"Raw answers are scored as the agent wrote them; {how}. "
        "The official view leaves unanswered questions out; the strict view counts them wrong.",
    ]
    return lines


def draw_chart(report: EvalReport, path: Path) -> None:
    """pass@1 (solid) and pass@k (light) per dialect, overall and per level (or per category when the
    tasks have no levels), with their intervals (pass@1's left of centre, pass@k's right)."""
    attribute = "by_level" if any(d.by_level for d in report.dialects) else "by_category"
    groups = ["all", *dict.fromkeys(name for d in report.dialects for name in getattr(d, attribute))]
    k = report.config.trials
    bars = [("pass_at_1", 1.0, -0.2 if k > 1 else 0.0, "pass@1")]
    if k > 1:
        bars.insert(0, ("pass_at_k", 0.35, 0.2, f"pass@{k}"))
    width = 0.8 / max(1, len(report.dialects))
    figure, axes = subplots(figsize=(min(12, 3 + 1.5 * len(groups)), 4))
    for i, d in enumerate(report.dialects):
        rates = [d.rates if group == "all" else getattr(d, attribute).get(group) for group in groups]
        positions = [x - 0.4 + width * (i + 0.5) for x in range(len(groups))]
        for rate_name, alpha, shift, label in bars:
            estimates = [getattr(r, rate_name) if r else None for r in rates]
            values = [100 * e.value if e else 0 for e in estimates]
            errors = [
                [100 * (e.value - e.low) if e else 0 for e in estimates],
                [100 * (e.high - e.value) if e else 0 for e in estimates],
            ]
            axes.bar(positions, values, width * 0.9, color=f"C{i}", alpha=alpha, label=f"{d.dialect} {label}")
            axes.errorbar([p + shift * width for p in positions], values, yerr=errors, fmt="none", ecolor="black",
                          alpha=0.4 + 0.6 * (alpha == 1.0), capsize=2)  # fmt: skip
    axes.set_xticks(range(len(groups)), groups)
    axes.set_ylabel("% of tasks")
    axes.set_ylim(0, 100)
    axes.set_title(f"{report.config.bench}: {report.config.model}")
    axes.legend(fontsize="small", ncols=len(report.dialects))
    save_figure(figure, path)
