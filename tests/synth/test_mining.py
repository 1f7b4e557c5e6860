"""Notebook mining with recorded model replies: every check against the notebook, verification in the sandbox,
the stage's funnel, and a round trip through a notebook the agent exported."""

from __future__ import annotations

import asyncio
import json
import shutil

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_output
from notebook_helpers import write_notebook

from datalyst.agent import Agent, AgentConfig, to_notebook
from datalyst.llm import ReplayModel
from datalyst.synth._mining import (
    MiningOptions,
    make_notebook_tasks,
    mine_notebook,
    read_json,
    step_in_notebook,
    value_in_outputs,
    with_definitions,
)
from datalyst.synth._notebooks import AddressMap, Cell, Notebook, NotebookFilters, read_notebook, screen_notebook
from datalyst.tasks import Task, read_tasks

LOAD = "import pandas as pd\ndf = pd.read_csv('~/work/sales.csv')"
MEAN = "print(round(df['units'].mean(), 3))"


@pytest.fixture
def screened(tmp_path, examples_dir):
    folder = tmp_path / "repo" / "sales"
    folder.mkdir(parents=True)
    shutil.copy(examples_dir / "sales.csv", folder)
    frame = pd.read_csv(examples_dir / "sales.csv")
    mean = f"{round(frame['units'].mean(), 3)}\n"
    path = write_notebook(folder / "analysis.ipynb", [LOAD, "print(df.shape)", MEAN],
                          outputs=[[], [new_output("stream", name="stdout", text=f"{frame.shape}\n")],
                                   [new_output("stream", name="stdout", text=mean)]])  # fmt: skip
    result = screen_notebook(read_notebook(path, tmp_path), AddressMap(), NotebookFilters(min_code_lines=3))
    assert not isinstance(result, str), result
    return result, mean.strip()


def replies(mean: str, **changes: object) -> list[str]:
    steps = [
        {"thought": "Load the sales.", "code": "import pandas as pd\ndf = pd.read_csv('sales.csv')", "output": ""},
        {"thought": "Average the units.", "code": MEAN, "output": mean},
        {"thought": "That is the answer.", "label": f"@mean_units[{mean}]"},
    ]
    script = {
        "score": {"score": 4, "reason": "A clean analysis."},
        "extract": [{"task": "What is the mean of units in sales.csv?", "answer": mean,
                     "concepts": ["Summary Statistics"], "difficulty": "easy"}],
        "constrain": {"constraints": "Use every row; round to 3 decimals.",
                      "format": "@mean_units[value] where value has 3 decimals", "label": f"@mean_units[{mean}]"},
        "solve": steps,
        "review": dict.fromkeys(("aligned", "verifiable", "correct", "complete", "clear"), "yes"),
    }  # fmt: skip
    script.update(changes)
    return ["Here you are:\n```json\n" + json.dumps(value) + "\n```" for value in script.values()]


def mine(screened_item, outputs: list[str]):
    model = ReplayModel(outputs)
    return asyncio.run(mine_notebook(screened_item, model, MiningOptions())), model


