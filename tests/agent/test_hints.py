"""Hints under a failing cell that named a column the files do not have."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.agent import Agent, AgentConfig
from datalyst.agent._hints import column_hint
from datalyst.llm import ReplayModel
from datalyst.sandbox import CellError
from datalyst.tasks import Task

COLUMNS = ["DATE TIME", " RELHUM", "total_vaccinations", "country", "LoanAmount", "id"]


@pytest.mark.parametrize(
    ("ename", "evalue", "hint"),
    [
        ("KeyError", "'RELHUM'", "No column is named 'RELHUM'; the closest columns: ' RELHUM'."),
        (
            "KeyError",
            "\"['total_vaccinations_administered'] not in index\"",
            "the closest columns: 'total_vaccinations'",
        ),
        (
            "KeyError",
            "'Column not found: loan_amount'",
            "No column is named 'loan_amount'; the closest columns: 'LoanAmount'.",
        ),
        ("AttributeError", "'DataFrame' object has no attribute 'Country'", "the closest columns: 'country'."),
        ("KeyError", "'date_time'", "the closest columns: 'DATE TIME'."),
    ],
)
def test_a_missing_column_gets_the_closest_real_ones(ename, evalue, hint):
    assert hint in column_hint(CellError(ename=ename, evalue=evalue), COLUMNS)


@pytest.mark.parametrize(
    ("ename", "evalue"),
    [
        ("KeyError", "'data'"),  # a dict key, nothing like a column
        ("KeyError", "'identity'"),  # 'id' is too short to count as held in it
        ("KeyError", "'country'"),  # a real column (the KeyError came from elsewhere)
        ("AttributeError", "'numpy.int64' object has no attribute 'idxmax'"),
        ("ValueError", "could not convert string to float: 'country'"),
    ],
)
def test_nothing_is_said_when_no_column_was_meant(ename, evalue):
    assert column_hint(CellError(ename=ename, evalue=evalue), COLUMNS) is None


def test_the_agent_shows_the_hint_only_when_asked(examples_dir):
    task = Task(id="t", question="Total revenue?", files=[str(examples_dir / "sales.csv")])
    code = "import pandas as pd\nprint(pd.read_csv('sales.csv')['Revenue'].sum())"
    script = [f"Thought: Sum it.\nAction:\n```python\n{code}\n```"]
    seen = {}
    for hints in (False, True):
        config = AgentConfig(dialect="jupiter", max_turns=1, column_hints=hints)
        trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True), config).arun(task))
        seen[hints] = trajectory.turns[0].observation
    assert "KeyError: 'Revenue'" in seen[False] and "closest" not in seen[False]
    assert seen[True].startswith(seen[False]) and seen[True].endswith("the closest columns: 'revenue'.")
