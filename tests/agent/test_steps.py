"""The step-wise agent: start, propose, advance, close; and the turn kept in the conversation."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.agent import Agent, AgentConfig, Termination, to_messages
from datalyst.agent._agent import REDRAW_TEMPERATURE
from datalyst.llm import Completion, ReplayModel, SamplingParams
from datalyst.tasks import Task

QUESTION = "Which region has the highest total revenue?"
BEST_REGION = "import pandas as pd\nprint(pd.read_csv('sales.csv').groupby('region')['revenue'].sum().idxmax())"

# A first turn that writes the right code and, before seeing any output, a wrong answer (as the
# README's example did with embedded:medium); then a turn that answers from the output.
EAGER = {
    "datamind": [
        f"<think>Group by region.</think>\n<code>\n```python\n{BEST_REGION}\n```\n</code>\n<answer>North</answer>",
        "<think>The output says West.</think>\n<answer>West</answer>",
    ],
    "jupiter": [
        f"Thought: Group by region.\nAction:\n```python\n{BEST_REGION}\n```\nFormatted answer: North",
        "Thought: The output says West.\nFormatted answer: West",
    ],
    "datarus": [
        "<step>\n<thought>Group by region.</thought>\n<action>python_executor</action>\n"
        f"<action_input>\n{BEST_REGION}\n</action_input>\n</step>\n"
        "<stop_analysis><answer>North</answer></stop_analysis>",
        "<stop_analysis><thought>The output says West.</thought><answer>West</answer></stop_analysis>",
    ],
}


@pytest.fixture
def sales_task(examples_dir):
    return Task(id="best-region", question=QUESTION, files=[str(examples_dir / "sales.csv")])


@pytest.mark.parametrize("dialect", sorted(EAGER))
def test_text_after_the_first_action_never_reaches_the_conversation(sales_task, dialect):
    model = ReplayModel(EAGER[dialect], per_turn=True)
    trajectory = asyncio.run(Agent(model, AgentConfig(dialect=dialect)).arun(sales_task))
    first = trajectory.turns[0]
    assert first.observation == "West" and "North" not in first.text
    assert trajectory.answer == "West" and trajectory.termination == Termination.ANSWER
    said = [message.content for message in model.calls[-1][0] if message.role == "assistant"]
    assert said and all("North" not in content for content in said)
    assert all("North" not in message.content for message in to_messages(trajectory) if message.role == "assistant")


@pytest.mark.parametrize("dialect", ["datamind", "datarus"])
def test_generation_stops_at_the_closing_tag_of_the_first_action(sales_task, dialect):
    trajectory = asyncio.run(
        Agent(ReplayModel(EAGER[dialect], per_turn=True), AgentConfig(dialect=dialect)).arun(sales_task)
    )
    first = trajectory.turns[0]
    assert "North" not in first.raw, "the stop sequence ends generation after the code"
    assert first.text == first.raw and first.text.rstrip().endswith(("</code>", "</step>"))


def test_the_kept_turn_carries_the_token_ids_of_its_text(sales_task):
    """Ids and logprobs of the kept turn agree with its text (cut at a token boundary)."""
    words = EAGER["jupiter"][0].split(" ")
    pieces = [word + " " for word in words[:-1]] + [words[-1]]
    offsets = [sum(len(piece) for piece in pieces[: i + 1]) for i in range(len(pieces))]
    completion = Completion(
        text="".join(pieces), finish_reason="stop", token_ids=list(range(len(pieces))), offsets=offsets
    )
    agent = Agent(ReplayModel([completion, EAGER["jupiter"][1]], per_turn=True), AgentConfig(dialect="jupiter"))
    first = asyncio.run(agent.arun(sales_task)).turns[0]
    assert first.token_ids == list(range(len(first.token_ids or [])))
    assert "".join(pieces[: len(first.token_ids or [])]) == first.text
    assert first.text.startswith(EAGER["jupiter"][0].split("Formatted")[0].rstrip()) and "North" not in first.text


def test_propose_gives_candidates_and_advance_returns_a_new_state(sales_task):
    candidates_script = [
        f"<code>\n```python\n{BEST_REGION}\n```\n</code>",
        "<answer>South</answer>",
        "I am not sure.",
    ]
    agent = Agent(ReplayModel(candidates_script, per_turn=True), AgentConfig(max_turns=2))

    async def main():
        state = await agent.start(sales_task, trial=1)
        try:
            candidates = await agent.propose(state, 3)
            assert [c.text for c in candidates] == candidates_script
            after_code = await agent.advance(state, candidates[0])
            after_answer = await agent.advance(state, candidates[1])
            after_void = await agent.advance(state, candidates[2])
            return state, after_code, after_answer, after_void
        finally:
            await agent.close(state)

    state, after_code, after_answer, after_void = asyncio.run(main())
    assert state.turns == [] and len(state.messages) == 2 and not state.done
    assert after_code.turns[0].observation == "West" and not after_code.done and len(after_code.messages) == 4
    assert after_answer.done and after_answer.trajectory.answer == "South"
    assert after_answer.trajectory.termination == Termination.ANSWER and state.trajectory.answer is None
    assert after_void.turns[0].is_void and after_void.errors_in_a_row == 0
    assert after_code.trajectory.id == "best-region#1" and after_code.trajectory.trial == 1


def test_the_last_allowed_turn_ends_the_state(sales_task):
    agent = Agent(ReplayModel(["still thinking"] * 3, per_turn=False), AgentConfig(max_turns=1))
    trajectory = asyncio.run(agent.arun(sales_task))
    assert trajectory.termination == Termination.MAX_TURNS and len(trajectory.turns) == 1


def test_a_restored_state_has_the_conversation_variables_and_files_of_the_trajectory(sales_task):
    cells = [
        "Thought: Load.\nAction:\n```python\nx = 1\nopen('note.txt', 'w').write('hi')\n```",
        "Thought: Break.\nAction:\n```python\nraise ValueError('no')\n```",
    ]
    agent = Agent(ReplayModel(cells, per_turn=True), AgentConfig(dialect="jupiter", max_turns=2))
    trajectory = asyncio.run(agent.arun(sales_task))

    async def restored_then_run() -> tuple:
        state = await agent.restore(trajectory)
        try:
            sandbox = await state.sandbox.get()
            return state, (await sandbox.arun_python("print(x + 1, open('note.txt').read())")).stdout
        finally:
            await state.sandbox.aclose()

    state, printed = asyncio.run(restored_then_run())
    assert printed.strip() == "2 hi"
    assert [m.content for m in state.messages] == [m.content for m in to_messages(trajectory)]
    assert state.errors_in_a_row == 1 and state.turns == trajectory.turns


def test_a_repeat_of_the_cell_that_just_failed_is_not_run_again(sales_task):
    broken = "Thought: Sum it.\nAction:\n```python\nprint(undefined_total)\n```"
    again = "Thought: Sum it.\nAction:\n```python\nprint(undefined_total)   \n```"  # the same cell, spaces aside
    fixed = "Thought: Define it.\nAction:\n```python\nundefined_total = 1\nprint(undefined_total)\n```"
    script = [broken, again, fixed, "Thought: Done.\nFormatted answer: 1"]
    config = AgentConfig(dialect="jupiter", repeat_guard=True, max_consecutive_errors=3)
    trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True), config).arun(sales_task))
    first, repeated, third = trajectory.turns[:3]
    assert repeated.redraws == 2  # drawn again twice, the same cell each time (the script has nothing else)
    assert repeated.result == first.result and repeated.execution_s == 0.0  # the error it would give again
    assert repeated.observation.startswith("This is the code of an earlier cell, which failed, so it was not run again")
    assert "NameError" in repeated.observation and third.result.ok and trajectory.answer == "1"
    unguarded = asyncio.run(Agent(ReplayModel(script, per_turn=True), AgentConfig(dialect="jupiter")).arun(sales_task))
    assert unguarded.turns[1].execution_s > 0 and not unguarded.turns[1].result.ok  # run again, failed again


def test_a_repeat_of_an_earlier_cell_that_ran_is_not_run_again(sales_task):
    load = "Thought: Load it.\nAction:\n```python\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n```"
    look = "Thought: Look.\nAction:\n```python\nprint(len(df))\n```"
    load_again = load.replace("df =", "df  =")  # the first cell again, spaces aside
    script = [load, look, load_again, "Thought: Done.\nFormatted answer: 4"]
    config = AgentConfig(dialect="jupiter", repeat_guard=True)
    trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True), config).arun(sales_task))
    first, _, repeated, _ = trajectory.turns
    assert repeated.redraws == 2 and repeated.execution_s == 0.0 and repeated.result == first.result
    assert repeated.observation.startswith("This is the code of an earlier cell, which already ran")
    assert "Traceback" not in repeated.observation and trajectory.answer == "4"


def test_a_repeat_of_the_failing_cell_is_drawn_again_hotter_and_set_aside(sales_task):
    broken = "Thought: Sum it.\nAction:\n```python\nprint(undefined_total)\n```"
    fixed = "Thought: Define it.\nAction:\n```python\nundefined_total = 1\nprint(undefined_total)\n```"
    model = ReplayModel([broken, broken, fixed, "Thought: Done.\nFormatted answer: 1"])  # one output per call
    config = AgentConfig(dialect="jupiter", repeat_guard=True, sampling=SamplingParams(temperature=0.0, seed=3))
    trajectory = asyncio.run(Agent(model, config).arun(sales_task))
    first, second, _ = trajectory.turns
    assert [turn.redraws for turn in trajectory.turns] == [0, 1, 0] and second.result.ok and trajectory.answer == "1"
    temperatures = [params.temperature for _, params in model.calls]
    assert temperatures == [0.0, 0.0, REDRAW_TEMPERATURE, 0.0]
    assert model.calls[1][1].seed != model.calls[2][1].seed  # the drawing again has a seed of its own
    assert model.calls[1][0] == model.calls[2][0]  # drawn again from the same conversation
    assert [m.content for m in model.calls[3][0]].count(first.text) == 1  # the repeat is not in the conversation


def test_repeats_count_as_failing_cells(sales_task):
    broken = "Thought: Sum it.\nAction:\n```python\nprint(undefined_total)\n```"
    config = AgentConfig(dialect="jupiter", repeat_guard=True, max_consecutive_errors=3)
    trajectory = asyncio.run(Agent(ReplayModel([broken] * 5, per_turn=True), config).arun(sales_task))
    assert trajectory.termination == Termination.EXECUTION_ERRORS and len(trajectory.turns) == 3
    assert trajectory.turns[2].observation.count("This is the code of an earlier cell") == 1


# What the model writes after the last call, where its turn is begun with the dialect's answer_start.
AFTER_LAST_CALL = {"datamind": "West\n</answer>", "jupiter": " West", "datarus": "West</answer></stop_analysis>"}


@pytest.mark.parametrize("dialect", sorted(EAGER))
def test_the_last_call_asks_once_for_an_answer_when_no_turn_is_left(sales_task, dialect):
    code_turn = EAGER[dialect][0].split("<answer>")[0].split("Formatted answer")[0].split("<stop_analysis>")[0]
    script = [code_turn, AFTER_LAST_CALL[dialect]]
    config = AgentConfig(dialect=dialect, max_turns=1, last_call=True)
    model = ReplayModel(script, per_turn=True)
    trajectory = asyncio.run(Agent(model, config).arun(sales_task))
    first, last = trajectory.turns
    assert first.result.ok and first.last_call.startswith("No code can run any more")
    assert last.answer == "West" and trajectory.answer == "West" and trajectory.termination == Termination.ANSWER
    *_, asked, begun = model.calls[-1][0]  # the output and the call in one message, then the turn begun
    assert asked.content.endswith(first.last_call) and "West" in asked.content
    assert begun.role == "assistant" and last.text.startswith(begun.content) and last.token_ids is None
    assert [m.content for m in to_messages(trajectory)][-2:] == [asked.content, last.text]
    alone = AgentConfig(dialect=dialect, max_turns=1)
    without = asyncio.run(Agent(ReplayModel(script, per_turn=True), alone).arun(sales_task))
    assert without.termination == Termination.MAX_TURNS and without.answer is None and len(without.turns) == 1


def test_a_last_turn_without_an_answer_ends_the_run_as_it_would_have(sales_task):
    broken = "Thought: Sum it.\nAction:\n```python\nprint(undefined_total)\n```"
    script = [broken, broken, "\nThought: Fix it.\nAction:\n```python\nprint(1)\n```"]
    config = AgentConfig(dialect="jupiter", max_consecutive_errors=2, last_call=True)
    trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True), config).arun(sales_task))
    assert trajectory.termination == Termination.EXECUTION_ERRORS and len(trajectory.turns) == 3
    assert trajectory.turns[1].last_call and trajectory.turns[2].code == "print(1)"
    assert trajectory.turns[2].result is None and trajectory.turns[2].observation is None  # not run
    assert to_messages(trajectory)[-1].role == "assistant"


FORMATTED = "@best_region[region] where region is the name of the region with the highest total revenue."
ANSWERS = {  # the first answer gives none of the format's parts; the second is begun with the first part's name
    "datamind": ("<think>It is West.</think>\n<answer>West</answer>", "West]\n</answer>"),
    "jupiter": ("Thought: It is West.\nFormatted answer: West", "West]"),
    "datarus": ("<stop_analysis><answer>West</answer></stop_analysis>", "West]</answer></stop_analysis>"),
}


@pytest.mark.parametrize("dialect", sorted(ANSWERS))
def test_the_format_check_asks_once_again_for_an_answer_that_misses_a_part(sales_task, dialect):
    task = sales_task.model_copy(update={"format": FORMATTED})
    model = ReplayModel(list(ANSWERS[dialect]), per_turn=True)
    trajectory = asyncio.run(Agent(model, AgentConfig(dialect=dialect, format_check=True)).arun(task))
    first, second = trajectory.turns
    assert first.answer == "West" and "it does not give @best_region[...]" in first.format_check
    assert FORMATTED in first.format_check
    assert trajectory.answer == "@best_region[West]" and trajectory.termination == Termination.ANSWER
    *_, asked, begun = model.calls[-1][0]
    assert asked.role == "user" and asked.content == first.format_check
    assert begun.role == "assistant" and begun.content.endswith("@best_region[")
    assert second.text.startswith(begun.content) and second.token_ids is None
    assert [m.content for m in to_messages(trajectory)][-2:] == [first.format_check, second.text]
    assert [m.failed for m in to_messages(trajectory) if not m.is_environment] == [True, False]  # out of the loss
    plain = asyncio.run(
        Agent(ReplayModel(list(ANSWERS[dialect]), per_turn=True), AgentConfig(dialect=dialect)).arun(task)
    )
    assert plain.answer == "West" and len(plain.turns) == 1 and plain.turns[0].format_check is None


def test_the_format_check_asks_only_once_and_an_empty_reply_keeps_the_first_answer(sales_task):
    task = sales_task.model_copy(update={"format": "@region[name] @revenue[total, rounded to two decimal places]"})
    config = AgentConfig(dialect="jupiter", format_check=True)
    model = ReplayModel(["Formatted answer: @region[West]", " @region[West] @revenue[1.2345]"], per_turn=True)
    again = asyncio.run(Agent(model, config).arun(task))
    assert model.calls[-1][0][-1].content == "Formatted answer:"  # a part was given: no name is begun
    assert [turn.format_check is not None for turn in again.turns] == [True, False]
    assert again.answer == "@region[West] @revenue[1.2345]" and again.termination == Termination.ANSWER
    worse = ReplayModel(["Formatted answer: @region[West] @revenue[1.2345]", " West"], per_turn=True)
    kept = asyncio.run(Agent(worse, config).arun(task))  # a reply that fits the format worse keeps the first answer
    assert kept.turns[1].answer == "West" and kept.answer == "@region[West] @revenue[1.2345]"
    unfinished = asyncio.run(  # the first part begun, and the model wrote nothing after it
        Agent(ReplayModel(["Formatted answer: West", ""], per_turn=True), config).arun(
            task.model_copy(update={"format": FORMATTED})
        )
    )
    assert unfinished.turns[1].text == "Formatted answer: @best_region[" and unfinished.answer == "West"
    empty = asyncio.run(Agent(ReplayModel(["Formatted answer: @region[West]", ""], per_turn=True), config).arun(task))
    assert empty.answer == "@region[West]" and len(empty.turns) == 2


def test_the_format_check_leaves_answers_that_fit_and_tasks_without_a_format_alone(sales_task):
    config = AgentConfig(dialect="jupiter", format_check=True)
    task = sales_task.model_copy(update={"format": FORMATTED})
    fits = asyncio.run(Agent(ReplayModel(["Formatted answer: @best_region[West]"]), config).arun(task))
    free = asyncio.run(Agent(ReplayModel(["Formatted answer: West"]), config).arun(sales_task))
    assert [len(fits.turns), len(free.turns)] == [1, 1]
    assert fits.answer == "@best_region[West]" and free.answer == "West"


def test_a_last_call_answer_that_misses_a_part_is_checked_too(sales_task):
    task = sales_task.model_copy(update={"format": FORMATTED})
    code_turn = EAGER["jupiter"][0].split("Formatted answer")[0]
    config = AgentConfig(dialect="jupiter", max_turns=1, last_call=True, format_check=True)
    trajectory = asyncio.run(Agent(ReplayModel([code_turn, " West", "West]"], per_turn=True), config).arun(task))
    assert [bool(t.last_call) for t in trajectory.turns] == [True, False, False]
    assert [bool(t.format_check) for t in trajectory.turns] == [False, True, False]
    assert trajectory.answer == "@best_region[West]" and trajectory.termination == Termination.ANSWER
