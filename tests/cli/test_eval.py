"""``datalyst eval run | score | compare`` as a user runs them."""

from __future__ import annotations

import json

from datalyst.eval import REFORMATTER
from datalyst.judge import dabench_dir

SCRIPT = [
    "<think>look</think>\n<code>\n```python\nprint(2 + 2)\n```\n</code>",
    "<think>done</think>\n<answer>@mean_fare[34.65]</answer>",
]


def test_eval_run_then_compare(datalyst, replay_spec, tmp_path, dabench_tables):
    tasks = tmp_path / "tasks.jsonl"
    lines = (dabench_dir() / "labels.jsonl").read_text().splitlines()
    labels = {record["id"]: record for record in map(json.loads, lines)}
    with tasks.open("w") as f:  # question 0 (answerable by the script) and question 5 (not)
        for line in (dabench_dir() / "questions.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record["id"] in (0, 5):
                f.write(json.dumps({
                    "id": record["id"], "question": record["question"], "format": record["format"],
                    "files": [str(dabench_tables / record["file_name"])], "judge": "dabench",
                    "answer": dict(labels[record["id"]]["common_answers"]), "level": record["level"],
                }) + "\n")  # fmt: skip
    runs = []
    for name, dialects in (("a", ["datamind"]), ("b", ["datamind", "jupiter"])):
        out = tmp_path / name
        model = replay_spec(SCRIPT, per_turn=True)
        args = ["--bench", "tasks", "--bench-path", str(tasks), "--model", model, "--out", str(out)]
        for dialect in dialects:
            args += ["--dialect", dialect]
        if name == "b":  # the scaffold's options reach the agent's settings
            args += ["--preload", "--repeat-guard", "--short-tracebacks", "--column-hints", "--last-call"]
            args += ["--max-observation-chars", "1500", "--max-file-info-chars", "2000"]
        done = datalyst("eval", "run", *args, "--trials", "2", "--reformat-model", model)
        assert done.returncode == 0, done.stderr
        assert (
            "| datamind | 4/4 | 50.0 [" in done.stdout and "rollout" not in done.stdout
        )  # question 0 right in both trials, question 5 wrong
        runs.append(out)
    agent = json.loads((runs[1] / "config.json").read_text())["agent"]
    flags = ("preload", "repeat_guard", "short_tracebacks", "column_hints", "last_call")
    assert all(agent[flag] for flag in flags)
    assert (agent["max_observation_chars"], agent["max_file_info_chars"]) == (1500, 2000)
    report = json.loads((runs[1] / "report.json").read_text())
    assert [d["dialect"] for d in report["dialects"]] == ["datamind", "jupiter"]
    (runs[0] / "report.md").unlink()
    reported = datalyst("eval", "report", str(runs[0]))
    assert reported.returncode == 0, reported.stderr
    failures = datalyst("eval", "failures", str(runs[0]), "--json")  # question 5 answered with question 0's name
    assert failures.returncode == 0, failures.stderr
    assert json.loads(failures.stdout) == {"format": 2}
    assert "| datamind | 4/4 | 50.0 [" in reported.stdout and (runs[0] / "report.md").is_file()
    compared = datalyst("eval", "compare", str(runs[0]), str(runs[1]))
    assert compared.returncode == 0, compared.stderr
    assert "datamind (2 shared tasks)" in compared.stdout and "not significant" in compared.stdout
    by_level = datalyst("eval", "compare", str(runs[0]), str(runs[1]), "--by", "level", "--json")
    assert by_level.returncode == 0, by_level.stderr
    groups = json.loads(by_level.stdout)["dialects"][0]["groups"]
    assert sum(g["n_tasks"] for g in groups.values()) == 2 and set(groups) <= {"easy", "medium", "hard"}
    by_format = datalyst("eval", "compare", str(runs[0]), str(runs[1]), "--by", "format")
    assert "pass@1 by format:" in by_format.stdout and "csv (2): A 50.0  B 50.0" in by_format.stdout
    assert report["dialects"][0]["by_format"]["csv"]["n_tasks"] == 2
    within = datalyst(
        "eval", "compare", str(runs[1]), str(runs[1]), "--dialect-a", "datamind", "--dialect-b", "jupiter"
    )
    assert within.returncode == 0, within.stderr
    assert "datamind -> jupiter (2 shared tasks)" in within.stdout
    pooled = datalyst("eval", "pool", str(runs[0]), str(runs[0]))  # the same tasks twice: refused in one line
    assert pooled.returncode == 2 and "is in both" in pooled.stderr and "Traceback" not in pooled.stderr
    missing = datalyst("eval", "compare", str(runs[0]), str(runs[1]), "--dialect-a", "datarus")
    assert missing.returncode == 2 and "no 'datarus' trajectories" in missing.stderr


def test_eval_score_prints_the_official_metrics_as_json(datalyst, tmp_path, dabench_tables):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        json.dumps({"id": 0, "response": "The mean is @mean_fare[34.65]."}) + "\n"
        + json.dumps({"id": 5, "response": "@correlation_coefficient[0.5]"}) + "\n"
    )  # fmt: skip
    done = datalyst("eval", "score", "--bench", "dabench", "--responses", str(responses), "--json")
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    assert metrics["accuracy_by_question"] == 0.5 and metrics["accuracy_by_sub_question"] == 0.5
    assert metrics["proportional_accuracy"] == 0.5 and metrics["n_scored"] == 2
    assert [v["id"] for v in metrics["verdicts"]] == [0, 5]
    strict = json.loads(datalyst("eval", "score", "--responses", str(responses), "--json", "--strict").stdout)
    assert strict["view"] == "strict" and strict["accuracy_by_question"] == round(1 / 257, 4)


