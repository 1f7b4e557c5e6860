"""DABench's official protocol in a run: answers reformatted by a model, stored, reused, and reported beside raw."""

from __future__ import annotations

import json

import pytest

from datalyst.agent import AgentConfig
from datalyst.errors import ConfigError
from datalyst.eval import EVAL_SAMPLING, EvalConfig, run_eval, score_run
from datalyst.llm import ReplayModel
from datalyst.tasks import Task, write_tasks

FORMATS = {"count": "@count[number] where number is an integer.", "r": "@r[value] rounded to two decimals."}
RAW = ["<answer>@57</answer>", "<answer>-0.83</answer>"]  # right values, wrong form
REFORMATTED = ["@count[57]", "@r[-0.83]"]


@pytest.fixture
def tasks_file(tmp_path, examples_dir):
    tasks = [
        Task(id="1", question="How many?", format=FORMATS["count"], judge="dabench", answer={"count": "57"}),
        Task(id="2", question="Which r?", format=FORMATS["r"], judge="dabench", answer={"r": "-0.83"}),
    ]
    path = tmp_path / "tasks.jsonl"
    write_tasks([t.model_copy(update={"files": [str(examples_dir / "sales.csv")]}) for t in tasks], path)
    return path


def config(tasks_file, **changes) -> EvalConfig:
    settings = {
        "bench": "tasks",
        "bench_path": str(tasks_file),
        "model": "replay",
        "trials": 1,
        "agent": AgentConfig(sampling=EVAL_SAMPLING, max_turns=2),
        "reformat_model": "reformatter",
    }
    return EvalConfig(**{**settings, **changes})


def test_raw_and_reformatted_figures_side_by_side(tmp_path, tasks_file):
    out = tmp_path / "run"
    reformatter = ReplayModel(REFORMATTED, spec="reformatter")
    report = run_eval(config(tasks_file), out, ReplayModel(RAW), reformat_model=reformatter, progress=False)
    [dialect] = report.dialects
    assert dialect.rates.pass_at_1.value == 0.0  # the agent's own answers, as written
    raw, reformatted = dialect.dabench["raw"], dialect.dabench["reformatted"]
    assert raw.official["accuracy_by_question"] == 0.0 and raw.rates.pass_at_1.value == 0.0
    assert reformatted.official["accuracy_by_question"] == 1.0 and reformatted.rates.pass_at_1.value == 1.0
    assert sorted(messages[1].content for messages, _ in reformatter.calls) == ["-0.83", "@57"]  # the raw answers
    assert all(params.temperature == 0.0 for _, params in reformatter.calls)
    verdicts = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    assert [(v["score"], v["reformatted_score"]) for v in verdicts] == [(0.0, 1.0), (0.0, 1.0)]
    stored = [json.loads(line) for line in (out / "reformatted.jsonl").read_text().splitlines()]
    assert {(r["trajectory_id"], r["model"], r["response"], r["reformatted"]) for r in stored} == {
        ("1#0", "reformatter", "@57", "@count[57]"),
        ("2#0", "reformatter", "-0.83", "@r[-0.83]"),
    }
    markdown = (out / "report.md").read_text()
    assert "| datamind | raw | 0.0 [0.0, 0.0] |" in markdown
    assert "| datamind | reformatted (official protocol) | 100.0 [100.0, 100.0] |" in markdown
    assert "| datamind | reformatted (official protocol) | official | 1.0000 | 1.0000 | 1.0000 |" in markdown
    assert "by reformatter" in markdown


def test_stored_reformats_are_reused_and_another_model_reformats_again(tmp_path, tasks_file):
    out = tmp_path / "run"
    run_eval(config(tasks_file), out, ReplayModel(RAW), reformat_model=ReplayModel(REFORMATTED), progress=False)
    again = score_run(out)  # no model needed: every answer is reformatted already
    assert again.dialects[0].dabench["reformatted"].rates.pass_at_1.value == 1.0
    resumed = ReplayModel([])
    run_eval(config(tasks_file), out, ReplayModel([]), reformat_model=resumed, progress=False)
    assert resumed.calls == []
    other = config(tasks_file, reformat_model="other")  # a scoring setting: the run folder accepts it
    with pytest.raises(ConfigError, match=r"2 DABench answers .* not reformatted yet"):
        run_eval(other, out, ReplayModel([]), progress=False)
    report = run_eval(other, out, ReplayModel([]), reformat_model=ReplayModel(["@count[1]", "@r[1]"]), progress=False)
    assert report.dialects[0].dabench["reformatted"].rates.pass_at_1.value == 0.0
    assert len((out / "reformatted.jsonl").read_text().splitlines()) == 4


def test_the_agents_own_model_reformats_by_default_and_runs_without_reformatting_report_raw_only(tmp_path, tasks_file):
    model = ReplayModel([*RAW, *REFORMATTED])
    report = run_eval(config(tasks_file, reformat_model="replay"), tmp_path / "own", model, progress=False)
    assert report.dialects[0].dabench["reformatted"].rates.pass_at_1.value == 1.0 and model.remaining == 0
    plain = run_eval(config(tasks_file, reformat_model=None), tmp_path / "raw", ReplayModel(RAW), progress=False)
    assert list(plain.dialects[0].dabench) == ["raw"]
    assert "answers were not reformatted" in (tmp_path / "raw" / "report.md").read_text()
