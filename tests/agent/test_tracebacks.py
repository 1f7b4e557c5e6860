"""Short tracebacks: a failing cell's own frames and its error, the library frames and chained causes left out."""

from __future__ import annotations

import asyncio

from datalyst.agent import Agent, AgentConfig
from datalyst.agent._tracebacks import compact_traceback
from datalyst.llm import ReplayModel
from datalyst.tasks import Task

CHAINED = """Traceback (most recent call last):
  File "/usr/lib/python3/pandas/core/indexes/base.py", line 3816, in get_loc
    return self._engine.get_loc(casted_key)
KeyError: 'Revenue'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<cell-2>", line 5, in <module>
    print(f(df).sum())
           ^^^^^
  File "<cell-1>", line 3, in f
    return x['Revenue']
           ~^^^^^^^^^^^
  File "/usr/lib/python3/pandas/core/frame.py", line 4330, in __getitem__
    indexer = self.columns.get_loc(key)
  File "/usr/lib/python3/pandas/core/indexes/base.py", line 3823, in get_loc
    raise KeyError(key) from err
KeyError: 'Revenue'
"""


def test_only_the_cells_frames_and_the_error_are_kept():
    assert compact_traceback(CHAINED) == (
        "Traceback (most recent call last):\n"
        '  File "<cell-2>", line 5, in <module>\n    print(f(df).sum())\n           ^^^^^\n'
        "  File \"<cell-1>\", line 3, in f\n    return x['Revenue']\n           ~^^^^^^^^^^^\n"
        "  (2 frames inside libraries left out)\n"
        "KeyError: 'Revenue'"
    )


def test_a_syntax_error_keeps_its_pointer_and_text_without_a_traceback_is_unchanged():
    syntax = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3.11/ast.py", line 50, in parse\n'
        "    return compile(source, filename, mode, flags,\n"
        "  File \"<cell-2>\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed\n"
    )
    assert compact_traceback(syntax).splitlines()[1:] == [
        '  File "<cell-2>", line 1',
        "    print(1",
        "         ^",
        "  (1 frame inside libraries left out)",
        "SyntaxError: '(' was never closed",
    ]
    assert compact_traceback("ZeroDivisionError: division by zero") == "ZeroDivisionError: division by zero"


def test_the_model_sees_the_short_traceback_and_the_record_keeps_the_whole_one(examples_dir):
    cell = "Thought: Sum.\nAction:\n```python\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['Revenue'])\n```"
    task = Task(id="1", question="Total revenue?", files=[str(examples_dir / "sales.csv")])
    config = AgentConfig(dialect="jupiter", short_tracebacks=True, max_turns=1)
    [turn] = asyncio.run(Agent(ReplayModel([cell], per_turn=True), config).arun(task)).turns
    assert "inside libraries left out" in turn.observation and "site-packages" not in turn.observation
    assert turn.observation.endswith("KeyError: 'Revenue'") and "site-packages" in turn.result.error.traceback
