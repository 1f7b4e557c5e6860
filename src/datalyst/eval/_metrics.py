"""pass@1 / pass@k with bootstrap intervals, and what the trajectories did on the way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from datalyst.agent import ActionKind, Trajectory
from datalyst.eval._outcomes import EvalOutcome
from datalyst.search import Cost

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


class Estimate(BaseModel):
    """A rate with its bootstrap interval (percentile, resampling tasks)."""

    model_config = ConfigDict(frozen=True)

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{100 * self.value:.1f} [{100 * self.low:.1f}, {100 * self.high:.1f}]"


class PassRates(BaseModel):
    """pass@1 = mean score over tasks and trials; pass@k = mean over tasks of the best of k trials."""

    model_config = ConfigDict(frozen=True)

    n_tasks: int
    k: int
    pass_at_1: Estimate
    pass_at_k: Estimate


class Behaviour(BaseModel):
    """How the agent worked: turns, void turns, failing cells, endings and time."""

    model_config = ConfigDict(frozen=True)

    n_trajectories: int
    mean_turns: float
    void_turn_rate: float
    """Void turns / all turns."""
    execution_error_rate: float
    """Code turns whose cell failed / code turns."""
    answered_rate: float
    mean_wall_s: float
    """Mean wall time of one answer (one task, one trial): every sample of a vote, the whole of a search."""
    mean_tokens: float = 0.0
    """Model tokens (prompt and completion) spent per answer, counted likewise."""
    mean_cells: float = 0.0
    """Cells run per answer, counted likewise."""
    terminations: dict[str, int]


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` samples drawn from ``n`` (``c`` of them right) is right:
    ``1 - C(n - c, k) / C(n, k)``, computed as HumanEval's harness does, as a product."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


HUMANEVAL_KS = (1, 10, 100)
"""The k of HumanEval's harness, each reported only where every problem has at least k samples."""


def humaneval_pass_at_k(outcomes: Sequence[EvalOutcome]) -> dict[str, float]:
    """HumanEval's figures: the mean over problems of the unbiased pass@k, for each k every problem reaches."""
    _, matrix = score_matrix(outcomes)
    if matrix.size == 0:
        return {}
    n, correct = matrix.shape[1], (matrix == 1.0).sum(axis=1)
    return {f"pass@{k}": float(np.mean([unbiased_pass_at_k(n, int(c), k) for c in correct]))
            for k in HUMANEVAL_KS if k <= n}  # fmt: skip


def score_matrix(outcomes: Sequence[EvalOutcome]) -> tuple[list[str], np.ndarray]:
    """Task ids and a tasks x trials matrix of scores (a missing trial counts 0)."""
    task_ids = sorted({v.task_id for v in outcomes}, key=_natural)
    trials = sorted({v.trial for v in outcomes})
    row = {task_id: i for i, task_id in enumerate(task_ids)}
    col = {trial: j for j, trial in enumerate(trials)}
    matrix = np.zeros((len(task_ids), len(trials)))
    for v in outcomes:
        matrix[row[v.task_id], col[v.trial]] = v.score
    return task_ids, matrix


def pass_rates(outcomes: Sequence[EvalOutcome], *, seed: int = 0) -> PassRates:
    """pass@1 and pass@k over the tasks in ``outcomes``, k being the number of trials."""
    _, matrix = score_matrix(outcomes)
    if matrix.size == 0:
        matrix = np.zeros((matrix.shape[0], 1))
    per_task_1, per_task_k = matrix.mean(axis=1), matrix.max(axis=1)
    return PassRates(
        n_tasks=matrix.shape[0],
        k=matrix.shape[1],
        pass_at_1=bootstrap(per_task_1, seed=seed),
        pass_at_k=bootstrap(per_task_k, seed=seed),
    )


def bootstrap(per_task: np.ndarray, *, seed: int = 0) -> Estimate:
    """The mean of ``per_task`` and its percentile interval over resampled task sets."""
    if per_task.size == 0:
        return Estimate(value=0.0, low=0.0, high=0.0)
    picks = np.random.default_rng(seed).integers(0, per_task.size, size=(BOOTSTRAP_SAMPLES, per_task.size))
    means = per_task[picks].mean(axis=1)
    tail = 100 * (1 - CONFIDENCE) / 2
    return Estimate(
        value=float(per_task.mean()),
        low=float(np.percentile(means, tail)),
        high=float(np.percentile(means, 100 - tail)),
    )


def behaviour(trajectories: Sequence[Trajectory], costs: Mapping[tuple[str, str], Cost] | None = None) -> Behaviour:
    """Counts over ``trajectories`` (rates are 0 when there is nothing to count); ``costs`` holds what each answer
    cost by (dialect, id) where that is more than its trajectory (a vote, a search)."""
    turns = [turn for t in trajectories for turn in t.turns]
    code_turns = [turn for turn in turns if turn.result is not None]
    terminations = Counter(str(t.termination) for t in trajectories)
    spent = [(costs or {}).get((t.dialect, t.id)) or trajectory_cost([t]) for t in trajectories]
    n = len(trajectories)
    return Behaviour(
        n_trajectories=n,
        mean_turns=len(turns) / n if n else 0.0,
        void_turn_rate=sum(turn.is_void for turn in turns) / len(turns) if turns else 0.0,
        execution_error_rate=sum(not turn.result.ok for turn in code_turns) / len(code_turns) if code_turns else 0.0,
        answered_rate=sum(bool(t.answer) for t in trajectories) / n if n else 0.0,
        mean_wall_s=sum(cost.seconds for cost in spent) / n if n else 0.0,
        mean_tokens=sum(cost.prompt_tokens + cost.completion_tokens for cost in spent) / n if n else 0.0,
        mean_cells=sum(cost.cells for cost in spent) / n if n else 0.0,
        terminations=dict(sorted(terminations.items())),
    )


def trajectory_cost(trajectories: Sequence[Trajectory]) -> Cost:
    """The model tokens, cells and wall time of ``trajectories`` together."""
    turns = [turn for trajectory in trajectories for turn in trajectory.turns]
    return Cost(
        prompt_tokens=sum(turn.prompt_tokens for turn in turns),
        completion_tokens=sum(turn.completion_tokens for turn in turns),
        cells=sum(turn.kind == ActionKind.CODE for turn in turns),
        seconds=sum(trajectory.duration_s for trajectory in trajectories),
    )


def _natural(task_id: str) -> tuple[int, int | str]:
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)
