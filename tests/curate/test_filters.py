"""Rule filters on hand-made trajectories: format compliance per dialect, answer length, repetition."""

from __future__ import annotations

import asyncio

import pytest
from curate_helpers import trajectory_of

from datalyst.agent import (
    ANSWER_FORMAT,
    DIALECTS,
    NO_ANSWER,
    NO_FIGURE,
    UNPARSABLE_TURN,
    VOID_TURN,
    Agent,
    AgentConfig,
    Step,
    Termination,
    Trajectory,
    Turn,
    answer_format_problem,
    get_dialect,
)
from datalyst.curate import LanguageCheck
from datalyst.curate._filters import (
    ANSWER_TOO_LONG,
    MAX_ANSWER_TOKENS,
    REPEATED_CELL,
    REPEATED_ERROR,
    AnswerLengthCheck,
    FormatCheck,
    RepetitionCheck,
)
from datalyst.llm import ReplayModel
from datalyst.sandbox import CellError, ExecResult
from datalyst.tasks import SQL_ANSWER_FORMAT, TABLEBENCH_FORMAT, Task

TASK = Task(
    id="sales",
    question="What is the mean revenue, and is it skewed?",
    format="@mean_revenue[value] rounded to 2 decimals\n@skewed[yes or no]",
    files=["sales.csv"],
    answer={"mean_revenue": "261.41", "skewed": "yes"},
    judge="dabench",
)
LOAD = "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.head())"


def word_count(text: str) -> int:
    return len(text.split())


def ok(stdout: str = "done") -> ExecResult:
    return ExecResult(stdout=stdout)


def failed(ename: str, evalue: str) -> ExecResult:
    return ExecResult(error=CellError(ename=ename, evalue=evalue, traceback=f"{ename}: {evalue}"))


def turn(index: int, step: Step, dialect: str = "datamind", result: ExecResult | None = None) -> Turn:
    """A turn as the agent records it: the dialect's text of ``step``, and what running its code gave."""
    text = get_dialect(dialect).render(step)
    observation = result.render() if result is not None else None
    return Turn(
        index=index, raw=text, text=text, thought=step.thought, kind=step.kind, code=step.code, answer=step.answer,
        observation=observation, result=result,
    )  # fmt: skip


def run(
    *steps: Step | tuple[Step, ExecResult], dialect: str = "datamind", task: Task = TASK, termination=None
) -> Trajectory:
    """A trajectory of ``steps`` (a code step with the result its cell gave), ended by its last step."""
    turns = []
    for index, item in enumerate(steps):
        step, result = item if isinstance(item, tuple) else (item, None)
        turns.append(turn(index, step, dialect, result))
    return trajectory_of(turns, task, dialect=dialect, termination=termination)


def code(
    source: str, result: ExecResult | None = None, thought: str = "Let me look at the data."
) -> tuple[Step, ExecResult]:
    return Step(thought=thought, code=source), result or ok()


def answer(text: str = "@mean_revenue[261.41] @skewed[yes]", thought: str = "I have both parts.") -> Step:
    return Step(thought=thought, answer=text)


def good(dialect: str) -> Trajectory:
    """A clean run: look at the data, fail once, fix it, compute, answer in the format."""
    return run(
        code(LOAD, ok("   region  revenue\n0  north    120.5")),
        code("df['Revenue'].mean()", failed("KeyError", "'Revenue'"), "Now the mean of the revenue."),
        code("print(round(df['revenue'].mean(), 2), df['revenue'].skew() > 0.5)", ok("261.41 True"), "Lowercase."),
        answer(),
        dialect=dialect,
    )


def checks():
    return [FormatCheck(), AnswerLengthCheck(word_count), RepetitionCheck(), LanguageCheck()]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_clean_run_passes_every_check_in_every_dialect(dialect):
    trajectory = good(dialect)
    assert [check.check(trajectory).kept for check in checks()] == [True] * 4


def test_each_check_names_itself_and_its_reasons():
    assert {check.name: check.reasons for check in checks()} == {
        "format": (NO_ANSWER, VOID_TURN, UNPARSABLE_TURN, ANSWER_FORMAT, NO_FIGURE),
        "answer_length": (ANSWER_TOO_LONG,),
        "repetition": (REPEATED_CELL, REPEATED_ERROR),
        "language": ("garbled_text", "mixed_languages"),
    }


