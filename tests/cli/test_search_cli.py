"""``datalyst search``: collect trees with a scripted model and the real sandbox, then value data from them."""

from __future__ import annotations

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
    assert "1 trees, 1 with an answer, 4 states; 1 found a right answer" in done.stderr
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
