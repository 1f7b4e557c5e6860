"""Hand-made trajectories for curation tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from curate_helpers import trajectory_of

from datalyst.agent import ActionKind, AgentConfig, Trajectory, Turn
from datalyst.curate import GroupVerdict, RunConfig, RunFolder
from datalyst.tasks import Task


def _answered(
    task: Task, trial: int, answer: str | None, *, thought: str = "Done.", dialect: str = "datamind"
) -> Trajectory:
    """A one-turn trajectory of ``task`` ending with ``answer`` (None: it ran out of turns without one)."""
    turns = []
    if answer is not None:
        text = f"<think>{thought}</think>\n<answer>{answer}</answer>"
        turns.append(Turn(index=0, raw=text, text=text, thought=thought, kind=ActionKind.ANSWER, answer=answer))
    return trajectory_of(turns, task, trial=trial, dialect=dialect)


@pytest.fixture
def answered() -> Callable[..., Trajectory]:
    """``answered(task, trial, answer, thought=..., dialect=...)``: a one-turn trajectory ending with ``answer``."""
    return _answered


TASK = Task(id="t", question="How many?", answer={"n": "4"}, judge="dabench", category="Counting")
OPEN = Task(id="o", question="Which?", judge="dabench", category="Ranking", files=["sales.csv"])


@pytest.fixture
def judged_run(tmp_path, answered) -> Callable[..., RunFolder]:
    """``judged_run(source)``: a run folder of 8 trajectories of two tasks (one verified), with verdicts."""

    def make(source="sample"):
        folder = RunFolder(tmp_path / source)
        folder.start(RunConfig(source=source, tasks=["t.jsonl"], model="m", agent=AgentConfig(), n=4))
        trajectories = [
            answered(TASK, 0, "@n[4]", thought="Counted the rows once."),
            answered(TASK, 1, "@n[4] bad", thought="Counted them another way, by region."),
            answered(TASK, 2, "@n[4]", thought="Counted the rows once."),  # the same as trial 0
            answered(TASK, 3, "@n[5]", thought="Miscounted."),
            *[answered(OPEN, k, "@x[East]", thought=f"Looked at sales {k} times, summed by region.") for k in range(4)],
        ]
        folder.samples.write_text("".join(t.model_dump_json() + "\n" for t in trajectories))
        ids = {name: [f"{name}#{k}" for k in range(4)] for name in "to"}
        verdicts = [
            GroupVerdict(id="t@0", task_id="t", round=0, method="ground_truth", trajectory_ids=ids["t"],
                         correct=[True, True, True, False], passed=True, best="t#0"),
            GroupVerdict(id="o@0", task_id="o", round=0, method="rule", trajectory_ids=ids["o"],
                         correct=[True] * 4, passed=True, best="o#0", answer="@x[East]"),
        ]  # fmt: skip
        folder.verdicts.write_text("".join(v.model_dump_json() + "\n" for v in verdicts))
        return folder

    return make
