"""A real search: the embedded ``tiny`` model through llama.cpp, several turns per expansion, real sandboxes."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.agent import Agent, AgentConfig
from datalyst.llm import SamplingParams, load_model
from datalyst.search import MCTSConfig, Tree, mcts
from datalyst.tasks import Task

pytest.importorskip("llama_cpp", reason="needs pip install 'datalyst[llamacpp]'")
pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_a_real_model_expands_a_tree_with_priors_costs_and_judged_answers(examples_dir):
    task = Task(id="rows", question="How many rows does the table have?", judge="dabench", answer={"rows": "60"},
                files=[str(examples_dir / "sales.csv")])  # fmt: skip
    sampling = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=120, seed=0)
    agent_config = AgentConfig(dialect="jupiter", sampling=sampling)
    model = load_model("embedded:tiny")

    async def main() -> Tree:
        try:
            return await mcts(Agent(model, agent_config), task, MCTSConfig(simulations=2, expansions=2, max_depth=3,
                              c_puct=1.25), judged=True)  # fmt: skip
        finally:
            await model.aclose()

    tree = asyncio.run(main())
    assert tree.finished and 1 <= tree.simulations <= 2 and len(tree.nodes[0].children) == 2
    children = tree.nodes[1:]
    assert all(0.0 < node.prior <= 1.0 and node.turn.completion_tokens > 0 for node in children)
    assert tree.nodes[0].visits == len(children)
    assert all(node.estimate in (-1.0, 0.0) or 0.0 < node.estimate <= 1.0 for node in children)
    assert tree.cost.completion_tokens == sum(node.turn.completion_tokens for node in children)
    assert tree.cost.cells == sum(node.turn.code is not None for node in children)
    assert Tree.model_validate_json(tree.model_dump_json()) == tree
