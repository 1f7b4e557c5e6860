"""Runs of one setup over disjoint tasks, pooled into one set of pass rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalyst.agent import Status
from datalyst.errors import ConfigError
from datalyst.eval import EvalConfig, EvalOutcome, pool_runs

CONFIG = EvalConfig(bench="dabench", model="embedded:small", dialects=["jupiter"], reformat_model="embedded:medium")


def write_run(folder: Path, scores: dict[str, list[float]], *, config=CONFIG, reformat=True) -> Path:
    """A run folder with one verdict per (task, trial); the reformatted score is the raw one halved."""
    folder.mkdir()
    (folder / "config.json").write_text(config.model_dump_json())
    rows = [
        EvalOutcome(
            trajectory_id=f"{task}#{trial}", task_id=task, dialect="jupiter", trial=trial, score=score,
            status=Status.RIGHT if score == 1.0 else Status.WRONG, reformatted_score=score / 2 if reformat else None,
        ).model_dump_json()
        for task, trial_scores in scores.items()
        for trial, score in enumerate(trial_scores)
    ]  # fmt: skip
    (folder / "outcomes.jsonl").write_text("\n".join(rows) + "\n")
    return folder


def test_pooled_rates_are_those_of_all_tasks_together(tmp_path):
    dev_config, test_config = (CONFIG.model_copy(update={"split": split}) for split in ("dev", "test"))
    dev = write_run(tmp_path / "dev", {"1": [1, 1, 0], "2": [0, 0, 0]}, config=dev_config)
    test = write_run(tmp_path / "test", {"3": [1, 0, 0], "4": [1, 1, 1]}, config=test_config)
    pool = pool_runs([dev, test])
    (jupiter,) = pool.dialects
    assert pool.n_tasks == 4 and jupiter.raw.n_tasks == 4 and jupiter.raw.k == 3
    assert jupiter.raw.pass_at_1.value == pytest.approx((2 / 3 + 0 + 1 / 3 + 1) / 4)  # 0.5
    assert jupiter.raw.pass_at_k.value == pytest.approx(3 / 4)
    assert jupiter.reformatted.pass_at_1.value == pytest.approx(0.25)
    assert "pass@1 50.0" in pool.render() and "official (reformatted): pass@1 25.0" in pool.render()


def test_runs_of_other_setups_or_shared_tasks_are_refused(tmp_path):
    base = write_run(tmp_path / "a", {"1": [1]})
    other_model = write_run(tmp_path / "b", {"2": [1]}, config=CONFIG.model_copy(update={"model": "embedded:medium"}))
    with pytest.raises(ConfigError, match=r"differs from .* in model"):
        pool_runs([base, other_model])
    overlapping = write_run(tmp_path / "c", {"1": [0], "3": [1]})
    with pytest.raises(ConfigError, match="task 1 is in both"):
        pool_runs([base, overlapping])
    with pytest.raises(ConfigError, match="two runs or more"):
        pool_runs([base])


def test_the_official_figures_need_every_run_reformatted(tmp_path):
    reformatted = write_run(tmp_path / "a", {"1": [1]})
    raw_only = write_run(tmp_path / "b", {"2": [1]}, reformat=False)
    (jupiter,) = pool_runs([reformatted, raw_only]).dialects
    assert jupiter.reformatted is None and jupiter.raw.pass_at_1.value == 1.0
