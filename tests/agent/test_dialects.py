"""Dialects: opening prompts, tolerant parsing of model turns, canonical rendering, observations."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from datalyst.agent import ActionKind, PromptContext, Step
from datalyst.agent._dialects import DIALECTS, get_dialect
from datalyst.errors import ConfigError
from datalyst.tasks import Task

FENCE = "```"
PROPERTY = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(params=DIALECTS)
def dialect(request):
    return get_dialect(request.param)


def _context(*, has_database: bool) -> PromptContext:
    task = Task(
        id="t1",
        question="What is the average ticket fare?",
        constraints="Ignore rows where the fare is missing.",
        format="@mean_fare[value] where value is rounded to two decimals",
        files=["/data/titanic.csv", "/data/shop.sqlite"],
    )
    info = "titanic.csv: 891 rows x 12 columns\n  Fare: float64, 0.0 .. 512.33"
    return PromptContext(
        task=task, file_names=["titanic.csv", "shop.sqlite"], file_info=info, has_database=has_database
    )


# --- opening prompts -----------------------------------------------------------------------------


@pytest.mark.parametrize("has_database", [False, True])
def test_opening_shows_the_task_and_the_files(dialect, has_database):
    context = _context(has_database=has_database)
    system, user = dialect.opening(context)
    for expected in (context.task.question, context.task.constraints, context.task.format, context.file_info):
        assert expected in user
    assert "titanic.csv, shop.sqlite" in user
    assert ("get_db_info()" in system) is has_database
    assert ("execute_sql(" in system) is has_database
    assert "{{" not in system + user and "{%" not in system + user


def test_opening_leaves_out_empty_task_fields(dialect):
    context = PromptContext(task=Task(id="t2", question="How many rows?"), file_names=[], file_info="")
    _, user = dialect.opening(context)
    assert user.startswith("Question: How many rows?")
    assert "Constraints" not in user and "Answer format" not in user and "About the files" not in user


def test_opening_system_prompt_shows_the_turn_format(dialect):
    system, _ = dialect.opening(_context(has_database=False))
    markers = {
        "datamind": ["<think>", "<code>", "<interpreter>", "<answer>"],
        "jupiter": ["Thought:", "Action:", "Observation:", "Formatted answer:"],
        "datarus": ["<step>", "<thought>", "<action>python_executor</action>", "<action_input>", "<stop_analysis>"],
    }[dialect.name]
    assert all(marker in system for marker in markers)
    # The example turn in the prompt is itself a well-formed code turn.
    example = system[system.index("Example") :].split("\n", 1)[1].split("\n\nRules:")[0]
    assert dialect.parse(example).kind is ActionKind.CODE


def test_get_dialect_rejects_unknown_names():
    with pytest.raises(ConfigError, match=r"'react'.*datamind, jupiter, datarus"):
        get_dialect("react")
    assert [get_dialect(name).name for name in DIALECTS] == list(DIALECTS)


# --- observations and stop sequences -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("datamind", "<interpreter>\n   a\n1  2\n</interpreter>"),
        ("jupiter", "Observation:    a\n1  2"),
        ("datarus", "<observation>\n   a\n1  2\n</observation>"),
    ],
)
def test_observation_wraps_the_output(name, expected):
    assert get_dialect(name).observation("   a\n1  2\n") == expected


def test_an_observation_starts_with_the_stop_sequence(dialect):
    """So a model that writes the observation itself is cut where the server would stop it."""
    step = Step(thought="check", code="print(1)")
    assert dialect.observation("1").startswith(dialect.stop)
    assert dialect.parse(dialect.render(step) + "\n" + dialect.observation("1")) == step
    assert dialect.void_feedback().startswith(dialect.stop)


# --- canonical and malformed turns ---------------------------------------------------------------

CODE = "print(1)"


def code(code: str = CODE, thought: str = "") -> Step:
    return Step(thought=thought, code=code)


def answer(answer: str, thought: str = "") -> Step:
    return Step(thought=thought, answer=answer)


def void(thought: str = "") -> Step:
    return Step(thought=thought)


DATAMIND = [
    # canonical turns
    ("<think>\nLook first.\n</think>\n<code>\n```python\nprint(1)\n```\n</code>\n", code(thought="Look first.")),
    ("<think>\nDone.\n</think>\n<answer>\n@mean_fare[34.65]\n</answer>", answer("@mean_fare[34.65]", "Done.")),
    # generation stopped before the closing fence and tag
    ("<think>Look.</think>\n<code>\n```python\nprint(1)\n", code(thought="Look.")),
    ("<think>Look.</think>\n<code>\n```python\nprint(1)\n```\n", code(thought="Look.")),
    # tags without a fence, a fence without tags, a lone language line, a one-line fence
    ("<think>Look.</think><code>print(1)</code>", code(thought="Look.")),
    ("<think>Look.</think>\n```python\nprint(1)\n```", code(thought="Look.")),
    ("I will look.\n```py\nprint(1)\n```", code(thought="I will look.")),
    ("<code>\npython\nprint(1)\n</code>", code()),
    ("<code>```python print(1)```</code>", code()),
    ("<code>\n```\nprint(1)\n```\n</code>", code()),
    # the chat template opened <think> already
    ("Reasoning here.\n</think>\n<code>```python\nprint(1)\n```</code>", code(thought="Reasoning here.")),
    # several blocks: the first non-empty one
    ("<code>```python\nx = 1\n```</code><code>```python\nx = 2\n```</code>", code("x = 1")),
    ("<code>\n```python\nx = 1\n```\n```python\nx = 2\n```\n</code>", code("x = 1")),
    (
        "<think>Maybe ```python\nx = 0\n``` works.</think><code>```python\nx = 1\n```</code>",
        code("x = 1", "Maybe ```python\nx = 0\n``` works."),
    ),
    # case
    ("<THINK>Look.</Think><Code>\n```Python3\nprint(1)\n```\n</CODE>", code(thought="Look.")),
    ("<Answer>@a[1]</ANSWER>", answer("@a[1]")),
    # indented code is dedented
    (
        "<code>\n    ```python\n    for i in range(2):\n        print(i)\n    ```\n</code>",
        code("for i in range(2):\n    print(i)"),
    ),
    # answers: text after is ignored, unclosed is fine, @name[value] inside a sentence, fenced
    ("<think>Done.</think><answer>@mean[3.5]</answer>\nHope this helps!", answer("@mean[3.5]", "Done.")),
    ("<think>Done.</think><answer>@mean[3.5]", answer("@mean[3.5]", "Done.")),
    ("<answer>The mean is @mean[3.5].</answer>", answer("The mean is @mean[3.5].")),
    ("<answer>\n```\n@mean[3.5]\n```\n</answer>", answer("@mean[3.5]")),
    # answer and code: the first one wins
    ("<answer>@a[1]</answer>\n<code>```python\nprint(1)\n```</code>", answer("@a[1]")),
    ("<code>```python\nprint(1)\n```</code>\n<answer>@a[1]</answer>", code()),
    # a hallucinated observation and everything after it is dropped
    ("<code>```python\nprint(1)\n```</code>\n<interpreter>\n1\n</interpreter>\n<answer>@a[1]</answer>", code()),
    # void turns keep their thought
    ("<think>Hmm.</think><code>\n```python\n```\n</code>", void("Hmm.")),
    ("<think>Hmm.</think><answer>  </answer>", void("Hmm.")),
    ("I am not sure what to do.", void("I am not sure what to do.")),
    ("```sql\nSELECT 1\n```", void("```sql\nSELECT 1\n```")),
    ("", void()),
]

JUPITER = [
    ("Thought: Look first.\nAction:\n```python\nprint(1)\n```", code(thought="Look first.")),
    ("Thought: Done.\nFormatted answer: @mean_fare[34.65]", answer("@mean_fare[34.65]", "Done.")),
    # stopped before the closing fence; fence on the Action line
    ("Thought: Look.\nAction:\n```python\nprint(1)\n", code(thought="Look.")),
    ("Thought: Look.\nAction: ```python\nprint(1)\n```", code(thought="Look.")),
    # keyword case, markdown, headings, a thought over several lines
    ("thought: Look.\naction:\n```py\nprint(1)\n```", code(thought="Look.")),
    ("**Thought:** Look.\n**Action:**\n```python\nprint(1)\n```", code(thought="Look.")),
    (
        "### Thought\nLook.\nThen count.\n### Action:\n```python\nprint(1)\n```",
        code(thought="### Thought\nLook.\nThen count."),
    ),
    ("Thought: Done.\nformatted answer: @a[1]", answer("@a[1]", "Done.")),
    ("Thought: Done.\nFinal Answer: @a[1]", answer("@a[1]", "Done.")),
    ("Formatted answer: Thought: The computation is done: 168", answer("The computation is done: 168")),
    ("Thought: t\nFormatted answer: **Thought:** @a[1]", answer("@a[1]", "t")),
    ("Thought: t\nFormatted answer: Final answer: @a[1]", answer("@a[1]", "t")),
    # fence without Action; a sketch in the thought loses to the block after Action
    ("Thought: Look.\n```python\nprint(1)\n```", code(thought="Look.")),
    (
        "Thought: Use ```python\nx = 0\n``` maybe.\nAction:\n```python\nx = 1\n```",
        code("x = 1", "Use ```python\nx = 0\n``` maybe."),
    ),
    # several blocks
    ("Thought: a\nAction:\n```python\nx = 1\n```\n```python\nx = 2\n```", code("x = 1", "a")),
    ("Action:\n```python\nx = 1\n```\nAction:\n```python\nx = 2\n```", code("x = 1")),
    # answers: paragraph, several lines, fenced, trailing commentary
    ("Thought: Done.\nFormatted answer: @a[1] @b[2]\n\nThese values show a trend.", answer("@a[1] @b[2]", "Done.")),
    ("Formatted answer:\n@a[1]\n@b[2]", answer("@a[1]\n@b[2]")),
    ("Formatted answer:\n```\n@a[1]\n```", answer("@a[1]")),
    # answer and code: the first one wins
    ("Thought: t\nFormatted answer: @a[1]\nAction:\n```python\nprint(1)\n```", answer("@a[1]", "t")),
    ("Thought: t\nAction:\n```python\nprint(1)\n```\nFormatted answer: @a[1]", code(thought="t")),
    # an answer written as a cell's only line (comments aside) is an answer; a line among code is code
    ("Thought: t\nAction:\n```python\nFormatted answer: No\n```", answer("No", "t")),
    ("Thought: t\nAction:\n```python\nformatted_answer: @s[Not Normal]\n```", answer("@s[Not Normal]", "t")),
    ("Action:\n```python\n# the answer\nFinal Answer: @a[1]\n```", answer("@a[1]")),
    ("Action:\n```python\nx = 1\nFormatted answer: @a[1]\n```", code("x = 1\nFormatted answer: @a[1]")),
    # the turn ends at Observation: opening a line, not at the word inside a sentence
    ("Thought: t\nAction:\n```python\nprint(1)\n```\nObservation: 1\nFormatted answer: @a[1]", code(thought="t")),
    (
        "Thought: my observation: it is numeric\nAction:\n```python\nprint(1)\n```",
        code(thought="my observation: it is numeric"),
    ),
    # void
    ("Thought: Hmm.\nAction:\n```python\n```", void("Hmm.")),
    ("Thought: Hmm.\nAction:\n```sql\nSELECT 1\n```", void("Hmm.")),
    ("Thought: Hmm.\nAction: print(1)", void("Hmm.")),
    ("Thought: Hmm.\nFormatted answer:", void("Hmm.")),
    ("I am not sure.", void("I am not sure.")),
]

RUN = "<action>python_executor</action>"
DATARUS = [
    (
        f"<step>\n<thought>\nLook.\n</thought>\n{RUN}\n<action_input>\nprint(1)\n</action_input>\n</step>",
        code(thought="Look."),
    ),
    (
        "<stop_analysis>\n<thought>\nDone.\n</thought>\n<answer>\n@a[1]\n</answer>\n</stop_analysis>",
        answer("@a[1]", "Done."),
    ),
    # stopped early, fenced input, input without action, action without input, bare fence
    (f"<step><thought>Look.</thought>{RUN}<action_input>\nprint(1)\n", code(thought="Look.")),
    (
        f"<step><thought>Look.</thought>{RUN}<action_input>\n```python\nprint(1)\n```\n</action_input></step>",
        code(thought="Look."),
    ),
    ("<step><thought>Look.</thought><action_input>print(1)</action_input></step>", code(thought="Look.")),
    (f"<step><thought>Look.</thought>{RUN}\n```python\nprint(1)\n```", code(thought="Look.")),
    ("<step><thought>Look.</thought>\n```python\nprint(1)\n```\n</step>", code(thought="Look.")),
    # case
    (
        "<Step><Thought>Look.</Thought><Action> Python_Executor </Action><Action_Input>print(1)</Action_Input></Step>",
        code(thought="Look."),
    ),
    # several steps: the first
    (
        f"<step>{RUN}<action_input>x = 1</action_input></step>\n<step>{RUN}<action_input>x = 2</action_input></step>",
        code("x = 1"),
    ),
    # answers: outside stop_analysis, stop_analysis without <answer>, text after, unclosed
    ("<answer>@a[1]</answer>", answer("@a[1]")),
    (
        "<stop_analysis><thought>Done.</thought>\nThe mean is @a[1].\n</stop_analysis>",
        answer("The mean is @a[1].", "Done."),
    ),
    (
        "<stop_analysis><thought>Done.</thought><answer>@a[1]</answer></stop_analysis>\nThanks!",
        answer("@a[1]", "Done."),
    ),
    ("<stop_analysis><thought>Done.</thought><answer>@a[1]", answer("@a[1]", "Done.")),
    # answer and code: the first one wins
    (
        f"<stop_analysis><answer>@a[1]</answer></stop_analysis><step>{RUN}<action_input>print(1)</action_input></step>",
        answer("@a[1]"),
    ),
    (
        f"<step>{RUN}<action_input>print(1)</action_input></step><stop_analysis><answer>@a[1]</answer></stop_analysis>",
        code(),
    ),
    # a hallucinated observation is dropped
    (
        f"<step>{RUN}<action_input>print(1)</action_input></step>\n<observation>1</observation>\n<answer>@a[1]</answer>",
        code(),
    ),
    # void: another tool, empty input, a stop_analysis without an answer, garbage
    (
        "<step><thought>Query.</thought><action>sql_executor</action><action_input>SELECT 1</action_input></step>",
        void("Query."),
    ),
    (f"<step><thought>Hmm.</thought>{RUN}<action_input>\n</action_input></step>", void("Hmm.")),
    ("<stop_analysis><thought>Cannot tell.</thought></stop_analysis>", void("Cannot tell.")),
    ("I am not sure.", void("I am not sure.")),
]

TABLE = [("datamind", *case) for case in DATAMIND] + [("jupiter", *case) for case in JUPITER]
TABLE += [("datarus", *case) for case in DATARUS]


@pytest.mark.parametrize(("name", "completion", "expected"), TABLE)
def test_parse_reads_canonical_and_malformed_turns(name, completion, expected):
    assert get_dialect(name).parse(completion) == expected


# --- properties ----------------------------------------------------------------------------------

_MARKERS = re.compile(
    r"```|<\s*/?\s*(think|code|answer|interpreter|step|thought|action|action_input|stop_analysis|observation)\s*>"
    r"|^[ \t]*(?:[*_#]+[ \t]*)?(thought|action|(?:formatted|final)[ \t]+answer|observation)[ \t]*(?:[*_]+[ \t]*)?:"
    r"|Observation:",
    re.IGNORECASE | re.MULTILINE,
)
"""Text that any dialect reads as structure; generated thoughts and code avoid it."""

_WORDS = string.ascii_letters + string.digits + " .,;:!?'\"()[]{}=+-*/%_@#$&|^~\\"
_thoughts = st.text(alphabet=_WORDS + "\n", max_size=60).map(str.strip).filter(lambda s: not _MARKERS.search(s))
_line = st.text(alphabet=_WORDS + "<>", min_size=1, max_size=30).map(str.strip).filter(bool)
_codes = st.builds(
    lambda first, rest: "\n".join([first] + [indent + line for indent, line in rest]),
    _line,
    st.lists(st.tuples(st.sampled_from(["", "    ", "        "]), _line), max_size=4),
).filter(lambda s: not _MARKERS.search(s))
_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.2f}"),
    st.integers().map(str),
    st.from_regex(r"[A-Za-z][A-Za-z ]{0,10}[A-Za-z]", fullmatch=True),
)
_labels = st.builds(
    lambda name, value: f"@{name}[{value}]", st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True), _values
)
_answers = st.builds(
    lambda prefix, labels, sep: (prefix + " " if prefix else "") + sep.join(labels),
    st.sampled_from(["", "The result is", "Answer:"]),
    st.lists(_labels, min_size=1, max_size=3),
    st.sampled_from([" ", ", ", "\n"]),
)
_steps = st.one_of(
    st.builds(Step, thought=_thoughts, code=_codes),
    st.builds(Step, thought=_thoughts, answer=_answers),
    st.builds(Step, thought=_thoughts),
)


@PROPERTY
@given(name=st.sampled_from(DIALECTS), step=_steps)
def test_parse_reads_back_what_render_writes(name, step):
    dialect = get_dialect(name)
    assert dialect.parse(dialect.render(step)) == step


def _assert_consistent(step: Step) -> None:
    assert isinstance(step, Step)
    assert step.thought == step.thought.strip()
    if step.answer is not None:
        assert step.answer.strip() == step.answer and step.answer and step.code is None
        assert step.kind is ActionKind.ANSWER
    elif step.code is not None:
        assert step.code.strip() and step.kind is ActionKind.CODE
    else:
        assert step.kind is ActionKind.VOID


_FRAGMENTS = [
    "<think>", "</think>", "<code>", "</code>", "<answer>", "</answer>", "<interpreter>", "<step>", "</step>",
    "<thought>", "</thought>", "<action>", "</action>", "python_executor", "<action_input>", "</action_input>",
    "<stop_analysis>", "</stop_analysis>", "<observation>", "<ANSWER>", "< /code >", FENCE, "```python\n", "```py ",
    "\n", "\n\n", "Thought: ", "Action:\n", "Formatted answer: ", "Observation: ", "**", "@x[1]", "print(1)", "    ",
]  # fmt: skip
_spliced = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join)


@PROPERTY
@given(name=st.sampled_from(DIALECTS), text=st.one_of(st.text(max_size=300), _spliced))
def test_parse_never_raises_and_returns_a_consistent_step(name, text):
    _assert_consistent(get_dialect(name).parse(text))


@PROPERTY
@given(name=st.sampled_from(DIALECTS), first=_steps, second=_steps, data=st.data())
def test_parse_copes_with_splices_of_valid_turns(name, first, second, data):
    dialect = get_dialect(name)
    a, b = dialect.render(first), dialect.render(second)
    cut_a = data.draw(st.integers(0, len(a)))
    cut_b = data.draw(st.integers(0, len(b)))
    _assert_consistent(dialect.parse(a[:cut_a] + b[cut_b:]))
    _assert_consistent(dialect.parse(a[:cut_a]))
    assume(first.kind is not ActionKind.VOID)
    assert dialect.parse(a + "\n" + b) == first, "the first action of a turn wins"


_LONG = 50_000
_PATHOLOGICAL = [
    " " * _LONG + "x",
    "<" + " " * _LONG,
    "Thought" + " " * _LONG,
    "**" + " " * _LONG + "Action",
    "``` " * (_LONG // 4),
    "<code><answer></think>" * (_LONG // 20),
    "Action:\n```sql\nx\n```\n" * (_LONG // 20),
    "Formatted answer:\n```\n```\n" * (_LONG // 25),
    "<step><action>sql</action><action_input>\n" * (_LONG // 40),
]


@pytest.mark.timeout(60)  # a regex that backtracks quadratically would take minutes on these, not milliseconds
@pytest.mark.parametrize("text", _PATHOLOGICAL, ids=range(len(_PATHOLOGICAL)))
def test_parse_stays_linear_on_long_degenerate_turns(dialect, text):
    _assert_consistent(dialect.parse(text))


@pytest.mark.parametrize("name", DIALECTS)
def test_the_gold_answer_never_reaches_the_prompt(name):
    task = Task(
        id="g", question="How many rows?", format="@rows[n]", answer={"rows": "GOLD-4711"},
        answer_sql="SELECT 'GOLD-SQL-4712'", judge="sql",
    )  # fmt: skip
    system, first = get_dialect(name).opening(PromptContext(task=task, file_names=["a.csv"], file_info="a.csv: 3 rows"))
    assert "GOLD-" not in system + first and "How many rows?" in first


# --- the kept turn: cut after the first action --------------------------------------------------

_FIRST_ACTION_THEN_MORE = {
    "datamind": (
        "<think>Sum it.</think>\n<code>\n```python\nprint(1)\n```\n</code>",
        "\n<answer>North</answer>",
    ),
    "jupiter": ("Thought: Sum it.\nAction:\n```python\nprint(1)\n```", "\nFormatted answer: North\nObservation: 1"),
    "datarus": (
        "<step>\n<thought>Sum it.</thought>\n<action>python_executor</action>\n<action_input>\nprint(1)\n"
        "</action_input>\n</step>",
        "\n<stop_analysis><answer>North</answer></stop_analysis>",
    ),
}


@pytest.mark.parametrize("name", DIALECTS)
def test_the_kept_turn_ends_after_the_first_action_with_its_closing_tags(name):
    dialect = get_dialect(name)
    kept, extra = _FIRST_ACTION_THEN_MORE[name]
    assert dialect.action_end(kept + extra) == len(kept)
    assert dialect.parse(kept) == dialect.parse(kept + extra) == code("print(1)", thought="Sum it.")


@pytest.mark.parametrize("name", DIALECTS)
def test_an_answer_turn_is_kept_through_its_closing_tags(name):
    dialect = get_dialect(name)
    turn = dialect.render(answer("@x[1]", thought="Done."))
    assert dialect.action_end(turn + "\n\nSome chatter after the answer.") == len(turn)


@pytest.mark.parametrize("name", DIALECTS)
def test_a_void_turn_is_kept_up_to_an_invented_observation(name):
    dialect = get_dialect(name)
    observation = dialect.observation("42")
    assert dialect.action_end("I am not sure yet.\n" + observation) == len("I am not sure yet.\n")


@PROPERTY
@given(name=st.sampled_from(DIALECTS), text=st.one_of(st.text(max_size=300), _spliced))
@example(name="datarus", text="```<ANSWER>0<ACTION>")  # a bare fence opened before an answer, a tag after it
@example(name="datarus", text="```<ANSWER>0<ACTION_INPUT>0")
@example(name="datamind", text="```<answer>0<code>x")
@example(name="datarus", text="<ACTION_INPUT>0<ANSWER>0<ACTION>")  # code, then an answer, then another tool
def test_the_kept_turn_parses_like_the_whole_completion(name, text):
    dialect = get_dialect(name)
    end = dialect.action_end(text)
    assert 0 <= end <= len(text)
    assert dialect.parse(text[:end]) == dialect.parse(text)


@PROPERTY
@given(name=st.sampled_from(DIALECTS), first=_steps, second=_steps)
def test_a_rendered_turn_is_kept_whole(name, first, second):
    dialect = get_dialect(name)
    assume(first.kind is not ActionKind.VOID)
    turn = dialect.render(first)
    assert dialect.action_end(turn + "\n" + dialect.render(second)) == len(turn)


def test_opening_names_the_libraries_the_sandbox_has(dialect):
    system, _ = dialect.opening(_context(has_database=False))
    for library in ("pandas", "scipy", "sklearn", "statsmodels", "seaborn"):
        assert library in system


# --- the program dialect (programming tasks) -----------------------------------------------------


def test_a_program_turn_answers_with_its_first_code_block():
    program = get_dialect("program")
    code = "n = int(input())\nprint(n * n)"
    text = f"Read n, print its square.\n{FENCE}python\n{code}\n{FENCE}\nThat is all.{FENCE}x{FENCE}"
    step = program.parse(text)
    assert (step.kind, step.thought, step.answer) == (ActionKind.ANSWER, "Read n, print its square.", code)
    assert text[: program.action_end(text)].endswith(f"print(n * n)\n{FENCE}")
    assert program.parse(program.render(step)) == step
    assert program.parse("I am not sure how.").kind == ActionKind.VOID
    assert FENCE in program.void_feedback()
    assert program.observation("\nInput 3: expected 9, got 6.\n") == "Input 3: expected 9, got 6."


def test_the_program_prompt_fits_the_kind_of_test():
    program = get_dialect("program")
    stub = 'def inc(x: int) -> int:\n    """One more than x."""\n'
    check = "def check(f):\n    assert f(1) == 2"
    humaneval = Task(id="h", question=stub, judge="humaneval", check=check, entry_point="inc")
    system, user = program.opening(PromptContext(task=humaneval, file_names=[], file_info=""))
    assert "Complete the function" in system and user == f"{FENCE}python\n{stub.strip()}\n{FENCE}"
    problem = Task(id="s", question="Print the n-th prime.", judge="cases")
    system, user = program.opening(PromptContext(task=problem, file_names=[], file_info=""))
    assert "standard input" in system and user == "Print the n-th prime."
