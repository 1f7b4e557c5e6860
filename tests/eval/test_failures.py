"""Kinds of failure, by rules over a trajectory and its verdict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from datalyst.agent import ActionKind, Status, Termination, Trajectory, Turn
from datalyst.eval import EvalOutcome, failure_counts, failure_kind
from datalyst.llm import SamplingParams
from datalyst.sandbox import CellError, ExecResult
from datalyst.tasks import Task

TASK = Task(id="t", question="Mean and count?", answer={"mean": "2.5", "count": "4"}, judge="dabench")


def run(*results: ExecResult, answer: str | None = None, termination: Termination | None = None) -> Trajectory:
    turns = [Turn(index=i, raw="", text="", kind=ActionKind.CODE, code="x", result=r) for i, r in enumerate(results)]
    if answer is not None:
        turns.append(Turn(index=len(turns), raw="", text="", kind=ActionKind.ANSWER, answer=answer))
    ended = termination or (Termination.ANSWER if answer is not None else Termination.EXECUTION_ERRORS)
    return Trajectory(
        id="t#0", task=TASK, dialect="jupiter", model="m", sampling=SamplingParams(), system_prompt="",
        first_message="", turns=turns, answer=answer, termination=ended, started_at=datetime.now(UTC),
    )  # fmt: skip


def verdict(*, correct: bool = False, detail: str | None = None, reformatted: float | None = None) -> EvalOutcome:
    return EvalOutcome(
        trajectory_id="t#0", task_id="t", dialect="jupiter", trial=0, score=float(correct),
        status=Status.RIGHT if correct else Status.WRONG, detail=detail, reformatted_score=reformatted,
    )  # fmt: skip


def error(name: str, value: str, traceback: str = "") -> ExecResult:
    return ExecResult(error=CellError(ename=name, evalue=value, traceback=traceback))


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (error("TypeError", "list indices must be integers", "data = json.load(f)"), "file loading"),
        (error("ParserError", "Error tokenizing data. C error"), "file loading"),
        (error("KeyError", "'Revenue'"), "wrong column"),
        (error("AttributeError", "'DataFrame' object has no attribute 'revenu'"), "wrong column"),
        (error("TypeError", "unsupported operand type(s) for +: 'int' and 'str'"), "dtype"),
        (error("ValueError", "could not convert string to float: '1,200'"), "dtype"),
        (error("NameError", "name 'df' is not defined"), "undefined name"),
        (error("SyntaxError", "invalid syntax"), "syntax"),
        (error("ZeroDivisionError", "division by zero"), "other error"),
        (ExecResult(stdout="fine"), "gave up"),
    ],
)
def test_an_unanswered_run_is_told_by_its_last_cell(result, kind):
    assert failure_kind(run(ExecResult(stdout="ok"), result), verdict()) == kind


@pytest.mark.parametrize(
    ("answer", "judged", "kind"),
    [
        ("The mean is 2.5 and there are 4 rows.", verdict(), "format"),
        ("@mean[2.5] @count[5]", verdict(detail="wrong: count", reformatted=0.0), "partly right"),
        ("@mean[2.5], 4 rows", verdict(detail="wrong: count", reformatted=1.0), "format"),
        ("@mean[3.1] @count[5]", verdict(detail="wrong: mean, count", reformatted=0.0), "wrong value"),
        ("@mean[NaN] @count[None]", verdict(detail="wrong: mean, count", reformatted=0.0), "no value"),
        ("@count[4]", verdict(detail="wrong: mean", reformatted=0.0), "no value"),  # the part is missing
        ("@mean[nan] @count[5]", verdict(detail="wrong: mean, count", reformatted=0.0), "wrong value"),
        ("@mean[2.55] @count[4]", verdict(detail="wrong: mean", reformatted=0.0), "near miss"),  # within 5%
        ("@mean[2.7] @count[4]", verdict(detail="wrong: mean", reformatted=0.0), "partly right"),  # 8% off
        ("@mean[2.5] @count[4.1]", verdict(detail="wrong: count", reformatted=0.0), "near miss"),
    ],
)
def test_an_answered_run_is_told_by_its_answer(answer, judged, kind):
    assert failure_kind(run(answer=answer), judged) == kind


@pytest.mark.parametrize(
    ("expected", "answer", "wrong", "kind"),
    [
        ({"r": "0.67", "fit": "poor fit"}, "@r[0.67] @fit[good fit]", "fit", "wrong label"),
        ({"r": "0.67", "fit": "poor fit"}, "@r[0.12] @fit[good fit]", "r, fit", "wrong value"),
        ({"normal": "False"}, "@normal[True]", "normal", "wrong label"),
        ({"outliers": "Kuwait, Saudi Arabia"}, "@outliers[Kuwait]", "outliers", "wrong value"),  # a list, not a label
        ({"r": "1.0"}, "@r[0.99]", "r", "near miss"),  # absolute under 1 in size: 0.01 <= 0.05
        ({"r": "0.10"}, "@r[0.16]", "r", "wrong value"),
    ],
)
def test_a_wrong_answer_is_told_by_the_parts_it_got_wrong(expected, answer, wrong, kind):
    task = TASK.model_copy(update={"answer": expected})
    answered = run(answer=answer).model_copy(update={"task": task})
    assert failure_kind(answered, verdict(detail=f"wrong: {wrong}", reformatted=0.0)) == kind


@pytest.mark.parametrize(
    ("constraints", "code", "kind"),
    [
        ("Use Pearson's correlation.", "df['a'].corr(df['b'], method='spearman')", "wrong method"),
        ("Use Pearson's correlation.", "df['a'].corr(df['b'])", "wrong value"),  # pandas' default is Pearson's
        ("Use Pearson's correlation.", "pearsonr(a, b)\nspearmanr(a, b)", "wrong value"),  # it did use Pearson's
        ("Outliers lie 1.5 IQR beyond the quartiles.", "z = (x - x.mean()) / x.std()", "wrong method"),
        ("Outliers have a Z-score above 3.", "q1 = x.quantile(0.25)", "wrong method"),
        ("Outliers have a Z-score above 3.", "stats.zscore(x)", "wrong value"),
        ("Run a t-test.", "stats.mannwhitneyu(a, b)", "wrong method"),
        ("Scale with min-max normalization.", "StandardScaler().fit_transform(x)", "wrong method"),
        ("", "df['a'].corr(df['b'], method='kendall')", "wrong value"),  # no method named: nothing to go by
    ],
)
def test_a_wrong_answer_from_another_method_than_the_one_named_is_a_wrong_method(constraints, code, kind):
    task = TASK.model_copy(update={"constraints": constraints})
    wrong = run(ExecResult(stdout="0.4"), answer="@mean[3.1] @count[5]").model_copy(update={"task": task})
    wrong.turns[0].code = code
    assert failure_kind(wrong, verdict(detail="wrong: mean, count", reformatted=0.0)) == kind


def test_a_wrong_answer_given_at_the_last_call_is_told_by_the_cell_before_it():
    forced = run(ExecResult(stdout="ok"), error("KeyError", "'Revenue'"), answer="@mean[3.1] @count[5]")
    forced.turns[1].last_call = "No code can run any more: this is your last turn."
    assert failure_kind(forced, verdict(detail="wrong: mean, count", reformatted=0.0)) == "wrong column"
    forced.turns[1].result = ExecResult(stdout="fine")  # the turns ran out: nothing failed last
    assert failure_kind(forced, verdict(detail="wrong: mean, count", reformatted=0.0)) == "gave up"


def test_right_answers_have_no_kind_and_counts_follow_the_kinds_order():
    assert failure_kind(run(answer="@mean[2.5] @count[4]"), verdict(correct=True)) is None
    failed = run(termination=Termination.FAILED)
    assert failure_kind(failed, verdict()) == "failed"
    assert failure_counts([run(error("KeyError", "'x'"))], [verdict()]) == {"wrong column": 1}
