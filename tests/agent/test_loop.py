"""The ReAct loop with a scripted model and the real sandbox: stopping rules, observations, exports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import nbformat
import pytest

from datalyst.agent import Agent, AgentConfig, Termination, Trajectory, to_html, to_messages, to_notebook
from datalyst.errors import ModelUnavailable
from datalyst.llm import ChatMessage, Completion, ContextOverflow, ReplayModel, SamplingParams
from datalyst.tasks import Task


def code(source: str, thought: str = "Next step.") -> str:
    return f"<think>{thought}</think>\n<code>\n```python\n{source}\n```\n</code>"


def answer(text: str) -> str:
    return f"<think>I have it.</think>\n<answer>{text}</answer>"


class RecordingModel(ReplayModel):
    """A replay model that keeps every conversation it was shown."""

    def __init__(self, outputs: Sequence[str]) -> None:
        super().__init__(outputs)
        self.seen: list[list[ChatMessage]] = []

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        self.seen.append(list(messages))
        return await super().agenerate(messages, params)


class FailingModel(ReplayModel):
    def __init__(self, error: Exception) -> None:
        super().__init__([])
        self.error = error

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        raise self.error


@pytest.fixture
def task(examples_dir):
    return Task(
        id="sales-total",
        question="What is the total revenue?",
        format="@total_revenue[value] rounded to 2 decimals",
        files=[str(examples_dir / "sales.csv")],
    )


def run(model, task, **config) -> Trajectory:
    return asyncio.run(Agent(model, AgentConfig(**config)).arun(task))


def test_a_correct_run_ends_with_the_answer_and_records_every_turn(task):
    model = RecordingModel(
        [
            code("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.shape)"),
            code("float(round(df['revenue'].sum(), 2))"),
            answer("@total_revenue[15684.58]"),
        ]
    )
    trajectory = run(model, task)
    assert trajectory.termination == Termination.ANSWER and trajectory.answer == "@total_revenue[15684.58]"
    assert [turn.observation for turn in trajectory.turns] == ["(60, 6)", "15684.58", None]
    assert trajectory.turns[1].result.ok and trajectory.turns[0].thought == "Next step."
    # the model saw each observation wrapped the dialect's way, after its own turn
    assert model.seen[1][-1].content == "<interpreter>\n(60, 6)\n</interpreter>"
    assert "sales.csv" in model.seen[0][1].content and "revenue" in model.seen[0][1].content


def test_messages_export_is_exactly_what_the_model_saw(task):
    model = RecordingModel([code("print(1)"), "no idea", code("1/0"), answer("@total_revenue[0]")])
    trajectory = run(model, task)
    exported = to_messages(trajectory)
    last_prompt = model.seen[-1]
    assert [(m.role, m.content) for m in exported[: len(last_prompt)]] == [(m.role, m.content) for m in last_prompt]
    assert exported[-1].content == trajectory.turns[-1].text
    assert [m.is_environment for m in exported] == [m.role != "assistant" for m in exported]


def test_void_turns_are_recorded_and_answered_with_feedback(task):
    trajectory = run(ReplayModel(["Hmm.", "Let me think more.", answer("@total_revenue[1]")]), task)
    assert trajectory.n_void_turns == 2 and trajectory.termination == Termination.ANSWER
    assert trajectory.turns[0].observation and "<answer>" in trajectory.turns[0].observation


def test_the_loop_stops_at_max_turns(task):
    trajectory = run(ReplayModel([code(f"x = {i}") for i in range(5)]), task, max_turns=3)
    assert trajectory.termination == Termination.MAX_TURNS and len(trajectory.turns) == 3
    assert trajectory.answer is None


def test_the_loop_stops_after_consecutive_errors(task):
    outputs = [code("1/0"), code("print('ok')"), code("1/0"), code("undefined_name"), code("[][1]"), code("x")]
    trajectory = run(ReplayModel(outputs), task, max_consecutive_errors=3)
    assert trajectory.termination == Termination.EXECUTION_ERRORS and len(trajectory.turns) == 5


def test_stop_sequences_keep_the_model_from_writing_its_own_observation(task):
    hallucinated = code("print(2 + 2)") + "\n<interpreter>\n5\n</interpreter>\n<answer>@total_revenue[5]</answer>"
    trajectory = run(ReplayModel([hallucinated, answer("@total_revenue[4]")]), task)
    assert trajectory.turns[0].observation == "4" and "<interpreter>" not in trajectory.turns[0].raw
    assert trajectory.answer == "@total_revenue[4]"


def test_long_observations_keep_head_and_tail(task):
    trajectory = run(ReplayModel([code("print('A' * 9000 + 'END')"), answer("x")]), task, max_observation_chars=1000)
    observation = trajectory.turns[0].observation
    assert len(observation) < 1100 and observation.startswith("AAA") and observation.endswith("END")


def test_context_overflow_ends_the_trajectory_and_model_failures_are_raised(task):
    overflow = run(FailingModel(ContextOverflow("prompt too long")), task)
    assert overflow.termination == Termination.CONTEXT_OVERFLOW and overflow.error == "prompt too long"
    with pytest.raises(ModelUnavailable, match="cannot reach"):
        run(FailingModel(ModelUnavailable("cannot reach the server")), task)


@pytest.mark.parametrize("dialect", ["datamind", "jupiter", "datarus"])
def test_every_dialect_runs_end_to_end(task, dialect):
    turns = {
        "datamind": [code("print(6 * 7)"), answer("@total_revenue[42]")],
        "jupiter": ["Thought: compute\nAction:\n```python\nprint(6 * 7)\n```", "Formatted answer: @total_revenue[42]"],
        "datarus": [
            "<step><thought>compute</thought><action>python_executor</action>"
            "<action_input>print(6 * 7)</action_input></step>",
            "<stop_analysis><thought>done</thought><answer>@total_revenue[42]</answer></stop_analysis>",
        ],
    }[dialect]
    trajectory = run(ReplayModel(turns), task, dialect=dialect)
    assert trajectory.turns[0].observation == "42" and trajectory.answer == "@total_revenue[42]"


def test_trajectories_round_trip_and_export(task):
    trajectory = run(
        ReplayModel(
            [
                code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('<b>plotted</b>')"),
                answer("@total_revenue[3]"),
            ]
        ),
        task,
    )
    assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory
    assert json.loads(trajectory.model_dump_json())["schema_version"] == 7
    [figure] = trajectory.turns[0].figures
    notebook = to_notebook(trajectory)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells[0].outputs[0].text == "<b>plotted</b>\n"
    assert code_cells[0].outputs[-1].data["image/png"] == trajectory.turns[0].figures[figure]
    page = to_html(trajectory)
    assert "&lt;b&gt;plotted&lt;/b&gt;" in page and "<b>plotted</b>" not in page
    assert "data:image/png;base64," in page and "@total_revenue[3]" in page


def test_guidance_reaches_the_model_and_is_recorded_apart(task):
    model = RecordingModel([answer("@total_revenue[1.00]")])
    agent = Agent(model, AgentConfig(), guidance=lambda t: f"  Workflow for {t.id}: load, sum, round.  ")
    trajectory = asyncio.run(agent.arun(task))
    added = "\n\nWorkflow for sales-total: load, sum, round."
    assert trajectory.guidance == added
    assert model.seen[0][1].content == trajectory.first_message and trajectory.first_message.endswith(added)
    assert (
        trajectory.task_message == trajectory.first_message.removesuffix(added)
        and "Workflow" not in trajectory.task_message
    )
    assert to_messages(trajectory)[1].content == trajectory.first_message
    assert to_messages(trajectory, guidance=False)[1].content == trajectory.task_message


def test_empty_guidance_adds_nothing(task):
    trajectory = asyncio.run(Agent(RecordingModel([answer("1")]), guidance=lambda t: " \n").arun(task))
    assert trajectory.guidance == "" and trajectory.task_message == trajectory.first_message


def test_a_follow_up_goes_on_in_the_same_sandbox_and_records_what_came_before(task):
    model = RecordingModel(
        [
            code("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))"),
            answer("@total_revenue[1]"),
            code("print(df['revenue'].max())"),  # df is still defined
            answer("the largest sale"),
        ]
    )
    agent = Agent(model, AgentConfig())
    steps = []

    async def conversation() -> tuple[Trajectory, Trajectory]:
        state = await agent.drive(await agent.start(task), on_step=steps.append)
        try:
            first = state.trajectory
            state = await agent.drive(agent.follow_up(state, Task(id="f", question="Largest sale?", files=task.files)))
            return first, state.trajectory
        finally:
            await agent.close(state)

    first, second = asyncio.run(conversation())
    assert [step.kind for step in steps] == ["code", "answer"]  # before each turn ran
    assert steps[0].code == first.turns[0].code
    assert second.answer == "the largest sale" and second.turns[0].result.ok
    assert second.first_message.startswith("Next question") and "Largest sale?" in second.first_message
    before = to_messages(first)
    assert [(m.role, m.content) for m in second.earlier] == [(m.role, m.content) for m in before[1:]]
    seen = [(m.role, m.content) for m in model.seen[2]]
    assert [(m.role, m.content) for m in to_messages(second)[:-3]] == seen  # exactly what the model read
    assert all(m.is_environment for m in to_messages(second)[: len(before) + 1])
    assert first.duration_s > 0 and second.duration_s > first.duration_s  # timed from the conversation's start
    assert second.started_at == first.started_at
    notebook = to_notebook(first, second)
    questions = [cell.source.split("\n")[0] for cell in notebook.cells if cell.source.startswith("# ")]
    assert questions == ["# What is the total revenue?", "# Largest sale?"]
    assert [cell.source for cell in notebook.cells if cell.cell_type == "code"] == [
        first.turns[0].code,
        second.turns[0].code,
    ]
    assert notebook.metadata["datalyst"]["follow_ups"] == ["Largest sale?"]
    page = to_html(first, second)
    assert page.count("<section>") == 2 and "Largest sale?" in page


def test_a_follow_up_task_is_asked_after_its_earlier_questions_in_one_conversation(task):
    from datalyst.tasks import Asked

    model = RecordingModel(
        [
            code("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))"),
            answer("@rows[5]"),
            code("print(round(df['revenue'].sum(), 2))"),  # df is still defined: the same sandbox
            answer("@total_revenue[1]"),
        ]
    )
    follow_up = task.model_copy(update={"earlier": [Asked(question="How many rows?", format="@rows[value]")]})
    trajectory = asyncio.run(Agent(model, AgentConfig(), guidance=lambda t: "A hint.").arun(follow_up, trial=2))
    assert trajectory.task == follow_up and trajectory.trial == 2 and trajectory.id.endswith("2")
    assert [turn.result.ok for turn in trajectory.turns if turn.result] == [True]
    assert trajectory.answer == "@total_revenue[1]"
    assert trajectory.first_message.startswith("Next question") and task.question in trajectory.first_message
    first_question = trajectory.earlier[0].content
    assert "How many rows?" in first_question and "@rows[value]" in first_question and "A hint." not in first_question
    assert [m.content for m in trajectory.earlier[1:]] == [m.content for m in model.seen[1][2:]] + [answer("@rows[5]")]
    training = to_messages(trajectory)
    assert [m.is_environment for m in training] == [True] * 6 + [False, True, False]


def test_a_dialect_without_follow_ups_says_so():
    from datalyst.agent import get_dialect
    from datalyst.errors import ConfigError

    with pytest.raises(ConfigError, match="no follow-up"):
        get_dialect("program").follow_up(Task(id="t", question="q"))
