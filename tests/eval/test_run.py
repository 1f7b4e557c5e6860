"""Evaluation runs end to end: real sandbox, scripted model, DABench tasks; resuming, reports, refusals."""

from __future__ import annotations

import json

import pytest

from datalyst.agent import AgentConfig, read_trajectories
from datalyst.errors import ConfigError
from datalyst.eval import EVAL_SAMPLING, EvalConfig, run_eval, score_run
from datalyst.eval._run import prepare_run
from datalyst.llm import ReplayModel
from datalyst.paths import benchmarks_dir
from datalyst.tasks import Task, load_bird, load_dabench, load_humaneval, write_tasks

# Every conversation follows this script: one cell, then the right answer to DABench question 0
# (mean fare 34.65), which is wrong for every other question.
SCRIPT = [
    "<think>read it</think>\n<code>\n```python\nprint(1 + 1)\n```\n</code>",
    "<think>done</think>\n<answer>@mean_fare[34.65]</answer>",
]


def config(**changes) -> EvalConfig:
    settings = {
        "bench": "dabench",
        "subset": 3,
        "model": "replay",
        "dialects": ["datamind"],
        "trials": 2,
        "agent": AgentConfig(sampling=EVAL_SAMPLING, max_turns=4),
        "concurrency": 2,
    }
    return EvalConfig(**{**settings, **changes})


@pytest.fixture
def finished_run(tmp_path, dabench_tables):
    out = tmp_path / "run"
    report = run_eval(config(), out, ReplayModel(SCRIPT, per_turn=True), progress=False)
    return out, report


def test_a_run_stores_every_trajectory_and_reports(finished_run):
    out, report = finished_run
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == 3 and {t["level"] for t in tasks} == {"easy", "medium", "hard"}
    trajectories = read_trajectories(out / "trajectories" / "datamind.jsonl")
    assert len(trajectories) == 6 and all(t.answer == "@mean_fare[34.65]" for t in trajectories)
    [dialect] = report.dialects
    assert dialect.behaviour.n_trajectories == 6 and dialect.behaviour.mean_turns == 2.0
    assert dialect.behaviour.void_turn_rate == 0.0 and dialect.behaviour.answered_rate == 1.0
    verdicts = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    assert len(verdicts) == 6
    # Only question 0 asks for mean_fare; the seed-0 subset of three questions does not contain it.
    assert all(v["score"] == 0.0 and v["detail"].startswith("wrong: ") for v in verdicts)
    assert dialect.rates.pass_at_1.value == 0.0 and len(dialect.failures) == 6
    assert list(dialect.dabench) == ["raw"]  # this run does not reformat
    assert dialect.dabench["raw"].official == {
        "accuracy_by_question": 0.0,
        "accuracy_by_sub_question": 0.0,
        "proportional_accuracy": 0.0,
    }
    for page in dialect.failures:
        assert (out / page).read_text().lower().startswith("<!doctype html>")
    markdown = (out / "report.md").read_text()
    assert (
        "| datamind | 6/6 | 0.0 [0.0, 0.0] |" in markdown
        and "## pass@1 by level" in markdown
        and dialect.failures[0] in markdown
    )
    assert (out / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "report.json").read_text())["n_tasks"] == 3


def test_an_interrupted_run_resumes_without_redoing_finished_trajectories(finished_run):
    out, _ = finished_run
    path = out / "trajectories" / "datamind.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:4]) + "\n" + lines[4][:50])  # two lost, the last one torn mid-write
    model = ReplayModel(SCRIPT, per_turn=True)
    report = run_eval(config(concurrency=1), out, model, progress=False)  # concurrency may change
    assert len(model.calls) == 4  # two trajectories of two turns each
    assert report.dialects[0].behaviour.n_trajectories == 6


