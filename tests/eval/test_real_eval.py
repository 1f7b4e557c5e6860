"""End to end with a real model: ``datalyst eval run`` on two DABench questions with the embedded ``tiny`` GGUF."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("llama_cpp", reason="needs pip install 'datalyst[llamacpp]'")
pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_a_real_evaluation_run_is_scored_and_reported(datalyst, tmp_path, dabench_tables):
    out = tmp_path / "run"
    args = [
        "eval", "run", "--bench", "dabench", "--subset", "2", "--seed", "0", "--trials", "2",
        "--model", "embedded:tiny", "--max-turns", "2", "--max-tokens", "96", "--out", str(out),
        "--reformat-model", "embedded:tiny",
    ]  # fmt: skip
    done = datalyst(*args, timeout_s=900)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    [dialect] = report["dialects"]
    assert report["n_tasks"] == 2 and dialect["behaviour"]["n_trajectories"] == 4
    assert set(dialect["dabench"]) == {"raw", "reformatted"}
    assert set(dialect["dabench"]["reformatted"]["strict"]) == {
        "accuracy_by_question",
        "accuracy_by_sub_question",
        "proportional_accuracy",
    }
    verdicts = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    assert sorted(v["trajectory_id"] for v in verdicts) == sorted(
        f"{task}#{trial}" for task in {v["task_id"] for v in verdicts} for trial in (0, 1)
    )
    assert "| datamind |" in done.stdout
    again = datalyst(*args, timeout_s=300)  # everything is done: nothing reruns, the same report comes back
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "report.json").read_text())["dialects"] == report["dialects"]
