"""The arithmetic of JUPITER's tree search: PUCT selection, backing values up, and what an ended branch is worth.

These are plain functions of a :class:`Tree`; the search loop (``mcts``) calls them between model calls.
"""

from __future__ import annotations

import math

from datalyst.agent import Outcome
from datalyst.search._tree import Ending, Node, Tree

LOST = -1.0
"""The value of a branch that ended without a right answer."""


def puct(child: Node, parent_visits: int, c_puct: float) -> float:
    """``Q(s') + c_puct * P(s') * sqrt(N(parent)) / (1 + N(s'))``: JUPITER's Eq. 1."""
    return child.q + c_puct * child.prior * math.sqrt(parent_visits) / (1 + child.visits)


def select(tree: Tree, c_puct: float) -> Node | None:
    """The node to expand next: from the root, the open child of highest PUCT (ties to the likelier turn, then
    the earlier one) until a node without children; None when every branch has ended."""
    node = tree.nodes[0]
    if not tree.is_open(node):
        return None
    while node.children:
        parent = node
        candidates = [child for child in tree.children(parent) if tree.is_open(child)]
        node = max(candidates, key=lambda child: (puct(child, parent.visits, c_puct), child.prior, -child.id))
    return node


def backup(tree: Tree, node: Node, value: float) -> None:
    """Count a visit with ``value`` at ``node`` and at each of its ancestors."""
    for step in tree.path(node):
        step.visits += 1
        step.value_sum += value


def ending_reward(ending: Ending, outcome: Outcome | None = None) -> float:
    """What an ended branch is worth when its answer can be checked (``outcome``): an answer with some sub-answers
    right earns their share (a single answer: its score), anything else -1."""
    if ending is Ending.ANSWER and outcome is not None and outcome.credit > 0:
        return outcome.credit
    return LOST
