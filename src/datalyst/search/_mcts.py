"""JUPITER's Monte Carlo tree search over agent states, with forked sandboxes.

One simulation selects an open leaf by PUCT, asks the model for ``expansions`` turns at once, runs each in a
sandbox of its own (the first cell takes the leaf's sandbox, the others forks of it, made before any runs),
values each child and backs the value up:

- a branch that ended (an answer, too many failing cells in a row, a turn with no action, the greatest
  depth, a full context) is worth its reward when a judge knows the answer (``ending_reward``), -1 when it
  ended without an answer, and otherwise the value model's estimate, or 0 without one;
- an open child is worth the value model's estimate, or 0.

Collecting trees for value data (:data:`COLLECT`) explores (``c_puct`` 1.25, 50 simulations); inference
(:data:`INFER`) follows the values (``c_puct`` 0, 40 simulations). The answer is the vote of the answers found.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from datalyst.agent import ActionKind, Agent, AgentState, ajudge_trajectory
from datalyst.judge import majority_answer
from datalyst.llm import Completion, ContextOverflow
from datalyst.search._puct import LOST, backup, ending_reward, select
from datalyst.search._tree import Ending, Node, Tree
from datalyst.tasks import Task
from datalyst.train import ValueModel, state_messages


class MCTSConfig(BaseModel):
    """How one search runs and when it stops (JUPITER's inference settings by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    simulations: int = Field(40, ge=1)
    """Expansions per answer at most; each asks the model for ``expansions`` turns."""
    c_puct: float = Field(0.0, ge=0.0)
    """Exploration weight (0: follow the values)."""
    expansions: int = Field(3, ge=1)
    """Turns proposed per expansion."""
    max_depth: int = Field(10, ge=1)
    """Turns on one branch at most."""
    max_errors: int = Field(3, ge=1)
    """Failing cells in a row that end a branch."""
    seconds: float | None = Field(None, gt=0)
    """Wall time for one task, then the search stops after the simulation under way."""
    tokens: int | None = Field(None, gt=0)
    """Model tokens (prompt and completion) for one task, then the search stops likewise."""
    max_live: int = Field(32, ge=1)
    """Open states kept with a live sandbox; the others close, and are rebuilt by running their cells again
    if search comes back to them."""


COLLECT = MCTSConfig(simulations=50, c_puct=1.25)
INFER = MCTSConfig()

OnSimulation = Callable[[Tree], None]


async def mcts(
    agent: Agent,
    task: Task,
    config: MCTSConfig = INFER,
    *,
    trial: int = 0,
    judged: bool = False,
    value_model: ValueModel | None = None,
    tree: Tree | None = None,
    on_simulation: OnSimulation | None = None,
) -> Tree:
    """Search ``task`` (its ``trial``-th time) and return the tree; ``tree`` (a saved, unfinished one) goes on
    where it stopped.

    ``judged`` values the answers found by their outcome (collecting trees; the task must be ``checkable``);
    otherwise answers are valued like open states.
    ``on_simulation`` is called after every simulation (to save the tree, to show progress)."""
    limits = {"max_turns": config.max_depth, "max_consecutive_errors": config.max_errors}
    agent = Agent(agent.model, agent.config.model_copy(update=limits), guidance=agent.guidance)
    live: dict[int, AgentState] = {}
    if tree is None:
        live[0] = await agent.start(task, trial=trial)
        tree = Tree.start(live[0].trajectory, settings=config.model_dump())
    search = _Search(tree, agent, config, judged, value_model, live)
    began = time.monotonic() - tree.cost.seconds
    try:
        while not tree.finished:
            leaf = select(tree, config.c_puct)
            if leaf is None or tree.simulations >= config.simulations or _spent(tree, config):
                tree.finished = True
            else:
                await search.expand(leaf)
                tree.simulations += 1
            tree.cost.seconds = time.monotonic() - began
            if on_simulation is not None:
                on_simulation(tree)
    finally:
        await search.close()
    return tree


def decide(tree: Tree) -> str | None:
    """The answer most of the tree's answers agree with; a tie goes to the one valued highest."""
    ranked = sorted(tree.candidates(), key=lambda node: -node.q)
    return majority_answer([node.answer for node in ranked])


def _spent(tree: Tree, config: MCTSConfig) -> bool:
    over_time = config.seconds is not None and tree.cost.seconds >= config.seconds
    tokens = tree.cost.prompt_tokens + tree.cost.completion_tokens
    return over_time or (config.tokens is not None and tokens >= config.tokens)


class _Search:
    """The states behind a tree's open leaves, and one expansion."""

    def __init__(
        self,
        tree: Tree,
        agent: Agent,
        config: MCTSConfig,
        judged: bool,
        value_model: ValueModel | None,
        live: dict[int, AgentState],
    ) -> None:
        self.tree, self.agent, self.config = tree, agent, config
        self.judged, self.value_model, self.live = judged, value_model, live

    async def expand(self, leaf: Node) -> None:
        state = self.live.pop(leaf.id, None) or await self.agent.restore(self.tree.trajectory(leaf))
        branches = [state]
        try:
            completions = await self.agent.propose(state, n=self.config.expansions, logprobs=True)
            self.tree.cost.prompt_tokens += completions[0].prompt_tokens if completions else 0
            self.tree.cost.completion_tokens += sum(completion.completion_tokens for completion in completions)
            branches = self._branches(state, completions)
            await asyncio.gather(*(branch.sandbox.get() for branch in branches if branch is not state))
            children = await asyncio.gather(*(self.agent.advance(branch, completion) for branch, completion in
                                              zip(branches, completions, strict=True)))  # fmt: skip
        except ContextOverflow:
            await state.sandbox.aclose()
            leaf.ending, leaf.estimate = Ending.OVERFLOW, LOST
            backup(self.tree, leaf, LOST)
            return
        except BaseException:
            for sandbox in {id(branch.sandbox): branch.sandbox for branch in branches}.values():
                await sandbox.aclose()
            raise
        if not any(child.turns[-1].kind == ActionKind.CODE for child in children):
            await state.sandbox.aclose()  # no cell took the leaf's sandbox
        nodes = [await self._add(leaf, child) for child in children]
        for node in nodes:  # valued once every sandbox is either kept or closed: a failing judge leaks none
            node.estimate = await self._value(node)
            backup(self.tree, node, node.estimate)
        await self._evict()

    def _branches(self, state: AgentState, completions: list[Completion]) -> list[AgentState]:
        """A state per completion: cells get sandboxes of their own (the first the leaf's, the others forks
        started before any cell runs); turns without a cell leave the sandbox alone."""
        branches, taken = [], False
        for completion in completions:
            runs_code = self.agent.read(completion)[1].kind == ActionKind.CODE
            branches.append(self.agent.branch(state) if runs_code and taken else state)
            taken = taken or runs_code
        return branches

    async def _add(self, leaf: Node, child: AgentState) -> Node:
        """The child's node; its state is kept for expansion if its branch goes on, else its sandbox closed."""
        turn = child.turns[-1]
        ending = _ending(child, self.config)
        node = self.tree.add(leaf, turn, prior=_prior(turn.logprobs), ending=ending,
                             errors_in_a_row=child.errors_in_a_row)  # fmt: skip
        self.tree.cost.cells += turn.kind == ActionKind.CODE
        if ending is None:
            self.live[node.id] = child
        elif turn.kind == ActionKind.CODE:
            await child.sandbox.aclose()
        return node

    async def _value(self, node: Node) -> float:
        if node.ending is Ending.ANSWER and self.judged:
            return ending_reward(Ending.ANSWER, await ajudge_trajectory(self.tree.trajectory(node)))
        if node.ending not in (None, Ending.ANSWER):
            return LOST
        if self.value_model is None:
            return 0.0
        messages = state_messages(self.tree.trajectory(node), node.depth)
        return await asyncio.to_thread(self.value_model.score, messages)

    async def _evict(self) -> None:
        """Close the sandboxes of the least valued open states beyond ``max_live``."""
        surplus = len(self.live) - self.config.max_live
        for node_id in sorted(self.live, key=lambda i: self.tree.nodes[i].q)[: max(surplus, 0)]:
            await self.live.pop(node_id).sandbox.aclose()

    async def close(self) -> None:
        states, self.live = list(self.live.values()), {}
        for state in states:
            await state.sandbox.aclose()


def _ending(state: AgentState, config: MCTSConfig) -> Ending | None:
    """Why the branch ends at ``state``, or None when it goes on."""
    turn = state.turns[-1]
    if turn.kind == ActionKind.ANSWER:
        return Ending.ANSWER
    if turn.kind == ActionKind.VOID:
        return Ending.VOID
    if state.errors_in_a_row >= config.max_errors:
        return Ending.ERRORS
    if len(state.turns) >= config.max_depth:
        return Ending.DEPTH
    return None


def _prior(logprobs: list[float] | None) -> float:
    """exp of the mean token log-probability of the turn (1 when the backend gave none)."""
    return math.exp(sum(logprobs) / len(logprobs)) if logprobs else 1.0