def test_a_notebook_becomes_a_verified_task_with_its_solution(screened):
    item, mean = screened
    (tasks, dropped), model = mine(item, replies(mean))
    [task] = tasks
    assert dropped == {} and task.answer == {"mean_units": mean} and task.judge == "dabench"
    assert task.category == "Summary Statistics" and task.level == "easy" and task.files == [str(item.files[0])]
    assert task.lineage.verified is True and task.lineage.origin == str(item.notebook.path)
    assert task.solution.startswith("# %% [markdown]\n# Load the sales.\n\n# %%\nimport pandas as pd\n")
    assert "df = pd.read_csv('sales.csv')" in task.solution  # the author's path became the local name
    assert "print(round(df['units'].mean(), 3))" in model.calls[1][0][0].content  # the models read the notebook


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"score": {"score": 2}}, "low_score"),
        ({"extract": []}, "no_tasks"),
        ({"extract": [{"task": "Plot units.", "answer": "", "concepts": ["Visualization"]}]}, "visualization"),
        ({"extract": [{"task": "Mean?", "answer": "12345.6", "concepts": ["Summary Statistics"]}]},
         "answer_not_in_outputs"),
        ({"constrain": {"constraints": "", "format": "", "label": "the mean"}}, "no_label"),
        ({"constrain": {"constraints": "", "format": "", "label": "@mean_units[99.5]"}}, "label_not_in_outputs"),
        ({"constrain": {"constraints": "", "format": "", "label": " ".join(f"@n{i}[1]" for i in range(6))}},
         "label_too_long"),  # more than 5 names
        ({"constrain": {"constraints": "", "format": "", "label": f"@mean_units[{'1' * 150}]"}}, "label_too_long"),
        ({"solve": [{"thought": "x", "code": "print(df['units'].median())", "output": "20"}]}, "invented_step"),
        ({"review": {"aligned": "yes", "verifiable": "no"}}, "review_failed"),
    ],
)  # fmt: skip
def test_each_check_drops_with_its_reason(screened, changes, reason):
    item, mean = screened
    (tasks, dropped), _ = mine(item, replies(mean, **changes))
    assert tasks == [] and dropped == {reason: 1}


def test_a_chart_is_only_a_side_concept_of_a_task_with_a_text_answer(screened):
    item, mean = screened
    draft = {"task": "Mean units?", "answer": mean, "concepts": ["Summary Statistics", "Visualization"]}
    (tasks, dropped), _ = mine(item, replies(mean, extract=[draft]))
    assert dropped == {} and tasks[0].concepts == ["Summary Statistics", "Visualization"]


def test_a_solution_that_skips_the_loading_gets_the_notebooks_own_cell_and_reproduces(screened):
    item, mean = screened
    skipping = [{"thought": "Average the units.", "code": MEAN, "output": mean}]
    (tasks, dropped), _ = mine(item, replies(mean, solve=skipping))
    assert dropped == {} and tasks[0].lineage.verified is True
    assert tasks[0].solution == (f"# %%\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n\n"
                                 f"# %% [markdown]\n# Average the units.\n\n# %%\n{MEAN}\n")  # fmt: skip


def test_the_cells_a_solution_needs_are_found_in_the_syntax_tree():
    sources = ["%matplotlib inline\nimport pandas as pd", "df = pd.read_csv('a.csv')", "x = 5", "df = df.dropna()",
               "total = sum(v for v in df.a)\nprint(total)", "print(x)"]  # fmt: skip
    cells = tuple(Cell(source, f"out {n}", n) for n, source in enumerate(sources, start=1))
    notebook = Notebook(path=None, repository="r", cells=cells, text="")
    steps = with_definitions([("Sum.", sources[4], "out 5")], notebook)
    assert steps == [("", "import pandas as pd", "out 1"), ("", sources[1], "out 2"), ("", sources[3], "out 4"),
                     ("Sum.", sources[4], "out 5")]  # fmt: skip
    assert [code for _, code, _ in with_definitions([("", sources[5], "")], notebook)] == [sources[2], sources[5]]
    assert with_definitions([("Load.", sources[1], "")], notebook)[0][1] == "import pandas as pd"


def test_a_label_that_does_not_reproduce_is_kept_unverified(screened):
    item, mean = screened
    wrong = [{"thought": "Load.", "code": "import pandas as pd\ndf = pd.read_csv('sales.csv')", "output": ""},
             {"thought": "Shape.", "code": "print(df.shape)", "output": ""}]  # fmt: skip
    (tasks, _), _ = mine(item, replies(mean, solve=wrong))
    assert tasks[0].lineage.verified is False