def test_eval_errors_are_one_line(datalyst, tmp_path):
    done = datalyst("eval", "run", "--bench", "nope", "--out", str(tmp_path / "x"), "--model", "replay:/none")
    assert done.returncode == 2 and "unknown benchmark" in done.stderr and "Traceback" not in done.stderr
    done = datalyst("eval", "run", "--bench", "dabench", "--out", str(tmp_path / "y"), "--temperature", "-1")
    assert done.returncode == 2 and "--temperature" in done.stderr and not (tmp_path / "y").exists()
    done = datalyst("eval", "score", "--responses", str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2 and "cannot read" in done.stderr
    done = datalyst("eval", "report", str(tmp_path))
    assert done.returncode == 2 and "no config.json" in done.stderr
    (tmp_path / "config.json").write_text('{"bench": "dabench"}')  # damaged or from another tool
    done = datalyst("eval", "report", str(tmp_path))
    assert done.returncode == 2 and "is not a run's settings" in done.stderr and "Traceback" not in done.stderr
    done = datalyst("eval", "run", "--bench", "dabench", "--model", "replay:/none", "--out", str(tmp_path))
    assert done.returncode == 2 and "is not a run's settings" in done.stderr and "Traceback" not in done.stderr
    done = datalyst("eval", "compare", str(tmp_path), str(tmp_path))
    assert done.returncode == 2 and "no outcomes.jsonl" in done.stderr


def test_eval_report_uses_the_runs_own_judge_model(datalyst, replay_spec, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "m", "question": "Which region sells most?", "judge": "llm", "answer": "West"}))
    judge = tmp_path / "judge.jsonl"
    judge.write_text(json.dumps("<thought>Same region.</thought><score>1</score>") + "\n")
    out = tmp_path / "run"
    agent = replay_spec(["<think>known</think>\n<answer>The West region</answer>"])
    args = ["--bench", "tasks", "--bench-path", str(tasks), "--model", agent, "--out", str(out), "--trials", "1"]
    done = datalyst("eval", "run", *args, "--judge-model", f"replay:{judge}")
    assert done.returncode == 0, done.stderr
    assert "| datamind | 1/1 | 100.0 [" in done.stdout
    reported = datalyst("eval", "report", str(out))  # the judge comes from the run's config.json
    assert reported.returncode == 0, reported.stderr
    assert "| datamind | 1/1 | 100.0 [" in reported.stdout


def _question_zero(tmp_path, dabench_tables):
    record = json.loads((dabench_dir() / "questions.jsonl").read_text().splitlines()[0])
    tasks = tmp_path / "zero.jsonl"
    tasks.write_text(json.dumps({
        "id": 0, "question": record["question"], "format": record["format"], "judge": "dabench",
        "files": [str(dabench_tables / record["file_name"])], "answer": {"mean_fare": "34.65"},
    }) + "\n")  # fmt: skip
    return tasks


