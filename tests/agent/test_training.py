"""Training examples: ids that decode to the chat template's rendering, a mask on exactly the agent's spans."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from datalyst.agent import Agent, AgentConfig, Trajectory, to_messages, training_example
from datalyst.llm import ChatMessage, ReplayModel, load_tokenizer
from datalyst.tasks import Task

pytestmark = pytest.mark.model

CODE = "import pandas as pd\nprint(pd.read_csv('sales.csv')['region'].nunique())"
SCRIPTS = {
    "datamind": [
        f"<think>Count regions.</think>\n<code>\n```python\n{CODE}\n```\n</code>",
        "<think>Four.</think>\n<answer>@regions[4]</answer>",
    ],
    "jupiter": [
        f"Thought: Count regions.\nAction:\n```python\n{CODE}\n```\nObservation:",
        "Thought: Four.\nFormatted answer: @regions[4]",
    ],
    "datarus": [
        "<step>\n<thought>Count regions.</thought>\n<action>python_executor</action>\n"
        f"<action_input>\n{CODE}\n</action_input>\n</step>",
        "<stop_analysis><thought>Four.</thought><answer>@regions[4]</answer></stop_analysis>",
    ],
}


@pytest.fixture(scope="module", params=["embedded:small", "embedded:tiny"], ids=["qwen2.5", "smollm2"])
def tokenizer(request):
    return load_tokenizer(request.param)


@pytest.fixture(scope="module", params=sorted(SCRIPTS))
def trajectory(request, examples_dir) -> Trajectory:
    task = Task(id="regions", question="How many regions are there?", files=[str(examples_dir / "sales.csv")])
    agent = Agent(ReplayModel(SCRIPTS[request.param], per_turn=True), AgentConfig(dialect=request.param))
    return asyncio.run(agent.arun(task))


def test_ids_decode_to_the_templates_rendering_of_the_conversation(tokenizer, trajectory):
    example = training_example(trajectory, tokenizer)
    chat = [ChatMessage(role=message.role, content=message.content) for message in to_messages(trajectory)]
    assert len(trajectory.turns) == 2 and trajectory.answer == "@regions[4]"
    assert tokenizer.decode(example.input_ids) == tokenizer.render(chat, add_generation_prompt=False)
    assert len(example.loss_mask) == len(example.input_ids)


def test_the_mask_covers_exactly_each_turn_and_the_end_of_turn_token_only_after_the_answer(tokenizer, trajectory):
    example = training_example(trajectory, tokenizer)
    runs = [
        tokenizer.decode([token for token, _ in run])
        for trained, run in itertools.groupby(zip(example.input_ids, example.loss_mask, strict=True), lambda p: p[1])
        if trained
    ]
    code, answer = trajectory.turns
    assert runs == [code.text, answer.text + tokenizer.end_of_turn]
    assert example.loss_mask[0] == 0


def test_the_end_of_turn_token_is_trained_only_where_the_model_wrote_it(examples_dir):
    """A stop string ends a code turn, and an answer the model wrote past was cut by the agent: the model wrote
    no end-of-turn token after either, so none is trained; after the answer it ended itself, it is."""
    tokenizer = load_tokenizer("embedded:small")
    task = Task(id="regions", question="How many regions are there?", files=[str(examples_dir / "sales.csv")])
    rambling = SCRIPTS["jupiter"][1] + "\nThought: I could also plot them.\nAction:\n```python\nplot()\n```"
    for answer, closed in ((SCRIPTS["jupiter"][1], True), (rambling, False)):
        script = [SCRIPTS["jupiter"][0], answer]
        trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True), AgentConfig(dialect="jupiter")).arun(task))
        assert trajectory.answer == "@regions[4]"
        assert [message.closed for message in to_messages(trajectory) if not message.is_environment] == [False, closed]
        ids = trained_ids(training_example(trajectory, tokenizer))
        ends = [index for index, token in enumerate(ids) if tokenizer.decode([token]) == tokenizer.end_of_turn]
        assert ends == ([len(ids) - 1] if closed else [])


def test_training_examples_leave_out_the_sampling_guidance_unless_asked(examples_dir):
    tokenizer = load_tokenizer("embedded:small")
    task = Task(id="regions", question="How many regions are there?", files=[str(examples_dir / "sales.csv")])
    model = ReplayModel(SCRIPTS["datamind"], per_turn=True)
    guided = asyncio.run(Agent(model, guidance=lambda t: "Hint: count distinct values.").arun(task))
    plain = asyncio.run(Agent(ReplayModel(SCRIPTS["datamind"], per_turn=True)).arun(task))
    assert "Hint" in guided.first_message
    assert training_example(guided, tokenizer).input_ids == training_example(plain, tokenizer).input_ids
    assert "Hint" in tokenizer.decode(training_example(guided, tokenizer, guidance=True).input_ids)


def test_a_failed_turn_stays_in_the_context_but_out_of_the_loss_unless_asked(examples_dir):
    tokenizer = load_tokenizer("embedded:small")
    task = Task(id="regions", question="How many regions are there?", files=[str(examples_dir / "sales.csv")])
    wrong = "<think>Count regions.</think>\n<code>\n```python\nprint(undefined_name)\n```\n</code>"
    script = [wrong, *SCRIPTS["datamind"]]
    trajectory = asyncio.run(Agent(ReplayModel(script, per_turn=True)).arun(task))
    assert [turn.result.ok for turn in trajectory.turns[:2]] == [False, True]
    masked, kept = (training_example(trajectory, tokenizer, failed_turns=f) for f in (False, True))
    assert masked.input_ids == kept.input_ids and "NameError" in tokenizer.decode(masked.input_ids)
    trained = [tokenizer.decode(trained_ids(example)) for example in (masked, kept)]
    *code, answer = trajectory.turns
    assert trained[1] == "".join(turn.text for turn in code) + answer.text + tokenizer.end_of_turn
    assert trained[0] == code[1].text + answer.text + tokenizer.end_of_turn


def trained_ids(example) -> list[int]:
    return [token for token, trained in zip(example.input_ids, example.loss_mask, strict=True) if trained]
