"""``datalyst curate``: the commands a user runs, end to end with a scripted model and the real sandbox."""

from __future__ import annotations

import json

import pytest

from datalyst.agent import read_trajectories, to_messages
from datalyst.tasks import Task, read_tasks, write_tasks

SCRIPT = [
    "<think>Count the regions.</think>\n<code>\n```python\nimport pandas as pd\n"
    "print(pd.read_csv('sales.csv')['region'].nunique())\n```\n</code>",
    "<think>There are 4.</think>\n<answer>@regions[4]</answer>",
]


def sampled_and_judged(datalyst, replay_spec, tmp_path, examples_dir):
    tasks = tmp_path / "tasks.jsonl"
    sales = str(examples_dir / "sales.csv")
    write_tasks([
        Task(id="v", question="How many regions?", format="@regions[value]", answer={"regions": "4"}, judge="dabench",
             files=[sales], category="Counting"),
        Task(id="o", question="How many regions are there?", format="@regions[value]", judge="dabench", files=[sales]),
        Task(id="x", question="Unused", files=[sales]),
    ], tasks)  # fmt: skip
    run = tmp_path / "run"
    spec = replay_spec(SCRIPT, per_turn=True)
    done = datalyst("curate", "sample", str(tasks), "--out", str(run), "--model", spec, "--n", "2", "--limit", "2",
                    "--seed", "1", "--concurrency", "2", "--knowledge")  # fmt: skip
    assert done.returncode == 0, done.stderr
    trajectories = read_trajectories(run / "samples.jsonl")
    assert len(trajectories) == 4 and all(t.answer == "@regions[4]" for t in trajectories)
    counting = [t for t in trajectories if t.task.category == "Counting"]
    assert counting and all("A workflow that suits counting questions" in t.guidance for t in counting)
    assert json.loads((run / "run.json").read_text())["n"] == 2

    done = datalyst("curate", "judge", str(run))
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 2 and all(v["passed"] for v in verdicts)
    assert "rescued by reflection: 0" in done.stderr

    again = datalyst("curate", "sample", str(tasks), "--out", str(run), "--model", spec, "--n", "3")
    assert again.returncode == 2 and "other settings" in again.stderr
    return run


def test_sample_then_judge(datalyst, replay_spec, tmp_path, examples_dir):
    assert (sampled_and_judged(datalyst, replay_spec, tmp_path, examples_dir) / "verdicts.jsonl").exists()


def test_sample_as_ask_runs_the_agent_keeps_its_format_check(datalyst, replay_spec, tmp_path, examples_dir):
    tasks = tmp_path / "tasks.jsonl"
    write_tasks([Task(id="v", question="How many regions?", format="@regions[value]", answer={"regions": "4"},
                      judge="dabench", files=[str(examples_dir / "sales.csv")])], tasks)  # fmt: skip
    # the turn after the format check begins with the answer keyword and the first part asked (<answer>@regions[)
    script = [SCRIPT[0], "<think>There are 4.</think>\n<answer>4 regions</answer>", "4]</answer>"]
    run = tmp_path / "run"
    done = datalyst("curate", "sample", str(tasks), "--out", str(run), "--model", replay_spec(script, per_turn=True),
                    "--n", "1", "--analyst")  # fmt: skip
    assert done.returncode == 0, done.stderr
    agent = json.loads((run / "run.json").read_text())["agent"]
    assert agent["last_call"] and agent["format_check"] and agent["repeat_guard"]
    (trajectory,) = read_trajectories(run / "samples.jsonl")
    assert trajectory.answer == "@regions[4]" and "@regions" in (trajectory.turns[1].format_check or "")
    assert any(m.content == trajectory.turns[1].format_check for m in to_messages(trajectory))


