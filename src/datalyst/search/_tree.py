"""A search tree over agent states as it is saved: nodes with their turns, visit counts and values (versioned JSON).

Node 0 is the root: the task's opening prompt, no turn yet. Every other node adds one turn of the agent (its
text, its cell and what the cell printed) to its parent's state, so the path from the root to a node is a
trajectory (:meth:`Tree.trajectory`). A node is terminal when its turn ended the branch (:class:`Ending`).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from datalyst.agent import Termination, Trajectory, Turn
from datalyst.errors import DataFileError
from datalyst.files import write_atomic

SCHEMA_VERSION = 1


class Ending(StrEnum):
    """Why a branch ended at a node."""

    ANSWER = "answer"
    ERRORS = "errors"
    """Too many cells in a row failed."""
    VOID = "void"
    """The turn took no action (no cell, no answer): JUPITER ends such a branch at once."""
    DEPTH = "depth"
    """The branch reached the greatest depth without an answer."""
    OVERFLOW = "overflow"
    """The conversation no longer fits the model's context."""


_TERMINATION = {
    Ending.ANSWER: Termination.ANSWER,
    Ending.ERRORS: Termination.EXECUTION_ERRORS,
    Ending.OVERFLOW: Termination.CONTEXT_OVERFLOW,
}


class Node(BaseModel):
    """One agent state: its parent, its turn, and the statistics search keeps about it."""

    model_config = ConfigDict(extra="forbid")

    id: int
    parent: int | None = None
    depth: int = 0
    """Turns from the root."""
    turn: Turn | None = None
    prior: float = 1.0
    """How likely the model found the turn: exp of its mean token log-probability."""
    estimate: float = 0.0
    """What the node backed up when it was made: its reward when terminal and judged, else its value estimate."""
    visits: int = 0
    value_sum: float = 0.0
    ending: Ending | None = None
    errors_in_a_row: int = 0
    children: list[int] = []

    @property
    def terminal(self) -> bool:
        return self.ending is not None

    @property
    def q(self) -> float:
        """The mean of the values backed up through this node (0 before any)."""
        return self.value_sum / self.visits if self.visits else 0.0

    @property
    def answer(self) -> str | None:
        return self.turn.answer if self.ending is Ending.ANSWER and self.turn is not None else None


class Cost(BaseModel):
    """What a search spent."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cells: int = 0
    seconds: float = 0.0


class Tree(BaseModel):
    """A search over one task: ``root`` holds the task and prompts (no turns), ``nodes[0]`` is the root state."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    root: Trajectory
    nodes: list[Node]
    simulations: int = 0
    """Expansions done (each proposes several turns)."""
    finished: bool = False
    """The search stopped: its budget was spent, or every branch ended."""
    cost: Cost = Cost()
    settings: dict[str, object] = {}
    """The search's settings, as given (a resumed search must match them)."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_newer(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("schema_version", SCHEMA_VERSION) > SCHEMA_VERSION:
            raise ValueError(f"tree schema {data['schema_version']} is newer than this datalyst reads; upgrade it")
        return data

    @classmethod
    def start(cls, root: Trajectory, settings: dict[str, object] | None = None) -> Tree:
        return cls(root=root.model_copy(update={"turns": []}), nodes=[Node(id=0)], settings=settings or {})

    def add(self, parent: Node, turn: Turn, *, prior: float, ending: Ending | None, errors_in_a_row: int) -> Node:
        """A new child of ``parent`` (not yet backed up)."""
        node = Node(id=len(self.nodes), parent=parent.id, depth=parent.depth + 1, turn=turn, prior=prior,
                    ending=ending, errors_in_a_row=errors_in_a_row)  # fmt: skip
        self.nodes.append(node)
        parent.children.append(node.id)
        return node

    def children(self, node: Node) -> list[Node]:
        return [self.nodes[i] for i in node.children]

    def path(self, node: Node) -> list[Node]:
        """The nodes from the root to ``node``, both included."""
        path = [node]
        while path[-1].parent is not None:
            path.append(self.nodes[path[-1].parent])
        return path[::-1]

    def trajectory(self, node: Node) -> Trajectory:
        """The trajectory that reaches ``node``: the root's task and prompts, then the turns along the path."""
        turns = [step.turn for step in self.path(node)[1:] if step.turn is not None]
        termination = _TERMINATION.get(node.ending, Termination.MAX_TURNS)
        return self.root.model_copy(update={"turns": turns, "answer": node.answer, "termination": termination})

    def candidates(self) -> list[Node]:
        """The nodes that ended with an answer, in the order they were found."""
        return [node for node in self.nodes if node.ending is Ending.ANSWER]

    def is_open(self, node: Node) -> bool:
        """Whether search can still expand ``node`` or a node below it."""
        if node.terminal:
            return False
        return not node.children or any(self.is_open(child) for child in self.children(node))

    def save(self, path: str | Path) -> None:
        write_atomic(path, self.model_dump_json())

    @classmethod
    def load(cls, path: str | Path) -> Tree:
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataFileError(f"{path} is not a search tree datalyst can read: {exc}") from None
