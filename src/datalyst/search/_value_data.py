"""Value data from search trees, as JUPITER extracts it: a few won and lost paths per tree, every state on them.

A state's target is its Q-value in the tree: the mean of every value backed up through it, which for trees
collected against the task's answer are mostly rewards of ended branches (+credit right, -1 lost).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from datalyst.search._tree import Node, Tree
from datalyst.train import ValueExample, state_messages

PATHS_PER_OUTCOME = 4
"""Won and lost paths kept per tree, each (JUPITER samples up to 4 of each per task)."""


def value_examples(tree: Tree, *, paths: int = PATHS_PER_OUTCOME, seed: int = 0) -> list[ValueExample]:
    """The states on up to ``paths`` won and ``paths`` lost paths of ``tree`` (drawn with ``seed``), each once,
    valued by its Q. A path is won when its ending earned a positive reward."""
    ended = [node for node in tree.nodes if node.terminal]
    won = [node for node in ended if node.estimate > 0]
    lost = [node for node in ended if node.estimate < 0]
    draw = random.Random(f"{seed}:{tree.root.id}")
    chosen = draw.sample(won, min(paths, len(won))) + draw.sample(lost, min(paths, len(lost)))
    return [_example(tree, node) for node in _states(tree, chosen)]


def _states(tree: Tree, leaves: Iterable[Node]) -> list[Node]:
    """The nodes on the paths to ``leaves`` (the root left out: no turn yet), each once, in id order."""
    seen = {node.id: node for leaf in leaves for node in tree.path(leaf)[1:]}
    return [seen[i] for i in sorted(seen)]


def _example(tree: Tree, node: Node) -> ValueExample:
    messages = state_messages(tree.trajectory(node), node.depth)
    return ValueExample(id=f"{tree.root.id}@{node.id}", messages=messages, value=max(-1.0, min(1.0, node.q)))
