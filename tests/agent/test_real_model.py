"""End to end with a real model: the embedded ``tiny`` GGUF through llama.cpp and the real sandbox."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.agent import Agent, AgentConfig, Termination, Trajectory, to_messages, to_notebook
from datalyst.llm import SamplingParams, load_model
from datalyst.tasks import Task

pytest.importorskip("llama_cpp", reason="needs pip install 'datalyst[llamacpp]'")
pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.mark.parametrize("dialect", ["datamind", "jupiter"])
def test_a_real_model_produces_a_well_formed_trajectory(examples_dir, dialect):
    task = Task(id="real", question="How many rows does the table have?", files=[str(examples_dir / "sales.csv")])
    sampling = SamplingParams(temperature=0.0, max_tokens=160, logprobs=True)
    config = AgentConfig(dialect=dialect, max_turns=3, sampling=sampling)
    model = load_model("embedded:tiny")

    async def main() -> Trajectory:
        try:
            return await Agent(model, config).arun(task)
        finally:
            await model.aclose()

    trajectory = asyncio.run(main())
    assert trajectory.model == "embedded:tiny" and trajectory.dialect == dialect
    assert trajectory.termination in set(Termination) - {Termination.FAILED}
    assert 1 <= len(trajectory.turns) <= 3 and all(turn.raw for turn in trajectory.turns)
    assert all(turn.completion_tokens > 0 and turn.prompt_tokens > 0 for turn in trajectory.turns)
    for turn in trajectory.turns:  # every code turn really ran in the sandbox
        assert (turn.result is not None) == (turn.kind == "code")
    assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory
    assert len(to_messages(trajectory)) == 2 + len(trajectory.turns) + sum(
        t.observation is not None for t in trajectory.turns
    )
    assert to_notebook(trajectory).cells
    for turn in trajectory.turns:  # the kept turn's ids and logprobs are those of its text, cut at a token
        assert turn.token_ids and model.chat_tokenizer.decode(turn.token_ids) == turn.text
        assert turn.logprobs is not None and len(turn.logprobs) == len(turn.token_ids)
