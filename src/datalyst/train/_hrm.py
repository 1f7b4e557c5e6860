"""Datarus's hierarchical reward model (HRM): a step score and a trajectory score from one backbone.

The HRM is the value model's scorer (``_scorer``) with two outputs, trained on three kinds of items:

- step level (output ``step``): the conversation after one agent turn and its observation, labelled +1 when the
  turn's cell ran without error and -1 when it failed (error, timeout, crash). Of "is the step sound" we label
  what a program can tell: a void turn (no action could be read) is -1. Answer turns get no step label (the
  trajectory label judges them);
- trajectory level (output ``trajectory``): the whole conversation, labelled as Datarus does: -1 when it ends in
  an error (no answer, or its last cell failed), +1 when its errors were corrected or it had none. When the
  task has an answer a program can check, a wrong answer is -1 too: a run is +1 only if it ends without an
  uncorrected error and, where it can be checked, is right;
- preference: a +1 and a -1 trajectory of the same task, scored by the trajectory output, with the
  Bradley-Terry loss. Each task pairs its successes and failures round-robin (as many pairs as the larger side).

Each kind's weight in the loss is set in :class:`HRMConfig`. ``load_hrm`` gives a :class:`RewardModel` whose
``score(trajectory)`` (the trajectory output, in [-1, 1]) can serve RL as a reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from datalyst.agent import ActionKind, Trajectory, Turn
from datalyst.errors import DataFileError
from datalyst.llm import ChatMessage, ChatTokenizer
from datalyst.train._value import Judged, ScorerConfig, ScorerResult, read_sources, state_messages

if TYPE_CHECKING:
    from datalyst.train._scorer import LoadedScorer

OUTPUTS = ["step", "trajectory"]
Level = Literal["step", "trajectory", "preference"]


class HRMConfig(ScorerConfig):
    trajectories: list[str]
    """Trajectories files (``samples.jsonl``) or curation run folders."""
    step_weight: float = 1.0
    """Weight of the step-level items in the loss."""
    trajectory_weight: float = 1.0
    """Weight of the trajectory-level items."""
    preference_weight: float = 1.0
    """Weight of the preference pairs."""


class HRMExample(BaseModel):
    """One labelled item: a conversation and its label, or (``preference``) the better then the worse one."""

    id: str
    level: Level
    conversations: list[list[ChatMessage]]
    label: float | None = None


def step_label(turn: Turn) -> float | None:
    """+1 for a cell that ran without error, -1 for one that failed or a void turn, None for an answer."""
    if turn.kind == ActionKind.VOID:
        return -1.0
    if turn.kind == ActionKind.CODE and turn.result is not None:
        return 1.0 if turn.result.ok else -1.0
    return None


def ends_in_error(trajectory: Trajectory) -> bool:
    """No answer, or the last cell before the end failed (its error was never corrected)."""
    results = [turn.result for turn in trajectory.turns if turn.kind == ActionKind.CODE and turn.result is not None]
    return trajectory.answer is None or (bool(results) and not results[-1].ok)


def trajectory_label(trajectory: Trajectory, correct: bool | None) -> float:
    """-1 when ``trajectory`` ends in an error or its answer is judged wrong (``correct`` False), else +1;
    ``correct`` is None when the answer cannot be checked."""
    return -1.0 if ends_in_error(trajectory) or correct is False else 1.0


def hrm_examples(judged: Sequence[Judged]) -> list[HRMExample]:
    """The step, trajectory and preference examples of the ``judged`` trajectories (runs failed on our side left
    out)."""
    steps: dict[tuple[ChatMessage, ...], HRMExample] = {}
    whole: list[HRMExample] = []
    by_task: dict[str, list[HRMExample]] = {}
    for trajectory, outcome in judged:
        if trajectory.failed:
            continue
        correct = outcome.correct if outcome is not None else None
        for k, turn in enumerate(trajectory.turns, start=1):
            if (label := step_label(turn)) is not None:
                state = state_messages(trajectory, k)
                steps.setdefault(tuple(state), HRMExample(id=f"{trajectory.id}@{k}", level="step",
                                                          conversations=[state], label=label))  # fmt: skip
        example = HRMExample(id=trajectory.id, level="trajectory", label=trajectory_label(trajectory, correct),
                             conversations=[state_messages(trajectory, len(trajectory.turns))])  # fmt: skip
        whole.append(example)
        by_task.setdefault(trajectory.task.id, []).append(example)
    return [*steps.values(), *whole, *(pair for group in by_task.values() for pair in preference_pairs(group))]


def preference_pairs(group: Sequence[HRMExample]) -> list[HRMExample]:
    """Round-robin pairs of the +1 and -1 trajectory examples of one task (none unless it has both)."""
    good = [example for example in group if example.label == 1.0]
    bad = [example for example in group if example.label == -1.0]
    if not good or not bad:
        return []
    return [
        HRMExample(
            id=f"{good[i % len(good)].id}>{bad[i % len(bad)].id}",
            level="preference",
            conversations=[good[i % len(good)].conversations[0], bad[i % len(bad)].conversations[0]],
        )
        for i in range(max(len(good), len(bad)))
    ]


def train_hrm(config: HRMConfig, out: str | Path, *, save_every: int = 1, progress: bool = True) -> ScorerResult:
    """Train (or resume) the HRM on ``config.trajectories``, writing the run folder ``out`` and the model in
    ``out/hrm/`` (see ``_scorer``)."""
    from datalyst.train._scorer import Item, encode, fit

    examples = hrm_examples(read_sources(config.trajectories))
    if not examples:
        raise DataFileError(f"{', '.join(config.trajectories)} hold no trajectory to train a reward model on")
    weights = {"step": config.step_weight, "trajectory": config.trajectory_weight,
               "preference": config.preference_weight}  # fmt: skip

    def items(tokenizer: ChatTokenizer) -> list[Item]:
        return [
            Item(
                id=e.id,
                inputs=[encode(conversation, tokenizer) for conversation in e.conversations],
                output=OUTPUTS.index("step" if e.level == "step" else "trajectory"),
                target=e.label,
                weight=weights[e.level],
            )
            for e in examples
        ]

    return fit(config, Path(out), items, name="hrm", outputs=OUTPUTS, title=f"HRM on {config.model}",
               save_every=save_every, progress=progress)  # fmt: skip


class RewardModel:
    """A trained HRM: ``score(trajectory)`` in [-1, 1], and ``step_scores`` for each turn's state."""

    def __init__(self, loaded: LoadedScorer) -> None:
        self.loaded = loaded

    def score(self, trajectory: Trajectory) -> float:
        return self.loaded.predict(state_messages(trajectory, len(trajectory.turns)))["trajectory"]

    def step_scores(self, trajectory: Trajectory) -> list[float]:
        """The step score of the state after each turn (an answer turn's too, though none was trained)."""
        return [self.loaded.predict(state_messages(trajectory, k))["step"] for k in range(1, len(trajectory.turns) + 1)]


def load_hrm(path: str | Path, *, device: str = "cpu") -> RewardModel:
    """The HRM saved in ``path`` (its folder, or the run folder of ``train_hrm``)."""
    from datalyst.train._scorer import LoadedScorer

    return RewardModel(LoadedScorer(path, name="hrm", device=device))
