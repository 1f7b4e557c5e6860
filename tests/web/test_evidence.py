"""The line of output an answer card shows as the value that decides the answer, and the cell that printed it."""

from __future__ import annotations

from datalyst.agent import ActionKind, Agent, Termination, Turn
from datalyst.llm import ReplayModel
from datalyst.sandbox import CellError, ExecResult
from datalyst.tasks import Task
from datalyst.web._conversations import evidence


def trajectory(answer: str | None, *outputs: str | None):
    """A run whose cells printed ``outputs`` (None: a cell that failed), then answered."""
    turns = [
        Turn(index=i, raw="", text="", kind=ActionKind.CODE, code="...",
             result=ExecResult(stdout=out or "", error=None if out is not None else CellError(ename="E", evalue="")))
        for i, out in enumerate(outputs)
    ]  # fmt: skip
    turns.append(Turn(index=len(turns), raw="", text="", kind=ActionKind.ANSWER, answer=answer))
    fields = {"system_prompt": "", "first_message": "", "termination": Termination.ANSWER, "answer": answer}
    return Agent(ReplayModel([]), None).new_trajectory(Task(id="t", question="?"), 0, turns=turns, **fields)


def test_the_line_that_names_the_answer_and_gives_its_value_is_chosen():
    totals = "region\nEast     3772.18\nWest     4961.88\nName: revenue, dtype: float64\n"
    assert evidence(trajectory("West has the highest total revenue.", "60\n", totals)) == {
        "turn": 1,
        "line": "West     4961.88",
    }


def test_a_printed_number_counts_when_it_rounds_to_the_answer():
    found = evidence(trajectory("@correlation[0.42]", "r = 0.4213\np = 0.001\n", "done\n"))
    assert found == {"turn": 0, "line": "r = 0.4213"}
    assert evidence(trajectory("@mean[0.42]", "0.4\n")) is None  # coarser than the answer: not the same number


def test_failed_cells_and_answers_no_output_backs_have_no_evidence():
    assert evidence(trajectory("@total[12]", None, "nothing here\n")) is None
    assert evidence(trajectory(None, "12\n")) is None
