"""RL and SFT losses as pure tensor functions: group advantages, the GRPO and DAPO clipped objectives, DataMind's mix.

Shapes: ``B`` sequences of ``T`` tokens; per-token log-probabilities are ``(B, T)``, rewards and advantages
``(B,)``, and the ``G`` completions of one prompt sit in consecutive rows. A mask is 1 (or True) on the agent's own
tokens; environment output and whole void-turn trajectories are masked when the data is built, never here.
Masked positions never reach a result or a gradient, whatever they hold. A mean over nothing is 0.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from datalyst.errors import ConfigError

EPS = 1e-4
"""Added to the group std before dividing, as TRL does, so an all-equal group gets advantages of 0."""
DAPO_EPSILON_HIGH = 0.28
"""DAPO's decoupled upper clip (DataMind's appendix: 0.2 below, 0.28 above)."""

Algo = Literal["grpo", "dapo"]


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` where ``mask`` is set, over ``dim`` (all positions when None)."""
    keep = mask.bool()
    kept = torch.where(keep, values, torch.zeros_like(values))
    if dim is None:
        return kept.sum() / keep.sum().clamp(min=1)
    return kept.sum(dim) / keep.sum(dim).clamp(min=1)


def _groups(values: Tensor, group_size: int) -> Tensor:
    """``values`` as one row per group of ``group_size`` consecutive entries."""
    if group_size < 2 or values.numel() % group_size:
        raise ConfigError(f"group size {group_size} must be at least 2 and divide the {values.numel()} rewards")
    return values.view(-1, group_size)


def group_advantages(rewards: Tensor, group_size: int, *, scale: bool = True) -> Tensor:
    """GRPO's advantage of each completion: ``(R - mean) / (std + EPS)`` within its group (no division without
    ``scale``, as Dr. GRPO). The std is the sample one (Bessel's n - 1), as TRL's ``nanstd`` computes it."""
    grouped = _groups(rewards, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale:
        centred = centred / (grouped.std(dim=1, keepdim=True) + EPS)
    return centred.reshape(-1)


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    algo: Algo = "grpo",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The clipped surrogate ``-min(r A, clip(r, 1 - epsilon, 1 + epsilon_high) A)`` with ``r = exp(logprobs -
    old_logprobs)`` per token, and the share of tokens where each bound binds.

    ``grpo`` averages tokens within each sequence, then sequences (those with at least one token; TRL also
    counts empty ones); ``dapo`` averages over every token of the batch, so long sequences weigh more.
    ``epsilon_high`` defaults to ``epsilon`` for grpo and 0.28 for dapo.

    Returns:
        The loss, and ``clip_ratio/low`` (ratio below ``1 - epsilon`` with a negative advantage) and
        ``clip_ratio/high`` (above ``1 + epsilon_high`` with a positive one), as shares of unmasked tokens.
    """
    if epsilon_high is None:
        epsilon_high = DAPO_EPSILON_HIGH if algo == "dapo" else epsilon
    keep = mask.bool()
    # Zero the log-ratio where masked first: exp of a huge masked value would give inf, then NaN gradients.
    ratio = torch.exp(torch.where(keep, logprobs - old_logprobs, torch.zeros_like(logprobs)))
    advantage = advantages.unsqueeze(-1)
    clipped = ratio.clamp(1 - epsilon, 1 + epsilon_high)
    per_token = -torch.min(ratio * advantage, clipped * advantage)
    if algo == "dapo":
        loss = masked_mean(per_token, keep)
    else:
        loss = masked_mean(masked_mean(per_token, keep, dim=-1), keep.any(dim=-1))
    low = (ratio < 1 - epsilon) & (advantage < 0)
    high = (ratio > 1 + epsilon_high) & (advantage > 0)
    stats = {
        "clip_ratio/low": masked_mean(low.float(), keep).item(),
        "clip_ratio/high": masked_mean(high.float(), keep).item(),
    }
    return loss, stats


def sft_loss(logprobs: Tensor, mask: Tensor) -> Tensor:
    """Negative log-likelihood per unmasked token, averaged over every such token of the batch."""
    return -masked_mean(logprobs, mask)


def mixed_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    informative: Tensor,
    sft_logprobs: Tensor,
    sft_mask: Tensor,
    gamma: float,
    epsilon: float = 0.2,
    epsilon_high: float = DAPO_EPSILON_HIGH,
) -> tuple[Tensor, dict[str, float]]:
    """DataMind's Eq. 7, ``gamma * L_SFT + (1 - gamma) * L_DAPO``.

    L_DAPO is :func:`policy_loss` (dapo) over the completions of the ``informative`` groups only (one bool per
    group of consecutive rows), so a filtered group adds nothing to it and is left with the SFT term alone; with
    no informative group L_DAPO is 0. L_SFT is :func:`sft_loss` over ``sft_logprobs`` / ``sft_mask``: per
    DataMind's Eq. 4 these are the expert trajectories of the batch's prompts, one per prompt whether its group
    was kept or filtered. Eq. 4 sums a trajectory's tokens; we average over all SFT tokens instead, so both terms
    are per-token means and ``gamma`` weighs like quantities.

    Returns:
        The loss, and the :func:`policy_loss` stats plus ``loss/sft``, ``loss/policy`` and ``groups/dropped``
        (the share of groups filtered out).
    """
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma {gamma} must lie in [0, 1]")
    if informative.numel() == 0 or logprobs.shape[0] % informative.numel():
        raise ConfigError(f"{informative.numel()} groups do not divide the {logprobs.shape[0]} completions")
    rows = informative.bool().repeat_interleave(logprobs.shape[0] // informative.numel())
    kept = mask.bool() & rows.unsqueeze(-1)
    policy, stats = policy_loss(
        logprobs, old_logprobs, advantages, kept, algo="dapo", epsilon=epsilon, epsilon_high=epsilon_high
    )
    sft = sft_loss(sft_logprobs, sft_mask)
    stats |= {
        "loss/sft": sft.item(),
        "loss/policy": policy.item(),
        "groups/dropped": 1.0 - informative.float().mean().item(),
    }
    return gamma * sft + (1 - gamma) * policy, stats
