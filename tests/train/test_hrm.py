"""Datarus's hierarchical reward model: step and trajectory labels for hand-built runs, preference pairs, and a
tiny model that learns to score successful runs above failed ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from value_helpers import answer, cell, trajectory, void

from datalyst.errors import DataFileError
from datalyst.tasks import Task
from datalyst.train import LoraOptions, with_outcomes
from datalyst.train._hrm import (
    HRMConfig,
    ends_in_error,
    hrm_examples,
    load_hrm,
    preference_pairs,
    step_label,
    train_hrm,
    trajectory_label,
)
from datalyst.train._log import read_log

torch = pytest.importorskip("torch")

SUMS = Task(id="sums", question="What is the total?", answer=4, judge="rule")
OPEN = Task(id="open", question="What stands out?")


def runs():
    return [
        trajectory(SUMS, 0, [cell(0, "load()"), answer(1, "4")]),  # error-free and right: +1
        trajectory(SUMS, 1, [cell(0, "load()"), cell(1, "oops()", ok=False), answer(2, "4")]),  # ends in an error: -1
        trajectory(SUMS, 2, [cell(0, "bad()", ok=False), cell(1, "load()"), answer(2, "5")]),  # corrected, wrong: -1
        trajectory(OPEN, 0, [void(0), cell(1, "look()"), answer(2, "x")]),  # unchecked, no failed cell: +1
        trajectory(OPEN, 1, [cell(0, "look()", ok=False)]),  # no answer: -1
        trajectory(SUMS, 3, [cell(0, "load()")], failed=True),  # our side failed: left out
    ]


def test_step_labels() -> None:
    assert step_label(cell(0, "load()")) == 1.0
    assert step_label(cell(0, "oops()", ok=False)) == -1.0
    assert step_label(void(0)) == -1.0
    assert step_label(answer(0, "4")) is None


def test_trajectory_labels_follow_datarus() -> None:
    error_free = trajectory(OPEN, 0, [cell(0, "load()"), answer(1, "x")])
    corrected = trajectory(OPEN, 1, [cell(0, "oops()", ok=False), cell(1, "load()"), answer(2, "x")])
    ends_in_an_error = trajectory(OPEN, 2, [cell(0, "load()"), cell(1, "oops()", ok=False), answer(2, "x")])
    unanswered = trajectory(OPEN, 3, [cell(0, "load()")])
    assert [ends_in_error(t) for t in (error_free, corrected, ends_in_an_error, unanswered)] == [
        False, False, True, True
    ]  # fmt: skip
    assert trajectory_label(error_free, None) == 1.0
    assert trajectory_label(corrected, None) == 1.0
    assert trajectory_label(ends_in_an_error, None) == -1.0
    assert trajectory_label(unanswered, None) == -1.0
    # where the answer can be checked, it must be right too; a right answer after an uncorrected error stays -1
    assert trajectory_label(corrected, True) == 1.0
    assert trajectory_label(corrected, False) == -1.0
    assert trajectory_label(ends_in_an_error, True) == -1.0


def test_examples_of_hand_built_runs() -> None:
    examples = hrm_examples(with_outcomes(runs()))
    labels = {(e.level, e.id): e.label for e in examples}
    assert labels == {
        # the state after load() is shared by sums#0 and sums#1: one step example
        ("step", "sums#0@1"): 1.0, ("step", "sums#1@2"): -1.0, ("step", "sums#2@1"): -1.0, ("step", "sums#2@2"): 1.0,
        ("step", "open#0@1"): -1.0, ("step", "open#0@2"): 1.0, ("step", "open#1@1"): -1.0,
        ("trajectory", "sums#0"): 1.0, ("trajectory", "sums#1"): -1.0, ("trajectory", "sums#2"): -1.0,
        ("trajectory", "open#0"): 1.0, ("trajectory", "open#1"): -1.0,
        ("preference", "sums#0>sums#1"): None, ("preference", "sums#0>sums#2"): None,
        ("preference", "open#0>open#1"): None,
    }  # fmt: skip
    step = next(e for e in examples if e.id == "sums#1@2")
    assert [m.content for m in step.conversations[0]][2:4] == ["Action: load()", "<interpreter>\n1\n</interpreter>"]
    assert step.conversations[0][4].content == "Action: oops()" and len(step.conversations[0]) == 6
    pair = next(e for e in examples if e.id == "open#0>open#1")
    assert pair.conversations[0][-1].content == "Answer: x" and pair.conversations[1][-2].content == "Action: look()"


def test_preference_pairs_go_round_robin() -> None:
    whole = [e for e in hrm_examples(with_outcomes(runs())) if e.level == "trajectory"]
    sums = [e for e in whole if e.id.startswith("sums")]  # one success, two failures
    assert [p.id for p in preference_pairs(sums)] == ["sums#0>sums#1", "sums#0>sums#2"]
    assert preference_pairs([e for e in whole if e.label == -1.0]) == []


def test_training_scores_successes_above_failures(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "samples.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in runs()))
    config = HRMConfig(trajectories=[str(tmp_path)], model=f"hf:{tiny_model}", batch_size=15, epochs=8, lr=5e-2,
                       warmup_ratio=0.0, precision="fp32", lora=LoraOptions(r=4, alpha=8))  # fmt: skip
    result = train_hrm(config, tmp_path / "run", progress=False)
    log = read_log(tmp_path / "run" / "log.jsonl")
    assert result.items == 15 and result.steps == 8
    # at zero scores: 12 squared errors of 1 and 3 pairs of log 2, averaged over 15 items
    assert log[0].loss == pytest.approx((12 + 3 * 0.6931472) / 15, rel=1e-5)
    assert log[-1].loss < 0.6 * log[0].loss
    model = load_hrm(tmp_path / "run")
    scores = {t.id: model.score(t) for t in runs()[:5]}
    assert all(-1.0 <= s <= 1.0 for s in scores.values())
    assert min(scores["sums#0"], scores["open#0"]) > max(scores["sums#1"], scores["sums#2"], scores["open#1"])
    steps = model.step_scores(runs()[2])
    assert len(steps) == 3 and steps[0] < steps[1]  # bad() failed, load() ran
    assert (result.model / "hrm.json").is_file() and (result.model / "head.safetensors").is_file()


def test_no_trajectories_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "samples.jsonl").write_text("")
    with pytest.raises(DataFileError, match="hold no trajectory"):
        train_hrm(HRMConfig(trajectories=[str(tmp_path)]), tmp_path / "run", progress=False)


def test_the_hrm_command(tiny_model: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from datalyst.cli._app import app
    from datalyst.cli._train_value import hrm_command  # noqa: F401  (registers the commands)

    (tmp_path / "samples.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in runs()))
    done = CliRunner().invoke(app, ["train", "hrm", str(tmp_path / "samples.jsonl"), "--out", str(tmp_path / "run"),
                                    "--model", f"hf:{tiny_model}", "--lora-r", "2", "--limit", "4",
                                    "--preference-weight", "0.5", "--precision", "fp32"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "1 steps over 4 items" in done.output and (tmp_path / "run" / "hrm" / "hrm.json").is_file()
    assert '"preference_weight": 0.5' in (tmp_path / "run" / "config.json").read_text()