@pytest.mark.model
def test_filter_and_report_after_judging(datalyst, replay_spec, tmp_path, examples_dir):
    run = sampled_and_judged(datalyst, replay_spec, tmp_path, examples_dir)
    done = datalyst("curate", "filter", str(run), "--strategy", "con-select", "--mix", "datarus")
    assert done.returncode == 0, done.stderr
    kept = [json.loads(line) for line in (run / "kept.jsonl").read_text().splitlines()]
    assert len(kept) == 2 and {c["stratum"] for c in kept} == {"success"}
    assert "select: 2 left (not_chosen 2)" in done.stderr and "kept 2 of 4 trajectories" in done.stderr
    done = datalyst("curate", "report", str(run), "--sample", "3")
    assert done.returncode == 0, done.stderr
    assert "| select | 2 | not_chosen 2 |" in done.stdout and (run / "report" / "index.html").exists()
    bad = datalyst("curate", "filter", str(run), "--mix", "success=half")
    assert bad.returncode == 2 and "--mix" in bad.stderr
    done = datalyst("curate", "export", str(run), "--format", "examples", "--format", "sharegpt", "--format", "verl")
    assert done.returncode == 0, done.stderr
    exports = run / "exports"
    assert len((exports / "examples.jsonl").read_text().splitlines()) == 2
    assert "sharegpt" in json.loads((exports / "dataset_info.json").read_text())["datalyst"]["formatting"]
    manifest = json.loads((exports / "export.manifest.json").read_text())
    assert manifest["failed_turns"] is False
    assert manifest["tokenizer"] == "embedded:small" and [e["format"] for e in manifest["exports"]] == [
        "examples", "sharegpt", "verl"]  # fmt: skip
    bad = datalyst("curate", "export", str(run), "--format", "csv")
    assert bad.returncode == 2 and "unknown --format csv" in bad.stderr


def test_band_writes_the_tasks_solved_at_a_rate_in_it(datalyst, replay_spec, tmp_path, examples_dir):
    run = sampled_and_judged(datalyst, replay_spec, tmp_path, examples_dir)  # v: verified, right 2 times in 2
    done = datalyst("curate", "band", str(run), "--out", str(tmp_path / "rl.jsonl"))
    assert done.returncode == 0 and "0 tasks right in 20% to 80%" in done.stderr, done.stderr
    done = datalyst("curate", "band", str(run), "--out", str(tmp_path / "rl.jsonl"), "--high", "1")
    assert done.returncode == 0 and [task.id for task in read_tasks(tmp_path / "rl.jsonl")] == ["v"]
    bad = datalyst("curate", "band", str(run), "--out", str(tmp_path / "rl.jsonl"), "--low", "0.9", "--high", "0.5")
    assert bad.returncode == 2 and "--low 0.9 is above --high 0.5" in bad.stderr


def test_judge_refuses_a_folder_that_is_not_a_run(datalyst, tmp_path):
    done = datalyst("curate", "judge", str(tmp_path))
    assert done.returncode == 2 and "is not a curation run" in done.stderr


def test_expert_then_judge(datalyst, tmp_path, examples_dir):
    sales = str(examples_dir / "sales.csv")
    solution = "import pandas as pd\n\ndf = pd.read_csv('sales.csv')\nprint(f\"@regions[{df['region'].nunique()}]\")\n"
    tasks = tmp_path / "tasks.jsonl"
    write_tasks([
        Task(id="r", question="How many regions?", format="@regions[value] where value is an integer.",
             answer={"regions": "4"}, judge="dabench", files=[sales], category="Counting", solution=solution),
        Task(id="q", question="Which region sells most?", files=[sales]),  # no solution: not playable
    ], tasks)  # fmt: skip
    run = tmp_path / "run"
    done = datalyst("curate", "expert", str(tasks), "--out", str(run), "--dialect", "jupiter")
    assert done.returncode == 0, done.stderr
    assert "1 tasks (1 without a usable solution)" in done.stderr
    [trajectory] = read_trajectories(run / "samples.jsonl")
    assert trajectory.model == "expert" and trajectory.answer.strip().endswith("@regions[4]")
    assert json.loads((run / "run.json").read_text())["expert"]["error_share"] == 0.25
    done = datalyst("curate", "judge", str(run))
    assert done.returncode == 0 and "ground_truth: 1 of 1 tasks passed" in done.stderr


def test_synthesized_sequences_then_correction_chains(datalyst, replay_spec, tmp_path):
    problems = tmp_path / "sequences.jsonl"
    done = datalyst("synth", "sequences", "--out", str(problems), "--count", "3", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "3 tasks from 3 of 3 sequences" in done.stderr
    # a worker that always prints 0 fails every problem: each chain makes its first program and one correction
    worker = replay_spec(["Start simple.\n```python\nprint(0)\n```"] * 2, per_turn=True)
    run = tmp_path / "chains"
    done = datalyst("curate", "sequences", str(problems), "--out", str(run), "--model", worker, "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "3 chains: 0 (0.0%) passed at once, 0 (0.0%) after corrections" in done.stderr
    chains = read_trajectories(run / "samples.jsonl")
    assert len(chains) == 3 and all(len(chain.turns) == 2 for chain in chains)
    assert all(chain.turns[0].observation.startswith("Your program fails a test case.") for chain in chains)
    refused = datalyst("curate", "sequences", str(tmp_path / "none.jsonl"), "--out", str(run), "--model", worker)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
