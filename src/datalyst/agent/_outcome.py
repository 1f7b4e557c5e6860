"""A trajectory judged against its task, once, into the :class:`Outcome` every stage reads.

Evaluation writes it beside its runs, curation's ground-truth filter keeps it in the group's verdict, RL turns it
into a reward (DataMind's Eq. 8 reads the status), search backs it up, and the value model's returns come from it.
The rules live here alone: a run without an answer is unanswered (whatever judge its task names); an answer is
judged by its task's own judge (``datalyst.judge.judge_for``); a wrong answer in a run that broke the form
(:func:`form_problem`) is malformed.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from datalyst.agent._dialects import get_dialect
from datalyst.agent._trajectory import Termination, Trajectory
from datalyst.judge import extract_sql, judge_for
from datalyst.llm import ChatModel
from datalyst.tasks import Task, extract_answers

OUTCOME_VERSION = 1

NO_ANSWER = "no_answer"
VOID_TURN = "void_turn"
UNPARSABLE_TURN = "unparsable_turn"
ANSWER_FORMAT = "answer_format"
NO_FIGURE = "no_figure"
FORM_PROBLEMS = (NO_ANSWER, VOID_TURN, UNPARSABLE_TURN, ANSWER_FORMAT, NO_FIGURE)
"""Why a run is not well formed, in the order :func:`form_problem` looks."""

_QUERY = re.compile(r"(?:select|with)\b", re.IGNORECASE)


class Status(StrEnum):
    RIGHT = "right"
    WRONG = "wrong"
    """Judged wrong, in a well-formed run."""
    MALFORMED = "malformed"
    """Judged wrong, in a run that broke the form (``Outcome.form`` says how)."""
    UNANSWERED = "unanswered"
    """The run ended without an answer (or with a blank one)."""


class Outcome(BaseModel):
    """How one trajectory ended, judged against its task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = OUTCOME_VERSION
    trajectory_id: str
    task_id: str
    dialect: str
    trial: int
    status: Status
    score: float = Field(0.0, ge=0.0, le=1.0)
    """The judge's score: 1 or 0, or a partial credit (TableBench's ROUGE-L); 0 without an answer."""
    share: float | None = Field(default=None, ge=0.0, le=1.0)
    """The share of right sub-answers, where the answer has several (DABench's ``@name[value]``)."""
    detail: str | None = None
    """What the judge saw (wrong sub-answers, an SQL error, a judge model's reasoning), or why there is no answer."""
    form: str | None = None
    """Why the run is not well formed (one of ``FORM_PROBLEMS``); None when it is."""

    @property
    def correct(self) -> bool:
        return self.status is Status.RIGHT

    @property
    def answered(self) -> bool:
        return self.status is not Status.UNANSWERED

    @property
    def well_formed(self) -> bool:
        """DataMind's ``r_format``: an answer in the task's format, every turn read back, no void turn."""
        return self.form is None

    @property
    def credit(self) -> float:
        """Partial credit: the share of right sub-answers where there are several, else the score."""
        return self.score if self.share is None else self.share


async def ajudge_trajectory(
    trajectory: Trajectory, *, judge_model: ChatModel | None = None, require_isolation: bool = True
) -> Outcome:
    """The outcome of ``trajectory``: its answer judged by its task's judge (``judge_model`` grades the tasks a
    model judges; ``require_isolation=False`` lets program judges run where the sandbox cannot isolate them)."""
    task, answer = trajectory.task, trajectory.answer
    form = form_problem(trajectory)
    common = {"trajectory_id": trajectory.id, "task_id": task.id, "dialect": trajectory.dialect,
              "trial": trajectory.trial, "form": form and form[0]}  # fmt: skip
    if not (answer or "").strip():
        detail = trajectory.error or f"no answer ({trajectory.termination.value})"
        return Outcome(**common, status=Status.UNANSWERED, detail=detail)
    judgement = await judge_for(task, model=judge_model, require_isolation=require_isolation).ajudge(answer)
    status = Status.RIGHT if judgement.correct else Status.WRONG if form is None else Status.MALFORMED
    return Outcome(**common, status=status, score=judgement.score, share=judgement.share, detail=judgement.reason)


def form_problem(trajectory: Trajectory) -> tuple[str, str] | None:
    """Why the run is not well formed, as ``(reason, what was seen)``, or None when it ends with an answer in its
    task's format, every turn reads back as recorded, and a chart the task asks for was drawn."""
    if trajectory.termination != Termination.ANSWER or trajectory.answer is None:
        return NO_ANSWER, f"ended by {trajectory.termination.value}"
    dialect = get_dialect(trajectory.dialect)
    for turn in trajectory.turns:
        if turn.is_void:
            return VOID_TURN, f"turn {turn.index}"
        step = dialect.parse(turn.text)
        if (step.kind, step.code, step.answer) != (turn.kind, turn.code, turn.answer):
            return (
                UNPARSABLE_TURN,
                f"turn {turn.index} ({turn.kind.value}) reads back as {step.kind.value} in {dialect.name}",
            )
    if problem := answer_format_problem(trajectory.task, trajectory.answer):
        return ANSWER_FORMAT, problem
    if trajectory.task.figure and not any(turn.figures for turn in trajectory.turns):
        return NO_FIGURE, "the task asks for a chart and no cell drew one"
    return None


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
