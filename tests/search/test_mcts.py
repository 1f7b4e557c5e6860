"""MCTS over the real agent and sandbox, with a scripted model whose turns depend on what the cells printed."""

from __future__ import annotations

import asyncio
import math

import pytest
from script_helpers import ScriptModel

from datalyst.agent import Agent, AgentConfig
from datalyst.llm import Completion
from datalyst.search import Ending, MCTSConfig, Tree, decide, mcts
from datalyst.tasks import Task


@pytest.fixture
def task():
    return Task(id="x", question="What is x?", judge="dabench", answer={"x": "20"})


def search(task, config, tree=None, saved=None):
    agent = Agent(ScriptModel(), AgentConfig(dialect="jupiter"))
    on_simulation = (lambda tree: tree.save(saved)) if saved else None
    return asyncio.run(mcts(agent, task, config, judged=True, tree=tree, on_simulation=on_simulation))


def test_each_branch_runs_in_its_own_sandbox_and_answers_are_judged(task):
    tree = search(task, MCTSConfig(simulations=6, expansions=2, c_puct=0.0))
    by_code = {node.turn.code: node for node in tree.nodes[1:3]}
    printed = [tree.nodes[i] for i in by_code["x = 20"].children if tree.nodes[i].turn.code == "print(x)"]
    assert printed and printed[0].turn.observation.strip() == "20"
    right = [node for node in tree.candidates() if node.answer == "@x[20]"]
    assert right and right[0].estimate == 1.0
    wrong = [node for node in tree.candidates() if node.answer == "@x[10]"]
    assert wrong and all(node.estimate == -1.0 for node in wrong)
    assert tree.nodes[1].prior == pytest.approx(math.exp(-0.5))


def test_visits_count_every_child_backed_up(task):
    tree = search(task, MCTSConfig(simulations=3, expansions=3, c_puct=1.25))
    assert tree.simulations == 3 and tree.finished
    assert tree.nodes[0].visits == len(tree.nodes) - 1
    assert tree.cost.cells == sum(node.turn.code is not None for node in tree.nodes[1:])
    assert tree.cost.completion_tokens == 5 * (len(tree.nodes) - 1)


def test_a_search_stops_when_every_branch_has_ended(task):
    tree = search(task, MCTSConfig(simulations=40, expansions=3, max_depth=2))
    assert tree.finished and tree.simulations < 40
    assert all(node.terminal for node in tree.nodes if not node.children)
    assert {node.ending for node in tree.nodes if node.terminal} >= {Ending.ANSWER, Ending.VOID}


def test_a_saved_search_goes_on_where_it_stopped(task, tmp_path):
    saved = tmp_path / "x.json"
    search(task, MCTSConfig(simulations=2, expansions=2), saved=saved)
    first = Tree.load(saved)
    assert first.finished and first.simulations == 2
    resumed = search(task, MCTSConfig(simulations=6, expansions=2), tree=first.model_copy(update={"finished": False}))
    assert resumed.simulations == 6
    assert [node.turn for node in resumed.nodes[: len(first.nodes)]] == [node.turn for node in first.nodes]
    # x = 20 (node 2) was left open: its sandbox was rebuilt by running its cell again
    under = [resumed.nodes[i] for i in resumed.nodes[2].children if resumed.nodes[i].turn.code == "print(x)"]
    assert resumed.nodes[2].turn.code == "x = 20" and under[0].turn.observation.strip() == "20"


def test_the_decided_answer_is_the_vote_of_the_answers_found(task):
    tree = search(task, MCTSConfig(simulations=6, expansions=2))
    answers = [node.answer for node in tree.candidates()]
    assert decide(tree) == max(set(answers), key=answers.count)


class FailingModel(ScriptModel):
    """Every turn runs a cell that raises."""

    async def agenerate(self, messages, params):
        self.calls += 1
        text = "Thought: try.\nAction:\n```python\n1/0\n```"
        return [Completion(text=text, finish_reason="stop", completion_tokens=5)] * params.n


def test_three_failing_cells_in_a_row_end_a_branch_at_minus_one(task):
    agent = Agent(FailingModel(), AgentConfig(dialect="jupiter"))
    tree = asyncio.run(mcts(agent, task, MCTSConfig(simulations=10, expansions=1, max_errors=3), judged=True))
    assert [node.errors_in_a_row for node in tree.nodes[1:]] == [1, 2, 3]
    last = tree.nodes[3]
    assert last.ending is Ending.ERRORS and last.estimate == -1.0
    assert tree.finished and tree.simulations == 3  # nothing left to expand
    assert tree.nodes[0].value_sum == -1.0 and tree.nodes[0].visits == 3
