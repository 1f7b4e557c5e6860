"""``AgentConfig.preload``: the files loaded in the sandbox before the first turn, shown in the first message."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pandas as pd
import pytest

from datalyst.agent import Agent, AgentConfig, to_messages, to_notebook
from datalyst.agent import _agent as agent_module
from datalyst.agent._preload import preload_cell
from datalyst.llm import ReplayModel
from datalyst.tasks import Task

SHOW = "Thought: Use the frame.\nAction:\n```python\nprint(df.groupby('species')['mass'].mean().to_dict())\n```"


@pytest.fixture
def records_json(tmp_path):
    """A JSON object whose records sit under a key, beside metadata: a file small models read wrongly."""
    rows = [{"species": s, "island": i, "mass": m} for s, i, m in [("A", "x", 3.0), ("A", "y", 5.0), ("B", "x", 4.0)]]
    path = tmp_path / "penguins.json"
    path.write_text(json.dumps({"source": "field notes", "data": rows}))
    return path


def test_one_file_is_df_several_are_named_after_their_files_and_sqlite_is_left_to_its_helpers(tmp_path, records_json):
    (tmp_path / "sales 2024.csv").write_text("a,b\n1,2\n")
    (tmp_path / "Sales-2024.tsv").write_text("a\tb\n1\t2\n")
    sqlite3.connect(tmp_path / "shop.sqlite").execute("create table t (x int)").connection.close()
    assert "df = load_table('penguins.json')" in preload_cell([str(records_json)])
    cell = preload_cell([str(tmp_path / name) for name in ("sales 2024.csv", "Sales-2024.tsv", "shop.sqlite")])
    assert "df_sales_2024 = load_table('sales 2024.csv')" in cell
    assert "df_sales_2024_2 = load_table('Sales-2024.tsv')" in cell and "shop" not in cell
    assert preload_cell([str(tmp_path / "shop.sqlite")]) is None and preload_cell([]) is None


def test_every_sheet_of_a_workbook_is_a_frame_of_its_own(tmp_path, monkeypatch):
    path = tmp_path / "prices.xlsx"
    with pd.ExcelWriter(path) as workbook:
        for symbol, price in (("MSFT", 1.0), ("AAPL", 2.0)):
            pd.DataFrame({"date": ["2020-01-01", "2020-02-01"], "price": [price, price + 1]}).to_excel(
                workbook, sheet_name=symbol, index=False
            )
    cell = preload_cell([str(path)])
    assert "df_msft = load_table('prices.xlsx', 'MSFT')" in cell
    assert "df_aapl = load_table('prices.xlsx', 'AAPL')" in cell
    namespace: dict = {}
    monkeypatch.chdir(tmp_path)
    exec(cell, namespace)  # the agent runs it in the sandbox; here it only has to load the sheets
    assert namespace["df_aapl"]["price"].tolist() == [2.0, 3.0]


def test_the_model_starts_from_the_loaded_frame(records_json):
    task = Task(id="p", question="Mean mass by species?", files=[str(records_json)])
    agent = Agent(ReplayModel([SHOW, "Thought: Done.\nFormatted answer: A 4.0"], per_turn=True),
                  AgentConfig(dialect="jupiter", preload=True))  # fmt: skip
    trajectory = asyncio.run(agent.arun(task))
    assert "df = load_table('penguins.json')" in trajectory.setup_code
    assert trajectory.first_message.endswith("```\ndf: 3 rows x 3 columns")
    assert trajectory.turns[0].result.ok and trajectory.turns[0].observation.strip() == "{'A': 4.0, 'B': 4.0}"
    assert to_messages(trajectory)[1].content == trajectory.first_message  # what the model saw, exactly
    assert to_notebook(trajectory).cells[1].source == trajectory.setup_code

    async def restored() -> str:  # a rebuilt sandbox runs the setup first, so df is there again
        state = await agent.restore(trajectory)
        try:
            return (await (await state.sandbox.get()).arun_python("print(len(df))")).stdout
        finally:
            await state.sandbox.aclose()

    assert asyncio.run(restored()).strip() == "3"


def test_a_setup_that_fails_is_not_mentioned(records_json, monkeypatch):
    monkeypatch.setattr(agent_module, "preload_cell", lambda files: "raise ValueError('unreadable')")
    task = Task(id="p", question="How many rows?", files=[str(records_json)])
    agent = Agent(ReplayModel(["Thought: Done.\nFormatted answer: 3"], per_turn=True),
                  AgentConfig(dialect="jupiter", preload=True))  # fmt: skip
    trajectory = asyncio.run(agent.arun(task))
    assert trajectory.setup_code is None and "Already run" not in trajectory.first_message

    async def opening() -> str:
        state = await Agent(agent.model, AgentConfig(dialect="jupiter")).start(task)
        await state.sandbox.aclose()
        return state.trajectory.first_message

    assert asyncio.run(opening()) == trajectory.first_message
