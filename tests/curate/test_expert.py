"""The offline expert: synthesized solutions played as real trajectories, clean and with a mistake then its fix."""

from __future__ import annotations

import asyncio
import json
from random import Random

import numpy as np
import pandas as pd
import pytest

from datalyst.agent import DIALECTS, AgentConfig, Step, Termination, Trajectory, get_dialect, read_trajectories, rollout
from datalyst.curate._expert import (
    EXPERT_SPEC,
    ExpertAgent,
    ExpertOptions,
    _Play,
    _read_facts,
    expert_tasks,
)
from datalyst.curate._mistakes import (
    DTYPE,
    MISSING_IMPORT,
    MISTAKES,
    WRONG_COLUMN,
    WRONG_FILE,
    Cell,
    Facts,
    Mistake,
    dtype_slip,
    missing_import,
    wrong_column,
    wrong_file,
)
from datalyst.curate._solution import compute_cells
from datalyst.errors import ConfigError
from datalyst.judge import judge_for
from datalyst.tasks import Asked, Task

SLOPE = """import pandas as pd

df = pd.read_csv('sales.csv')
import numpy as np

pair = df[['units', 'revenue']].dropna()
slope, intercept = np.polyfit(pair['units'], pair['revenue'], 1)
print(f"@slope[{slope:.4f}]")
"""
SALES_COLUMNS = ("date", "region", "product", "units", "unit_price", "revenue")


@pytest.fixture(scope="module")
def slope_task(examples_dir) -> Task:
    frame = pd.read_csv(examples_dir / "sales.csv")[["units", "revenue"]].dropna()
    slope = np.polyfit(frame["units"], frame["revenue"], 1)[0]  # the gold answer, computed here without the solution
    return Task(
        id="sales-slope",
        question="What is the least-squares slope of revenue on units?",
        format="@slope[value] where value is the slope, rounded to 4 decimal places.",
        files=[str(examples_dir / "sales.csv")],
        answer={"slope": f"{slope:.4f}"},
        judge="dabench",
        category="Impact Analysis",
        solution=SLOPE,
    )


@pytest.fixture
def scores_task(tmp_path) -> Task:
    path = tmp_path / "scores.tsv"
    pd.DataFrame({"region": ["a", "a", "b", "b", "c"], "score": [1.0, 3.0, 5.0, 7.0, None]}).to_csv(
        path, sep="\t", index=False
    )
    solution = (
        "import pandas as pd\n\ndf = pd.read_csv('scores.tsv', sep='\\t')\n"
        "means = df.groupby('region')['score'].mean()\nprint(f\"@highest_region[{means.idxmax()}]\")\n"
    )
    return Task(
        id="scores-top",
        question="Which region has the highest average score?",
        format="@highest_region[value] where value is the region.",
        files=[str(path)],
        answer={"highest_region": "b"},
        judge="dabench",
        category="Ranking",
        solution=solution,
    )


def play(task: Task, dialect: str = "datamind", **options) -> Trajectory:
    agent = ExpertAgent(AgentConfig(dialect=dialect), ExpertOptions(**options))
    return asyncio.run(agent.arun(task))


def right(trajectory: Trajectory) -> bool:
    return asyncio.run(judge_for(trajectory.task).ajudge(trajectory.answer or "")).correct


def assert_every_turn_reparses(trajectory: Trajectory) -> None:
    dialect = get_dialect(trajectory.dialect)
    for turn in trajectory.turns:
        step = Step(thought=turn.thought, code=turn.code, answer=turn.answer)
        assert turn.raw == turn.text and dialect.render(step) == turn.text
        assert dialect.parse(turn.text) == step and turn.thought


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_clean_episode_looks_at_the_data_computes_and_answers_right(slope_task, dialect):
    trajectory = play(slope_task, dialect, error_share=0.0)
    look, *cells, answer = trajectory.turns
    assert trajectory.termination == Termination.ANSWER and trajectory.model == EXPERT_SPEC
    assert look.code.startswith("import pandas as pd\n\ndf = pd.read_csv('sales.csv')")
    assert "df.shape" in look.code and "df.info()" in look.code and "'units'" in look.observation
    # the look names no column, in its code or its thought: their spelling is what it is there to find out
    assert "'units'" not in look.code and "'revenue'" not in look.code and "`units`" not in look.thought
    assert cells and all(turn.result.ok for turn in [look, *cells])
    assert "np.polyfit" in cells[-1].code and "@slope[" in cells[-1].observation
    assert answer.kind == "answer" and answer.answer == cells[-1].observation.splitlines()[-1]
    assert right(trajectory)
    assert_every_turn_reparses(trajectory)


