"""Runs read in order: pass@1 and the answered share of each, as a table and a chart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from datalyst.errors import ConfigError
from datalyst.eval import (
    Behaviour,
    DialectReport,
    Estimate,
    EvalConfig,
    EvalReport,
    PassRates,
    draw_trend,
    read_trend,
    render_trend,
)

CONFIG = EvalConfig(bench="dabench", model="embedded:small", dialects=["jupiter"])


def write_report(folder: Path, value: float, answered: float) -> Path:
    estimate = Estimate(value=value, low=value - 0.1, high=value + 0.1)
    behaviour = Behaviour(n_trajectories=60, mean_turns=3.0, void_turn_rate=0.0, execution_error_rate=0.2,
                          answered_rate=answered, mean_wall_s=40.0, terminations={})  # fmt: skip
    dialect = DialectReport(dialect="jupiter", rates=PassRates(n_tasks=60, k=1, pass_at_1=estimate, pass_at_k=estimate),
                            behaviour=behaviour, by_level={}, by_category={}, failures=[])  # fmt: skip
    report = EvalReport(config=CONFIG, created_at=datetime.now(UTC), datalyst_version="0", git_revision=None,
                        n_tasks=60, dialects=[dialect])  # fmt: skip
    folder.mkdir()
    (folder / "report.json").write_text(report.model_dump_json())
    return folder


def test_a_trend_reads_each_runs_report_in_order_and_draws_it(tmp_path):
    runs = [write_report(tmp_path / "round0", 0.3, 0.6), write_report(tmp_path / "round1", 0.45, 0.9)]
    points = read_trend(runs)
    assert [(p.label, p.pass_at_1.value, p.answered) for p in points] == [("round0", 0.3, 0.6), ("round1", 0.45, 0.9)]
    table = render_trend(read_trend(runs, labels=["base", "round 1"]))
    assert "| base | 60 | 30.0 [20.0, 40.0] | 60.0 |" in table
    assert "| round 1 | 60 | 45.0 [35.0, 55.0] | 90.0 |" in table
    draw_trend(points, tmp_path / "trend.png", "dev")
    assert (tmp_path / "trend.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_trend_says_what_is_missing(tmp_path):
    run = write_report(tmp_path / "a", 0.3, 0.6)
    with pytest.raises(ConfigError, match="1 labels for 2 runs"):
        read_trend([run, run], labels=["one"])
    with pytest.raises(ConfigError, match="no datamind results"):
        read_trend([run], dialect="datamind")
    (tmp_path / "b").mkdir()
    with pytest.raises(ConfigError, match="datalyst eval report"):
        read_trend([tmp_path / "b"])