def agent_run(dialect: str, steps: list[Step], examples_dir) -> Trajectory:
    """A real run of the agent (sandbox included) on the example sales table, the model replaying ``steps``.

    Each completion goes on past its action with an invented observation, which the agent cuts off.
    """
    task = Task(
        id="sales-total",
        question="What is the total revenue?",
        format="@total_revenue[value] rounded to 2 decimals",
        files=[str(examples_dir / "sales.csv")],
    )
    render = get_dialect(dialect).render
    model = ReplayModel([render(step) + "\nThe output shows 42.\n" for step in steps])
    return asyncio.run(Agent(model, AgentConfig(dialect=dialect)).arun(task))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_real_run_with_an_error_fixed_passes_every_check(dialect, examples_dir):
    trajectory = agent_run(
        dialect,
        [
            Step(thought="Load the table.", code="import pandas as pd\ndf = pd.read_csv('sales.csv')"),
            Step(thought="Sum the revenue.", code="print(df['Revenue'].sum())"),
            Step(thought="The column is lowercase.", code="print(round(df['revenue'].sum(), 2))"),
            Step(thought="I have the total.", answer="@total_revenue[15684.58]"),
        ],
        examples_dir,
    )
    assert trajectory.turns[1].result.error.ename == "KeyError"
    assert [check.check(trajectory).reason for check in checks()] == [None] * 4


def test_a_real_run_that_meets_the_same_error_twice_is_dropped(examples_dir):
    trajectory = agent_run(
        "datamind",
        [
            Step(thought="Load the table.", code="import pandas as pd\ndf = pd.read_csv('sales.csv')"),
            Step(thought="Sum the revenue.", code="print(df['Revenue'].sum())"),
            Step(thought="Maybe with a mean.", code="print(df['Revenue'].mean())"),
            Step(thought="I have the total.", answer="@total_revenue[15684.58]"),
        ],
        examples_dir,
    )
    verdict = RepetitionCheck().check(trajectory)
    assert verdict.reason == REPEATED_ERROR and verdict.detail.startswith("turn 2 raised KeyError: 'Revenue' again")


# Format compliance


@pytest.mark.parametrize("termination", [Termination.MAX_TURNS, Termination.EXECUTION_ERRORS, Termination.ANSWER])
def test_a_run_that_did_not_end_with_an_answer_is_dropped(termination):
    trajectory = run(code(LOAD), termination=termination)  # with ANSWER: the record says so, but holds no answer
    verdict = FormatCheck().check(trajectory)
    assert verdict.reason == NO_ANSWER and termination.value in verdict.detail


def test_a_void_turn_drops_the_run_even_when_it_recovered():
    trajectory = run(code(LOAD), Step(thought="Hmm, what next?"), answer())
    verdict = FormatCheck().check(trajectory)
    assert (verdict.reason, verdict.detail) == (VOID_TURN, "turn 1")


def test_a_turn_written_in_another_dialect_does_not_read_back():
    trajectory = good("datamind").model_copy(update={"dialect": "jupiter"})
    verdict = FormatCheck().check(trajectory)
    # jupiter runs a bare fence as code, but has no <answer> tag
    assert (verdict.reason, verdict.detail) == (UNPARSABLE_TURN, "turn 3 (answer) reads back as void in jupiter")


def test_a_turn_whose_recorded_action_differs_from_its_text_is_dropped():
    trajectory = good("datarus")
    edited = trajectory.turns[2].model_copy(update={"code": "print(261.41)"})  # the text still holds the old cell
    trajectory.turns[2] = edited
    verdict = FormatCheck().check(trajectory)
    assert verdict.reason == UNPARSABLE_TURN and "turn 2" in verdict.detail


def test_an_answer_out_of_the_task_format_is_dropped():
    verdict = FormatCheck().check(run(code(LOAD), answer("The mean revenue is 261.41 and it is skewed.")))
    assert verdict.reason == ANSWER_FORMAT and verdict.detail == "no @mean_revenue[...] with a value in the answer"


def test_a_run_of_a_chart_request_that_drew_no_chart_is_dropped():
    chart = TASK.model_copy(update={"figure": True})
    verdict = FormatCheck().check(run(code(LOAD), answer(), task=chart))
    assert verdict.reason == NO_FIGURE and "no cell drew one" in verdict.detail
    drawn = run(code(LOAD), answer(), task=chart)
    drawn.turns[0] = drawn.turns[0].model_copy(update={"figures": {"cell-1-figure-0.png": "iVBORw0KGgo="}})
    assert FormatCheck().check(drawn).kept and FormatCheck().check(run(code(LOAD), answer())).kept


COPIES = "copies the format's placeholder"
DABENCH = "@mean_revenue[value] rounded to 2 decimals\n@skewed[yes or no]"


