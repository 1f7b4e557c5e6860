"""Inference-time search (JUPITER): MCTS with PUCT over agent states in forked sandboxes, a value model to guide
it, voting over the answers it finds, saved trees, and value data from them."""

from datalyst.search._mcts import COLLECT, INFER, MCTSConfig, decide, mcts
from datalyst.search._puct import LOST, backup, ending_reward, puct, select
from datalyst.search._run import (
    COLLECTING,
    SearchRun,
    answer_paths,
    search_tasks,
    tree_path,
    tree_trajectory,
)
from datalyst.search._tree import Cost, Ending, Tree
from datalyst.search._value_data import value_examples

__all__ = [
    "COLLECT",
    "COLLECTING",
    "INFER",
    "LOST",
    "Cost",
    "Ending",
    "MCTSConfig",
    "SearchRun",
    "Tree",
    "answer_paths",
    "backup",
    "decide",
    "ending_reward",
    "mcts",
    "puct",
    "search_tasks",
    "select",
    "tree_path",
    "tree_trajectory",
    "value_examples",
]