def test_the_checks_against_the_notebook(screened):
    item, mean = screened
    notebook = item.notebook
    assert value_in_outputs(mean, "x\n" + mean) and value_in_outputs("24.07", "24.066667")
    assert value_in_outputs("0.35", "r = 0.3521") and not value_in_outputs("0.36", "r = 0.3521")
    assert value_in_outputs("[1, 2]", "1 and 2") and not value_in_outputs("[1, 3]", "1 and 2")
    assert value_in_outputs("-4", "-4.2") and not value_in_outputs("", "anything")
    assert step_in_notebook(MEAN, mean, notebook, ["sales.csv"])
    assert step_in_notebook("print(df.shape)", "", notebook, [])
    assert step_in_notebook("df = pd.read_csv('sales.csv')", "", notebook, ["sales.csv"])
    assert not step_in_notebook("print(df.tail())", "", notebook, [])
    assert step_in_notebook('print( round(df["units"].mean(),3) )', mean, notebook, [])  # other quotes and spaces
    assert not step_in_notebook("print(round(df['unit'].mean(), 3))", mean, notebook, [])  # another column
    assert not step_in_notebook(MEAN, "42.0", notebook, [])
    assert read_json('Sure: {"score": 4} and more') == {"score": 4} and read_json("no json") is None
    assert read_json("[1, 2] then {") == [1, 2]


def test_the_stage_counts_its_funnel_and_resumes(screened, tmp_path):
    _, mean = screened
    out = tmp_path / "mined.jsonl"
    (tmp_path / "repo" / "broken.ipynb").write_text("not a notebook")
    short = MiningOptions(filters=NotebookFilters(min_code_lines=3))
    funnel, summary = make_notebook_tasks([tmp_path / "repo"], out, ReplayModel(replies(mean)), options=short,
                                          progress=False)  # fmt: skip
    assert funnel.model_dump() == {"found": 2, "dropped": {"unreadable": 1}, "capped": 0, "mined": 1}
    assert summary.tasks == 1 and read_tasks(out)[0].lineage.verified
    _, summary = make_notebook_tasks([tmp_path / "repo"], out, ReplayModel([]), options=short, progress=False)
    assert summary.tasks == 1  # nothing asked twice


def test_a_notebook_the_agent_exported_gives_back_its_task_and_answer(tmp_path, examples_dir):
    """The round trip: run a task, export the trajectory as a notebook, mine it, recover question and answer."""
    original = Task(id="t", question="What is the total of units?", format="@total_units[value]", judge="dabench",
                    files=[str(examples_dir / "sales.csv")])  # fmt: skip
    script = [
        "Thought: load it.\nAction:\n```python\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"
        "print(df['units'].sum())\n```",
        "Thought: done.\nFormatted answer: @total_units[0]",
    ]
    agent = Agent(ReplayModel(script, per_turn=True), AgentConfig(dialect="jupiter"))
    trajectory = asyncio.run(agent.arun(original))
    total = trajectory.turns[0].result.stdout.strip()
    folder = tmp_path / "exported" / "t"
    folder.mkdir(parents=True)
    shutil.copy(examples_dir / "sales.csv", folder)
    nbformat.write(to_notebook(trajectory), folder / "t.ipynb")
    steps = [{"thought": "Sum the units.", "code": script[0].split("```python\n")[1].split("```")[0], "output": total}]
    extracted = [{"task": original.question, "answer": total, "concepts": ["Summary Statistics"]}]
    recorded = replies(
        total,
        extract=extracted,
        solve=steps,
        constrain={"constraints": "", "format": original.format, "label": f"@total_units[{total}]"},
    )
    short = MiningOptions(filters=NotebookFilters(min_code_lines=1))
    funnel, _ = make_notebook_tasks([tmp_path / "exported"], tmp_path / "mined.jsonl", ReplayModel(recorded),
                                    options=short, progress=False)  # fmt: skip
    [mined] = read_tasks(tmp_path / "mined.jsonl")
    assert funnel.mined == 1 and mined.question == original.question
    assert mined.answer == {"total_units": total} and mined.lineage.verified
