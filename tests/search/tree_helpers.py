"""A search tree built by hand, with known visit counts and values (imported by the search tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from datalyst.agent import ActionKind, Termination, Trajectory, Turn
from datalyst.llm import SamplingParams
from datalyst.sandbox import ExecResult
from datalyst.search import Ending, Tree, backup
from datalyst.tasks import Task


def code(index: int, source: str) -> Turn:
    result = ExecResult(stdout=f"ran {source}")
    return Turn(index=index, raw=source, text=f"Action: {source}", kind=ActionKind.CODE, code=source,
                observation=result.render(), result=result)  # fmt: skip


def answer(index: int, value: str) -> Turn:
    return Turn(index=index, raw=value, text=f"Answer: {value}", kind=ActionKind.ANSWER, answer=value)


def root() -> Trajectory:
    task = Task(id="t1", question="What is the mean?", judge="dabench", answer={"mean": "3.2", "max": "9"})
    return Trajectory(id="t1#0", task=task, dialect="datamind", model="replay", sampling=SamplingParams(),
                      system_prompt="system", first_message="Question: What is the mean?",
                      termination=Termination.MAX_TURNS, started_at=datetime.now(UTC))  # fmt: skip


def hand_built() -> Tree:
    """root ─┬─ 1 (P .5) ─┬─ 3 answer, right (+1)
             │            ├─ 4 errors (-1)
             │            └─ 6 open (value .2, P .3)
             └─ 2 (P .9) ─── 5 answer, half right (+.5)

    Each node backs up its estimate when made, in id order: 1 and 2 back up 0."""
    tree = Tree.start(root())
    nodes = tree.nodes
    made = [
        (0, code(0, "a"), 0.5, None, 0.0),
        (0, code(0, "b"), 0.9, None, 0.0),
        (1, answer(1, "@mean[3.2] @max[9]"), 0.8, Ending.ANSWER, 1.0),
        (1, code(1, "boom"), 0.6, Ending.ERRORS, -1.0),
        (2, answer(1, "@mean[3.2] @max[7]"), 0.7, Ending.ANSWER, 0.5),
        (1, code(1, "c"), 0.3, None, 0.2),
    ]
    for parent, turn, prior, ending, estimate in made:
        node = tree.add(nodes[parent], turn, prior=prior, ending=ending, errors_in_a_row=0)
        node.estimate = estimate
        backup(tree, node, estimate)
    return tree
