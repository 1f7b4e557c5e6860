"""``datalyst search``: collect trees with a scripted model and the real sandbox, then value data from them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from datalyst.agent import Trajectory, read_trajectories
from datalyst.llm import SamplingParams
from datalyst.search import Tree
from datalyst.tasks import Task, write_tasks
from datalyst.train import read_value_examples

SCRIPT = [
    "Thought: Count.\nAction:\n```python\nimport pandas as pd\n"
    "print(pd.read_csv('sales.csv')['region'].nunique())\n```",
    "Thought: Done.\nFormatted answer: @regions[4]",
    "Thought: Done.\nFormatted answer: @regions[5]",
    "Thought: Done.\nFormatted answer: @regions[6]",
]


def test_collect_trees_then_write_their_value_data(datalyst, replay_spec, tmp_path, examples_dir):
    tasks = tmp_path / "tasks.jsonl"
    write_tasks([Task(id="v", question="How many regions?", answer={"regions": "4"}, judge="dabench",
                      files=[str(examples_dir / "sales.csv")])], tasks)  # fmt: skip
    trees = tmp_path / "trees"
    done = datalyst("search", "run", str(tasks), "--out", str(trees), "--model", replay_spec(SCRIPT, per_turn=True),
                    "--collect", "--simulations", "3", "--expansions", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 trees, 1 with an answer, 4 states; 1 found a right answer, 0 only a partly right one" in " ".join(
        done.stderr.split()
    )
    tree = Tree.load(trees / "v#0.json")
    assert tree.finished and tree.nodes[1].turn.observation.strip() == "4"
    assert sorted(node.estimate for node in tree.candidates()) == [-1.0, 1.0, 1.0]

    done = datalyst("search", "value-data", str(trees), "--out", str(tmp_path / "values.jsonl"))
    assert done.returncode == 0, done.stderr
    examples = read_value_examples(tmp_path / "values.jsonl")
    assert [example.value for example in examples] == [0.0, 1.0, 1.0, -1.0]  # the cell: (0 + 1 - 1) / 3

    refused = datalyst("search", "run", str(tasks), "--out", str(trees), "--model", replay_spec(SCRIPT, per_turn=True),
                       "--collect", "--simulations", "5", "--expansions", "2")  # fmt: skip
    assert refused.returncode == 2 and "other settings" in refused.stderr


def test_collecting_needs_tasks_with_answers(datalyst, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    write_tasks([Task(id="open", question="Anything?")], tasks)
    done = datalyst("search", "run", str(tasks), "--out", str(tmp_path / "trees"), "--collect")
    assert done.returncode == 2 and "tasks have none (first: open)" in done.stderr


def test_the_answered_paths_of_collected_trees_are_curated_like_samples(datalyst, replay_spec, tmp_path, examples_dir):
    tasks = tmp_path / "tasks.jsonl"
    write_tasks([Task(id="v", question="How many regions?", answer={"regions": "4"}, judge="dabench",
                      files=[str(examples_dir / "sales.csv")])], tasks)  # fmt: skip
    trees, run = tmp_path / "trees", tmp_path / "run"
    done = datalyst("search", "run", str(tasks), "--out", str(trees), "--model", replay_spec(SCRIPT, per_turn=True),
                    "--collect", "--simulations", "3", "--expansions", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = datalyst("curate", "trees", str(trees), "--out", str(run))
    assert done.returncode == 0, done.stderr
    assert "3 answered paths added from 1 finished trees" in done.stderr
    paths = read_trajectories(run / "samples.jsonl")
    tree = Tree.load(trees / "v#0.json")
    assert [path.id for path in paths] == [f"v#{node.id}" for node in tree.candidates()]
    assert [turn.text for turn in paths[0].turns] == [node.turn.text for node in tree.path(tree.candidates()[0])[1:]]
    again = datalyst("curate", "trees", str(trees), "--out", str(run))
    assert again.returncode == 0 and "0 answered paths added" in again.stderr

    done = datalyst("curate", "judge", str(run), "--reflect", "1")  # a search has no round to sample again
    assert done.returncode == 0 and "ground_truth: 1 of 1 tasks passed" in done.stderr, done.stderr
    done = datalyst("curate", "filter", str(run), "--strategy", "non-select")
    assert done.returncode == 0, done.stderr
    report = datalyst("curate", "report", str(run))
    assert report.returncode == 0, report.stderr
    spent = json.loads((run / "report" / "report.json").read_text())["spent"]
    kept = len((run / "kept.jsonl").read_text().splitlines())
    assert kept >= 1 and spent["completion_tokens"] == tree.cost.completion_tokens
    assert spent["per_kept"]["completion_tokens"] == round(tree.cost.completion_tokens / kept, 1)
    assert "| completion tokens |" in report.stdout


def test_trees_of_two_models_are_not_one_run(datalyst, tmp_path):
    trees = tmp_path / "trees"
    trees.mkdir()
    for name, model in (("a#0", "m1"), ("b#0", "m2")):
        tree = Tree.start(Trajectory(id=name, task=Task(id=name[0], question="?"), dialect="jupiter", model=model,
                                     sampling=SamplingParams(), system_prompt="", first_message="",
                                     termination="max_turns", started_at=datetime.now(UTC)))  # fmt: skip
        tree.finished = True
        tree.save(trees / f"{name}.json")
    done = datalyst("curate", "trees", str(trees), "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and "trees of 2 setups" in done.stderr
