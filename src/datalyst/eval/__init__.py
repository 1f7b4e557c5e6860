"""Evaluation: benchmarks by name, runs of the agent over tasks x trials, outcomes, pass@k and reports."""

from datalyst.eval._benches import load_bench
from datalyst.eval._compare import GroupBy, compare_runs, paired_difference
from datalyst.eval._config import EVAL_SAMPLING, EvalConfig
from datalyst.eval._failures import failure_counts, failure_kind
from datalyst.eval._metrics import Behaviour, Estimate, PassRates, bootstrap, pass_rates
from datalyst.eval._outcomes import EvalOutcome, ajudge_trajectories
from datalyst.eval._pool import pool_runs
from datalyst.eval._reformat import REFORMATTER, areformat_responses
from datalyst.eval._report import RESPONSES, DialectReport, EvalReport, render_markdown
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
from datalyst.eval._trend import draw_trend, read_trend, render_trend

__all__ = [
    "EVAL_SAMPLING",
    "REFORMATTER",
    "RESPONSES",
    "Behaviour",
    "DialectReport",
    "Estimate",
    "EvalConfig",
    "EvalOutcome",
    "EvalReport",
    "GroupBy",
    "PassRates",
    "ajudge_trajectories",
    "areformat_responses",
    "arun_eval",
    "ascore_run",
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