@pytest.mark.parametrize(
    ("kind", "errors"),
    [
        (WRONG_COLUMN, {"KeyError"}),
        (MISSING_IMPORT, {"NameError"}),
        (DTYPE, {"AttributeError", "IntCastingNaNError"}),
        (WRONG_FILE, {"FileNotFoundError"}),
    ],
)
def test_an_error_episode_shows_the_real_traceback_then_the_fixed_cell(slope_task, kind, errors):
    trajectory = play(slope_task, "jupiter", error_share=1.0, mistakes=(kind,))
    failed = [turn for turn in trajectory.turns if turn.result is not None and not turn.result.ok]
    assert len(failed) == 1
    broken, fixed = failed[0], trajectory.turns[failed[0].index + 1]
    assert broken.result.error.ename in errors and "Traceback (most recent call last)" in broken.observation
    assert broken.result.error.ename in fixed.thought and fixed.result.ok and fixed.code != broken.code
    assert trajectory.termination == Termination.ANSWER and right(trajectory)
    assert_every_turn_reparses(trajectory)


def test_a_mistake_that_does_not_fail_is_carried_on_without_a_fix(slope_task, monkeypatch):
    def harmless(cell: Cell, facts: Facts, rng: Random) -> Mistake | None:
        return Mistake(WRONG_COLUMN, cell.code + "\nprint('checked')", "never said")

    monkeypatch.setitem(MISTAKES, WRONG_COLUMN, harmless)
    clean = play(slope_task, error_share=0.0)
    trajectory = play(slope_task, error_share=1.0, mistakes=(WRONG_COLUMN,))
    assert all(turn.result is None or turn.result.ok for turn in trajectory.turns)
    assert "checked" in trajectory.turns[1].observation
    assert len(trajectory.turns) == len(clean.turns) and "never said" not in " ".join(
        t.thought for t in trajectory.turns
    )
    assert right(trajectory)


def test_a_solution_that_fails_in_the_sandbox_is_a_failed_trajectory_not_a_made_up_fix(slope_task, tmp_path):
    broken = slope_task.model_copy(update={"id": "broken", "solution": SLOPE.replace("'revenue'", "'missing'")})
    out = tmp_path / "samples.jsonl"
    summary = asyncio.run(rollout([broken], ExpertAgent(), out, progress=False))
    [trajectory] = read_trajectories(out)
    assert summary.terminations == {Termination.FAILED: 1}
    assert "a cell of its solution failed in the sandbox (KeyError" in trajectory.error


def test_a_rollout_of_the_expert_resumes_without_writing_again(slope_task, scores_task, tmp_path):
    out = tmp_path / "samples.jsonl"
    agent = ExpertAgent(AgentConfig(dialect="datarus"))
    first = asyncio.run(rollout([slope_task, scores_task], agent, out, concurrency=2, progress=False))
    written = out.read_text()
    again = asyncio.run(rollout([slope_task, scores_task], agent, out, concurrency=2, progress=False))
    assert first.written == 2 and again.written == 0 and again.skipped == 2 and out.read_text() == written
    assert all(right(t) for t in read_trajectories(out))
    assert json.loads((tmp_path / "samples.jsonl.manifest.json").read_text())["model"] == EXPERT_SPEC


def test_tasks_without_a_usable_solution_are_not_offered(slope_task):
    bare = slope_task.model_copy(update={"id": "bare", "solution": None})
    unloaded = slope_task.model_copy(update={"id": "unloaded", "solution": "print('@x[1]')\n"})
    follow_up = slope_task.model_copy(update={"id": "follow-up", "earlier": [Asked(question="How many rows?")]})
    playable, skipped = expert_tasks([bare, slope_task, unloaded, follow_up])
    assert playable == [slope_task] and set(skipped) == {"bare", "unloaded", "follow-up"}
    assert "has no solution" in skipped["bare"] and "`df`" in skipped["unloaded"]
    assert "one question per conversation" in skipped["follow-up"]
    with pytest.raises(ConfigError, match="has no solution"):
        play(bare)


def test_thoughts_and_cells_vary_with_the_seed_and_repeat_with_it(slope_task):
    def first_step(seed: int) -> Step:
        return next(_Play(slope_task, 0, ExpertOptions(seed=seed)).steps())

    steps = [first_step(seed) for seed in range(8)]
    assert len({step.thought for step in steps}) >= 3 and len({step.code for step in steps}) >= 3
    assert first_step(3) == steps[3]