def test_a_resumed_run_retries_failed_trajectories_and_reports_the_latest_attempt(finished_run):
    out, _ = finished_run
    path = out / "trajectories" / "datamind.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0] |= {"termination": "failed", "error": "model server down", "answer": None, "turns": []}
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    model = ReplayModel(SCRIPT, per_turn=True)
    report = run_eval(config(), out, model, progress=False)
    assert len(model.calls) == 2  # the failed trajectory, run again
    assert len(path.read_text().splitlines()) == 7  # the failed attempt stays on record
    assert report.dialects[0].behaviour.n_trajectories == 6
    assert report.dialects[0].behaviour.terminations == {"answer": 6}
    verdicts = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    assert len(verdicts) == 6 and all(v["status"] != "unanswered" for v in verdicts)


def test_a_run_folder_refuses_other_settings(finished_run):
    out, _ = finished_run
    with pytest.raises(ConfigError, match="trials"):
        run_eval(config(trials=3), out, ReplayModel(SCRIPT, per_turn=True), progress=False)


def test_a_run_kept_without_its_tasks_file_resumes_and_rescores(finished_run):
    out, report = finished_run
    kept = (out / "tasks.jsonl").read_text()
    (out / "tasks.jsonl").unlink()  # results/eval keeps a run's config and trajectories only
    assert score_run(out).dialects == report.dialects and (out / "tasks.jsonl").read_text() == kept
    (out / "tasks.jsonl").unlink()
    model = ReplayModel(SCRIPT, per_turn=True)
    assert run_eval(config(), out, model, progress=False).dialects == report.dialects and not model.calls


def test_a_split_is_recorded_and_excludes_a_subset(tmp_path, dabench_tables):
    tasks = prepare_run(config(subset=None, split="test"), tmp_path / "run")
    assert len(tasks) == 197 and json.loads((tmp_path / "run" / "config.json").read_text())["split"] == "test"
    with pytest.raises(ValueError, match="give --split or --subset, not both"):
        config(split="dev")


def test_rescoring_gives_the_same_report(finished_run):
    out, report = finished_run
    again = score_run(out)
    assert again.dialects == report.dialects


def test_the_right_answer_scores(tmp_path, dabench_tables):
    question_zero = [t for t in load_dabench() if t.id == "0"]
    tasks_file = tmp_path / "zero.jsonl"
    write_tasks(question_zero, tasks_file)
    out = tmp_path / "run"
    report = run_eval(
        config(bench="tasks", bench_path=str(tasks_file), subset=None, trials=1),
        out,
        ReplayModel(SCRIPT, per_turn=True),
        progress=False,
    )
    assert report.dialects[0].rates.pass_at_1.value == 1.0 and report.dialects[0].failures == []


def test_bird_and_tablebench_runs_use_their_own_judges(tmp_path, bird_mini):
    first = load_bird(bird_mini)[0]
    answer = f"<think>count them</think>\n<answer>\n```sql\n{first.answer_sql}\n```\n</answer>"
    report = run_eval(
        config(bench="bird", bench_path=str(bird_mini), subset=None, trials=1),
        tmp_path / "bird",
        ReplayModel([answer], per_turn=True),
        progress=False,
    )
    rates = report.dialects[0].rates
    assert rates.n_tasks == 12 and rates.pass_at_1.value == pytest.approx(1 / 12)  # only the first query is right

    example = benchmarks_dir() / "tablebench-example" / "inference_results"
    if not example.is_dir():
        pytest.skip("TableBench example not found")
    [jsonl] = example.glob("*.jsonl")
    report = run_eval(
        config(bench="tablebench", bench_path=str(jsonl), subset=6, stratify_by="category", trials=1),
        tmp_path / "tablebench",
        ReplayModel(["<answer>Final Answer: 1062</answer>"], per_turn=True),
        progress=False,
    )
    [dialect] = report.dialects
    assert dialect.rates.n_tasks == 6
    assert set(dialect.by_category) == {"DataAnalysis", "FactChecking", "NumericalReasoning"}
    official = dialect.tablebench_official
    assert set(official) == {
        "FactChecking EM", "NumericalReasoning EM", "DataAnalysis Mix_Metric", "Overall Mix_Metric", "Parse@1",
    }  # fmt: skip
    assert official["Parse@1"] == 100.0 and 0.0 <= official["Overall Mix_Metric"] <= 100.0
    markdown = (tmp_path / "tablebench" / "report.md").read_text()
    assert "## TableBench metrics" in markdown and "| dialect | done | pass@1 | mean turns |" in markdown  # one trial
    assert "by level" not in markdown  # TableBench questions have no level


