"""Losses of the value model and the reward model as pure tensor functions.

``value_loss`` is JUPITER's regression of a state's predicted value onto its target (a search Q-value or a Monte
Carlo return, both in [-1, 1]); ``preference_loss`` is the Bradley-Terry loss of Datarus's HRM on pairs of a
successful and a failed trajectory of the same task. Both average over the rows they are given.
"""

from __future__ import annotations

import torch
from torch import Tensor


def value_loss(predicted: Tensor, target: Tensor) -> Tensor:
    """The mean squared error between ``predicted`` and ``target`` values (same shape)."""
    return (predicted - target).pow(2).mean()


def preference_loss(preferred: Tensor, rejected: Tensor) -> Tensor:
    """Mean of ``-log sigmoid(preferred - rejected)`` over the pairs: low when each preferred score is well above
    its rejected one, ``log 2`` when they tie. Computed as ``softplus(rejected - preferred)``, which stays finite
    for any difference."""
    return torch.nn.functional.softplus(rejected - preferred).mean()