def test_eval_run_reformats_dabench_answers_with_the_reformat_model(datalyst, replay_spec, tmp_path, dabench_tables):
    tasks = _question_zero(tmp_path, dabench_tables)
    # Every conversation follows the script: the agent answers a bare value at its first turn; the
    # reformat conversation holds that answer as one assistant turn, so it gets the second line.
    model = replay_spec(["<answer>34.65</answer>", "@mean_fare[34.65]"], per_turn=True)
    args = ["--bench", "tasks", "--bench-path", str(tasks), "--model", model, "--trials", "1"]
    args += ["--reformat-model", model]
    done = datalyst("eval", "run", *args, "--out", str(tmp_path / "a"))
    assert done.returncode == 0, done.stderr
    assert "| datamind | raw | 0.0 [" in done.stdout
    assert "| datamind | reformatted (official protocol) | 100.0 [" in done.stdout
    plain = datalyst("eval", "run", *args, "--out", str(tmp_path / "b"), "--no-reformat")
    assert plain.returncode == 0, plain.stderr
    assert "| datamind | raw | 0.0 [" in plain.stdout and "reformatted (official" not in plain.stdout
    (tmp_path / "script.jsonl").unlink()  # the replay model's file: loading it now would fail
    reported = datalyst("eval", "report", str(tmp_path / "a"))  # every answer is reformatted: no model is loaded
    assert reported.returncode == 0, reported.stderr
    assert "| datamind | reformatted (official protocol) | 100.0 [" in reported.stdout


def test_one_fixed_reformatter_is_the_default_and_loads_only_for_an_answer_to_reformat(datalyst, replay_spec, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "1", "question": "Six times seven?", "answer": 42}) + "\n")
    model = replay_spec(["<answer>42</answer>"], per_turn=True)
    args = ["--bench", "tasks", "--bench-path", str(tasks), "--model", model, "--trials", "1"]
    done = datalyst("eval", "run", *args, "--out", str(tmp_path / "run"))  # nothing DABench-judged: no reformatter
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "config.json").read_text())["reformat_model"] == REFORMATTER


def test_eval_score_reformats_responses_on_request(datalyst, replay_spec, tmp_path, dabench_tables):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": 0, "response": "The mean fare is 34.65."}) + "\n")
    reformatter = replay_spec(["@mean_fare[34.65]"])
    args = ["eval", "score", "--responses", str(responses), "--reformat-model", reformatter]
    done = datalyst(*args, "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["reformat_model"] == reformatter
    assert figures["raw"]["accuracy_by_question"] == 0.0 and figures["reformatted"]["accuracy_by_question"] == 1.0
    printed = datalyst(*args)
    assert printed.returncode == 0, printed.stderr
    assert "raw: official view" in printed.stdout and "reformatted (official protocol): official view" in printed.stdout


def test_a_run_cached_from_another_reads_their_shared_start_from_the_cache(datalyst, replay_spec, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t", "question": "What is 2 + 2?", "answer": "4", "judge": "rule"}) + "\n")
    model = replay_spec([SCRIPT[0], "<think>done</think>\n<answer>4</answer>"], per_turn=True)
    common = ["--bench", "tasks", "--bench-path", str(tasks), "--model", model, "--trials", "2"]
    first = datalyst("eval", "run", *common, "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    cached = datalyst("eval", "cache", str(tmp_path / "a"), "--to", str(tmp_path / "cache"))
    assert cached.returncode == 0 and "4 new calls of replay:" in cached.stdout, cached.stderr  # 2 trials x 2 turns
    cache = ["--completion-cache", str(tmp_path / "cache")]
    again = datalyst("eval", "run", *common, *cache, "--out", str(tmp_path / "b"))
    assert again.returncode == 0 and "completion cache: 4 calls found, 0 made" in again.stderr, again.stderr
    assert "`s / answer` is not a speed" in (tmp_path / "b" / "report.md").read_text()
    hinted = datalyst("eval", "run", *common, *cache, "--last-call", "--out", str(tmp_path / "c"))
    assert hinted.returncode == 0 and "completion cache: 4 calls found" in hinted.stderr  # nothing ended unanswered
    other = datalyst("eval", "cache", str(tmp_path / "a"), str(tmp_path / "c"), "--to", str(tmp_path / "cache"))
    assert other.returncode == 0 and f"{tmp_path / 'a'}: 0 new calls" in other.stdout, other.stderr