def test_shards_share_a_run_and_nothing_runs_twice(tmp_path, dabench_tables):
    out = tmp_path / "run"
    for index in (0, 1):
        run_eval(config(), out, ReplayModel(SCRIPT, per_turn=True), shard=(index, 2), progress=False)
    files = sorted(p.name for p in (out / "trajectories").iterdir() if p.suffix == ".jsonl")
    assert files == ["datamind.shard0of2.jsonl", "datamind.shard1of2.jsonl"]
    assert len(read_trajectories(out / "trajectories" / "datamind.shard0of2.jsonl")) == 4  # tasks 0 and 2, 2 trials
    model = ReplayModel(SCRIPT, per_turn=True)
    report = run_eval(config(), out, model, progress=False)
    assert model.calls == [] and report.dialects[0].behaviour.n_trajectories == 6
    with pytest.raises(ConfigError, match="shard 2/2"):
        run_eval(config(), out, model, shard=(2, 2), progress=False)


def test_humaneval_runs_in_the_program_dialect_with_the_official_estimator(tmp_path):
    path = benchmarks_dir() / "humaneval" / "HumanEval.jsonl.gz"
    if not path.is_file():
        pytest.skip("HumanEval not found")
    first = load_humaneval(path)[:3]
    three = tmp_path / "three.jsonl"
    rows = [{"task_id": t.id, "prompt": t.question, "canonical_solution": t.solution, "test": t.check,
             "entry_point": t.entry_point} for t in first]  # fmt: skip
    three.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # the whole of problem 0's function, in a fence: right for problem 0 only
    answer = f"It checks every pair.\n```python\n{first[0].question}{first[0].solution}```\n"
    report = run_eval(
        config(bench="humaneval", bench_path=str(three), subset=None, dialects=["program"]),
        tmp_path / "humaneval",
        ReplayModel([answer], per_turn=True),
        progress=False,
    )
    [dialect] = report.dialects
    assert dialect.rates.pass_at_1.value == pytest.approx(1 / 3)
    assert dialect.humaneval_official == {"pass@1": pytest.approx(1 / 3)}  # 2 trials: pass@10 is not reported
    assert dialect.behaviour.mean_turns == 1.0 and dialect.behaviour.answered_rate == 1.0
    markdown = (tmp_path / "humaneval" / "report.md").read_text()
    assert "## HumanEval (official unbiased pass@k over the trials)" in markdown


def test_our_own_tasks_with_dabench_answers_get_the_dabench_figures(tmp_path, examples_dir):
    tasks = tmp_path / "tasks.jsonl"
    sales = str(examples_dir / "sales.csv")
    write_tasks([Task(id=f"synth-{name}", question="Mean fare?", format="@mean_fare[value]", judge="dabench",
                      answer={"mean_fare": value}, files=[sales]) for name, value in (("a1", "34.65"), ("b2", "1"))],
                tasks)  # fmt: skip
    report = run_eval(config(bench="tasks", bench_path=str(tasks), subset=None, trials=1), tmp_path / "run",
                      ReplayModel(SCRIPT, per_turn=True), progress=False)  # fmt: skip
    figures = report.dialects[0].dabench["raw"]
    assert figures.rates.pass_at_1.value == 0.5 and figures.strict["accuracy_by_question"] == 0.5
