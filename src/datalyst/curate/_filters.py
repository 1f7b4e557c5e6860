"""Rule filters on a trajectory's form: format compliance per dialect, answer length, and repetition.

Each is a :class:`~datalyst.curate._records.Check`; the linguistic one lives in ``_language``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from datalyst.agent import ActionKind, Termination, Trajectory, Turn, cell_key, get_dialect
from datalyst.curate._records import KEEP, Verdict
from datalyst.judge import extract_sql
from datalyst.tasks import Task, extract_answers

NO_ANSWER = "no_answer"
VOID_TURN = "void_turn"
UNPARSABLE_TURN = "unparsable_turn"
ANSWER_FORMAT = "answer_format"
NO_FIGURE = "no_figure"
ANSWER_TOO_LONG = "answer_too_long"
REPEATED_CELL = "repeated_cell"
REPEATED_ERROR = "repeated_error"

MAX_ANSWER_TOKENS = 1024
"""DataMind's limit on the final answer's length."""

_QUERY = re.compile(r"(?:select|with)\b", re.IGNORECASE)


class FormatCheck:
    """The trajectory ends with an answer in the task's format, every turn reads back as recorded, and a chart the
    task asks for was drawn."""

    name = "format"
    reasons = (NO_ANSWER, VOID_TURN, UNPARSABLE_TURN, ANSWER_FORMAT, NO_FIGURE)

    def check(self, trajectory: Trajectory) -> Verdict:
        if trajectory.termination != Termination.ANSWER or trajectory.answer is None:
            return Verdict(reason=NO_ANSWER, detail=f"ended by {trajectory.termination.value}")
        dialect = get_dialect(trajectory.dialect)
        for turn in trajectory.turns:
            if turn.is_void:
                return Verdict(reason=VOID_TURN, detail=f"turn {turn.index}")
            step = dialect.parse(turn.text)
            if (step.kind, step.code, step.answer) != (turn.kind, turn.code, turn.answer):
                return Verdict(
                    reason=UNPARSABLE_TURN,
                    detail=f"turn {turn.index} ({turn.kind.value}) reads back as {step.kind.value} in {dialect.name}",
                )
        if problem := answer_format_problem(trajectory.task, trajectory.answer):
            return Verdict(reason=ANSWER_FORMAT, detail=problem)
        if trajectory.task.figure and not any(turn.figures for turn in trajectory.turns):
            return Verdict(reason=NO_FIGURE, detail="the task asks for a chart and no cell drew one")
        return KEEP


def answer_format_problem(task: Task, answer: str) -> str | None:
    """Why ``answer`` does not have ``task``'s answer format, or None when it does.

    A format naming ``@name[...]`` parts needs each of them with a value that is not the format's own
    placeholder (unless the gold answer is that very text); a SQL task needs a query; any other
    task a non-blank answer.
    """
    placeholders = extract_answers(task.format)
    if placeholders:
        given = extract_answers(answer)
        gold = task.answer if isinstance(task.answer, dict) else {}
        for name, placeholder in placeholders.items():
            value = given.get(name, "").strip()
            if not value:
                return f"no @{name}[...] with a value in the answer"
            if _same(value, placeholder) and not _same(str(gold.get(name, "")), placeholder):
                return f"@{name}[{value}] copies the format's placeholder"
        return None
    if task.judge == "sql":
        return None if _QUERY.match(extract_sql(answer)) else "the answer holds no SELECT query"
    return None if answer.strip() else "the answer is blank"


def _same(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


class AnswerLengthCheck:
    """The final answer is at most ``max_tokens`` tokens long (counted by ``count_tokens``)."""

    name = "answer_length"
    reasons = (ANSWER_TOO_LONG,)

    def __init__(self, count_tokens: Callable[[str], int], max_tokens: int = MAX_ANSWER_TOKENS) -> None:
        self.count_tokens = count_tokens
        self.max_tokens = max_tokens

    def check(self, trajectory: Trajectory) -> Verdict:
        if trajectory.answer is None:
            return KEEP  # FormatCheck names that
        n_tokens = self.count_tokens(trajectory.answer)
        if n_tokens > self.max_tokens:
            return Verdict(reason=ANSWER_TOO_LONG, detail=f"{n_tokens} tokens (at most {self.max_tokens})")
        return KEEP


class RepetitionCheck:
    """No code cell repeats an earlier one (whitespace aside), and no error comes back in a second cell."""

    name = "repetition"
    reasons = (REPEATED_CELL, REPEATED_ERROR)

    def check(self, trajectory: Trajectory) -> Verdict:
        cells: dict[str, int] = {}
        errors: dict[tuple[str, str], int] = {}
        for turn in trajectory.turns:
            if turn.kind != ActionKind.CODE or turn.code is None:
                continue
            cell = cell_key(turn.code)
            if cell in cells:
                return Verdict(reason=REPEATED_CELL, detail=f"turn {turn.index} repeats the cell of turn {cells[cell]}")
            cells[cell] = turn.index
            error = _error(turn)
            if error in errors:
                ename, evalue = error
                return Verdict(
                    reason=REPEATED_ERROR,
                    detail=f"turn {turn.index} raised {ename}: {evalue[:200]} again (first in turn {errors[error]})",
                )
            if error is not None:
                errors[error] = turn.index
        return KEEP


def _error(turn: Turn) -> tuple[str, str] | None:
    """The exception type and message a code turn raised, if it raised one."""
    error = turn.result.error if turn.result is not None else None
    return (error.ename, " ".join(error.evalue.split())) if error is not None else None
