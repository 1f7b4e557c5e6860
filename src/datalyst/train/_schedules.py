"""Weights that change over training, as pure functions of the step (the model: nanoGPT's ``get_lr``).

- :func:`sft_weight`: DataMind's gamma in ``gamma * L_SFT + (1 - gamma) * L_DAPO``, cosine from 0.9 to 0.05.
- :func:`rate_scale`: the learning rate's share of its peak, a linear warm-up then a cosine decay.
- :func:`structure_weight`: Datarus's curriculum, the tag reward's weight against the semantic rewards, cosine
  from 1 (structure only) down to a small floor that guards against format collapse late in training.
"""

from __future__ import annotations

import math

from datalyst.errors import ConfigError

GAMMA_START = 0.9
GAMMA_END = 0.05
STRUCTURE_FLOOR = 0.1
"""The tag reward's weight at the end (Datarus keeps "a small residual" but gives no number; ours)."""


def cosine(step: int, steps: int, start: float, end: float) -> float:
    """Half a cosine from ``start`` at step 0 to ``end`` at the last of ``steps`` steps (``steps - 1``).

    Steps outside the run are held at the nearer end; a run of one step stays at ``start``.
    """
    if steps < 1:
        raise ConfigError(f"a schedule needs at least one step, not {steps}")
    progress = min(max(step, 0), steps - 1) / max(steps - 1, 1)
    return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * progress))


def sft_weight(step: int, steps: int, *, start: float = GAMMA_START, end: float = GAMMA_END) -> float:
    """DataMind's gamma at ``step`` of a run of ``steps`` steps."""
    return cosine(step, steps, start, end)


def structure_weight(step: int, steps: int, *, floor: float = STRUCTURE_FLOOR) -> float:
    """Datarus's weight of the tag reward at ``step``; the semantic rewards get ``1 -`` it."""
    return cosine(step, steps, 1.0, floor)


def rate_scale(step: int, steps: int, warmup: int) -> float:
    """The share of the peak learning rate that optimizer step ``step`` (from 0) of ``steps`` uses.

    ``warmup`` steps climb linearly, ``1 / (warmup + 1)`` to ``warmup / (warmup + 1)``, so even the first
    update learns; the peak comes at step ``warmup``, and a half cosine then falls towards 0 at step ``steps``.
    """
    if step < warmup:
        return (step + 1) / (warmup + 1)
    progress = (step - warmup) / max(steps - warmup, 1)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