def test_the_computation_splits_at_an_intermediate_result_it_prints():
    body = "east = df[df['region'] == 'East']\nvalue = east['revenue'].mean()\nprint(f\"@mean[{value:.2f}]\")"
    splits = {len(compute_cells(body, Random(seed), 2, frozenset({"df", "pd"}))) for seed in range(10)}
    assert splits == {1, 2}
    first, second = next(
        cells for seed in range(10) if len(cells := compute_cells(body, Random(seed), 2, frozenset({"df"}))) == 2
    )
    assert first[0].code.endswith("print(east.shape)") and first[1] == "east" and first[0].fresh_df
    assert second[0].code.startswith("value = ") and "east" in second[0].defined and second[1] is None
    assert len(compute_cells(body, Random(0), 1, frozenset())) == 1


def test_facts_are_read_from_what_the_look_printed():
    stdout = (
        "60 rows, 3 columns\ncolumns: ['units', 'unit price', 'region']\n<class 'pandas.DataFrame'>\n"
        "RangeIndex: 60 entries, 0 to 59\nData columns (total 3 columns):\n"
        " #   Column      Non-Null Count  Dtype  \n---  ------      --------------  -----  \n"
        " 0   units       59 non-null     float64\n 1   unit price  60 non-null     float64\n"
        " 2   region      58 non-null     str    \ndtypes: float64(2), str(1)\nmemory usage: 1.5 KB\n"
        "   units  unit price region\n0   30.0         2.5   East\n"
    )
    facts = _read_facts(stdout, ("sales.csv",))
    assert facts.rows == 60 and facts.columns == ("units", "unit price", "region")
    assert facts.dtypes == {"units": "float64", "unit price": "float64", "region": "str"}
    assert facts.missing == {"units": 1, "unit price": 0, "region": 2}
    assert _read_facts("(5, 2)\n[1, 'a']", ()).rows == 5


FACTS = Facts(
    files=("sales.csv",),
    columns=SALES_COLUMNS,
    dtypes={"units": "float64", "region": "str", "revenue": "float64"},
    missing={"units": 1, "region": 1, "revenue": 1},
)
COMPUTE = Cell("import numpy as np\n\nx = np.log(df['units'])\nprint(x.mean())", frozenset({"df", "pd"}), fresh_df=True)


def test_each_mistake_breaks_a_cell_it_applies_to():
    rng = Random(0)
    column = wrong_column(COMPUTE, FACTS, rng)
    assert column.kind == WRONG_COLUMN and "df['units']" not in column.code and "`units`" in column.cause
    assert missing_import(COMPUTE, FACTS, rng).code == "x = np.log(df['units'])\nprint(x.mean())"
    slip = dtype_slip(COMPUTE, FACTS, rng)
    assert slip.code.startswith("import numpy as np\n\ndf['units'] = df['units']") and slip.intent
    look = Cell("import pandas as pd\n\ndf = pd.read_csv('sales.csv')\nprint(df.shape)")
    misspelt = wrong_file(look, FACTS, rng)
    assert "'sales.csv'" not in misspelt.code and "`sales.csv`" in misspelt.cause


def test_mistakes_return_none_where_they_do_not_apply():
    rng = Random(0)
    unknown = Facts(files=("sales.csv",))
    assert wrong_column(COMPUTE, unknown, rng) is None  # the look has not shown the columns yet
    assert wrong_column(Cell("print(df.shape)", frozenset({"df"})), FACTS, rng) is None
    imported = Cell(COMPUTE.code, frozenset({"df", "np"}), fresh_df=True)
    assert missing_import(imported, FACTS, rng) is None  # an earlier cell imported numpy
    assert missing_import(Cell("print(df['units'].mean())", frozenset({"df"})), FACTS, rng) is None
    text_only = Cell("print(df['region'].str.upper())", frozenset({"df"}), fresh_df=True)
    assert dtype_slip(text_only, FACTS, rng) is None  # a text column without numbers to cast
    assert dtype_slip(Cell(COMPUTE.code, COMPUTE.defined, fresh_df=False), FACTS, rng) is None  # df was changed
    assert wrong_file(COMPUTE, FACTS, rng) is None  # the cell opens no file


def test_a_column_mistake_fails_before_the_cell_changes_an_earlier_variable():
    cell = Cell("df = df[df['units'] > 5]\nvalue = df['revenue'].mean()", frozenset({"df"}), fresh_df=True)
    broken = {wrong_column(cell, FACTS, Random(seed)).code.splitlines()[1] for seed in range(12)}
    assert broken == {"value = df['revenue'].mean()"}  # only 'units', read before df is filtered, is misspelt


def test_about_the_error_share_of_trajectories_plan_a_mistake(slope_task):
    planned = [bool(_Play(slope_task, trial, ExpertOptions()).kinds) for trial in range(400)]
    assert 0.18 < sum(planned) / len(planned) < 0.32
    assert not any(_Play(slope_task, trial, ExpertOptions(error_share=0.0)).kinds for trial in range(20))
    with pytest.raises(ValueError, match="unknown mistakes"):
        ExpertOptions(mistakes=("typo",))
