"""The per-step training log (``log.jsonl``) and the curve drawn from it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from datalyst.files import save_figure, write_atomic
from datalyst.jsonl import read_appended


class StepLog(BaseModel):
    """One optimizer step: its mean loss, learning rate, input tokens and wall time, plus any further figures."""

    step: int
    loss: float
    lr: float
    tokens: int
    seconds: float
    figures: dict[str, float] = {}
    """What a trainer measures besides (RL: mean reward, share of groups dropped, clip fractions)."""


def read_log(path: Path) -> list[StepLog]:
    return read_appended(path, StepLog, what="a training step", fix="remove that line and resume the run")


def append_log(path: Path, entry: StepLog) -> None:
    with path.open("a", encoding="utf-8") as log:
        log.write(entry.model_dump_json() + "\n")


def trim_log(path: Path, steps: int) -> None:
    """Drop the lines of steps after ``steps`` (written before a crash, after the last checkpoint)."""
    kept = [entry for entry in read_log(path) if entry.step <= steps]
    write_atomic(path, "".join(entry.model_dump_json() + "\n" for entry in kept))


def plot_curve(log: Sequence[StepLog], png: Path, *, key: str, title: str) -> None:
    """Draw ``key`` (``loss`` or a figure's name) against the step into ``png``, with a moving average once
    there are 20 steps or more."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = [entry.step for entry in log]
    values = [entry.loss if key == "loss" else entry.figures[key] for entry in log]
    window = len(values) // 10
    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.plot(steps, values, alpha=0.35 if window > 1 else 1.0, marker="o" if window <= 1 else None, label=key)
    if window > 1:
        smooth = [sum(values[max(0, i - window + 1) : i + 1]) / min(i + 1, window) for i in range(len(values))]
        axes.plot(steps, smooth, label=f"moving mean of {window}")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(xlabel="step", ylabel=key, title=title)
    axes.legend()
    save_figure(figure, png, dpi=120)