@pytest.mark.parametrize(
    ("format", "judge", "gold", "text", "problem"),
    [
        (DABENCH, "dabench", None, "@mean_revenue[261.41], @skewed[yes]", None),
        (DABENCH, "dabench", None, "The mean is @mean_revenue[ 261.41 ]; skewed: @skewed[no].", None),
        (DABENCH, "dabench", None, "@mean_revenue[261.41]", "no @skewed[...] with a value in the answer"),
        (DABENCH, "dabench", None, "@mean_revenue[] @skewed[yes]", "no @mean_revenue[...] with a value in the answer"),
        (DABENCH, "dabench", None, "@mean[261.41] @skewed[yes]", "no @mean_revenue[...] with a value in the answer"),
        (DABENCH, "dabench", None, "@mean_revenue[Value] @skewed[no]", f"@mean_revenue[Value] {COPIES}"),
        (DABENCH, "dabench", None, "@mean_revenue[1] @skewed[yes or no]", f"@skewed[yes or no] {COPIES}"),
        ("@feature[ratio] where ratio is the new column", "dabench", {"feature": "ratio"}, "@feature[ratio]", None),
        (SQL_ANSWER_FORMAT, "sql", None, "```sql\nSELECT COUNT(*) FROM t WHERE x > 4;\n```", None),
        (SQL_ANSWER_FORMAT, "sql", None, "with a AS (SELECT 1) select * from a", None),
        (SQL_ANSWER_FORMAT, "sql", None, "The count is 20.", "the answer holds no SELECT query"),
        (SQL_ANSWER_FORMAT, "sql", None, "Here it is: SELECT COUNT(*) FROM t", "the answer holds no SELECT query"),
        (TABLEBENCH_FORMAT, "tablebench", None, "Paris, Rome", None),
        ("", "rule", None, " \n", "the answer is blank"),
    ],
)  # fmt: skip
def test_answer_format_per_kind_of_task(format, judge, gold, text, problem):
    task = Task(id="t", question="q", format=format, judge=judge, answer=gold)
    assert answer_format_problem(task, text) == problem


def test_a_run_without_answer_is_named_so_before_its_void_turns():
    trajectory = run(code(LOAD), Step(thought="..."))
    assert FormatCheck().check(trajectory).reason == NO_ANSWER


# Answer length


def test_an_answer_over_the_token_limit_is_dropped():
    check = AnswerLengthCheck(word_count)
    at_limit = run(answer(" ".join(["@mean_revenue[1] @skewed[no]"] + ["x"] * (MAX_ANSWER_TOKENS - 2))))
    over = run(answer(at_limit.answer + " x"))
    assert check.check(at_limit).kept
    verdict = check.check(over)
    assert (verdict.reason, verdict.detail) == (ANSWER_TOO_LONG, "1025 tokens (at most 1024)")
    assert AnswerLengthCheck(word_count, max_tokens=3).check(run(answer("a b c d"))).reason == ANSWER_TOO_LONG


def test_a_run_without_answer_is_left_to_the_format_check():
    assert AnswerLengthCheck(word_count).check(run(code(LOAD))).kept


@pytest.mark.model
def test_answer_length_is_counted_in_a_real_tokenizers_tokens():
    from datalyst.llm import load_tokenizer

    encode = load_tokenizer("embedded:small").encode
    numbers = run(answer(" ".join(["3.14159265"] * 300)))  # 300 words, but digits are tokens of their own
    assert word_count(numbers.answer) < MAX_ANSWER_TOKENS < len(encode(numbers.answer))
    check = AnswerLengthCheck(lambda text: len(encode(text)))
    assert check.check(numbers).reason == ANSWER_TOO_LONG
    assert check.check(good("datamind")).kept


# Repetition


def test_a_cell_repeated_with_other_whitespace_is_dropped():
    trajectory = run(
        code(LOAD),
        code("x = 1"),
        code("import pandas as pd\n\ndf = pd.read_csv('sales.csv')  \nprint(df.head())\n"),
        answer(),
    )
    verdict = RepetitionCheck().check(trajectory)
    assert (verdict.reason, verdict.detail) == (REPEATED_CELL, "turn 2 repeats the cell of turn 0")


def test_an_error_coming_back_in_another_cell_is_dropped():
    trajectory = run(
        code(LOAD),
        code("df['Revenue'].mean()", failed("KeyError", "'Revenue'")),
        code("df['Revenue'].median()", failed("KeyError", "'Revenue'")),
        answer(),
    )
    verdict = RepetitionCheck().check(trajectory)
    assert verdict.reason == REPEATED_ERROR
    assert verdict.detail == "turn 2 raised KeyError: 'Revenue' again (first in turn 1)"


def test_different_errors_and_a_fixed_error_are_kept():
    trajectory = run(
        code("df['Revenue'].mean()", failed("NameError", "name 'df' is not defined")),
        code(LOAD),
        code("print(df['Revenue'].mean())", failed("KeyError", "'Revenue'")),
        code("df['Sales'].mean()", failed("KeyError", "'Sales'")),
        code("df['revenue'].mean()", ok("261.41")),
        answer(),
    )
    assert RepetitionCheck().check(trajectory).kept
