"""Rule filters on a trajectory's form: format compliance per dialect, answer length, and repetition.

Each is a :class:`~datalyst.curate._records.Check`; the linguistic one lives in ``_language``.
"""

from __future__ import annotations

from collections.abc import Callable

from datalyst.agent import FORM_PROBLEMS, ActionKind, Trajectory, Turn, cell_key, form_problem
from datalyst.curate._records import KEEP, Decision

ANSWER_TOO_LONG = "answer_too_long"
REPEATED_CELL = "repeated_cell"
REPEATED_ERROR = "repeated_error"

MAX_ANSWER_TOKENS = 1024
"""DataMind's limit on the final answer's length."""


class FormatCheck:
    """The trajectory ends with an answer in the task's format, every turn reads back as recorded, and a chart the
    task asks for was drawn (``datalyst.agent.form_problem``)."""

    name = "format"
    reasons = FORM_PROBLEMS

    def check(self, trajectory: Trajectory) -> Decision:
        problem = form_problem(trajectory)
        return KEEP if problem is None else Decision(reason=problem[0], detail=problem[1])


class AnswerLengthCheck:
    """The final answer is at most ``max_tokens`` tokens long (counted by ``count_tokens``)."""

    name = "answer_length"
    reasons = (ANSWER_TOO_LONG,)

    def __init__(self, count_tokens: Callable[[str], int], max_tokens: int = MAX_ANSWER_TOKENS) -> None:
        self.count_tokens = count_tokens
        self.max_tokens = max_tokens

    def check(self, trajectory: Trajectory) -> Decision:
        if trajectory.answer is None:
            return KEEP  # FormatCheck names that
        n_tokens = self.count_tokens(trajectory.answer)
        if n_tokens > self.max_tokens:
            return Decision(reason=ANSWER_TOO_LONG, detail=f"{n_tokens} tokens (at most {self.max_tokens})")
        return KEEP


class RepetitionCheck:
    """No code cell repeats an earlier one (whitespace aside), and no error comes back in a second cell."""

    name = "repetition"
    reasons = (REPEATED_CELL, REPEATED_ERROR)

    def check(self, trajectory: Trajectory) -> Decision:
        cells: dict[str, int] = {}
        errors: dict[tuple[str, str], int] = {}
        for turn in trajectory.turns:
            if turn.kind != ActionKind.CODE or turn.code is None:
                continue
            cell = cell_key(turn.code)
            if cell in cells:
                return Decision(
                    reason=REPEATED_CELL, detail=f"turn {turn.index} repeats the cell of turn {cells[cell]}"
                )
            cells[cell] = turn.index
            error = _error(turn)
            if error in errors:
                ename, evalue = error
                return Decision(
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
