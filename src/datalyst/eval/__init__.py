"""Evaluation: benchmarks by name, runs of the agent over tasks x trials, outcomes, pass@k and reports."""

from datalyst.eval._benches import BENCHES, load_bench
from datalyst.eval._compare import Comparison, Difference, GroupBy, compare_runs, paired_difference
from datalyst.eval._config import EVAL_SAMPLING, EvalConfig
from datalyst.eval._failures import failure_counts, failure_kind
from datalyst.eval._metrics import Behaviour, Estimate, PassRates, behaviour, bootstrap, pass_rates
from datalyst.eval._outcomes import EvalOutcome, ajudge_trajectories
from datalyst.eval._pool import Pool, pool_runs
from datalyst.eval._reformat import REFORMATTER, areformat_responses
from datalyst.eval._report import RESPONSES, DABenchFigures, DialectReport, EvalReport, render_markdown
from datalyst.eval._run import (
    arun_eval,
    ascore_run,
    cache_run,
    prepare_run,
    read_config,
    read_outcomes,
    run_eval,
    run_trajectories,
    score_run,
)
from datalyst.eval._tablebench_pot import parse_pot_rows
from datalyst.eval._trend import TrendPoint, draw_trend, read_trend, render_trend

__all__ = [
    "BENCHES",
    "EVAL_SAMPLING",
    "REFORMATTER",
    "RESPONSES",
    "Behaviour",
    "Comparison",
    "DABenchFigures",
    "DialectReport",
    "Difference",
    "Estimate",
    "EvalConfig",
    "EvalOutcome",
    "EvalReport",
    "GroupBy",
    "PassRates",
    "Pool",
    "TrendPoint",
    "ajudge_trajectories",
    "areformat_responses",
    "arun_eval",
    "ascore_run",
    "behaviour",
    "bootstrap",
    "cache_run",
    "compare_runs",
    "draw_trend",
    "failure_counts",
    "failure_kind",
    "load_bench",
    "paired_difference",
    "parse_pot_rows",
    "pass_rates",
    "pool_runs",
    "prepare_run",
    "read_config",
    "read_outcomes",
    "read_trend",
    "render_markdown",
    "render_trend",
    "run_eval",
    "run_trajectories",
    "score_run",
]
