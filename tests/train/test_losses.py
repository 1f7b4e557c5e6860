"""The RL and SFT losses against values worked out by hand on tiny tensors (each derivation is in a comment)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from datalyst.errors import ConfigError  # noqa: E402
from datalyst.train._losses import (  # noqa: E402
    group_advantages,
    masked_mean,
    mixed_loss,
    policy_loss,
    sft_loss,
)

BIG = 10_000.0
"""Put in masked positions: if any of it leaked into a result, the result would be off by thousands."""


def logs(*ratios: float) -> torch.Tensor:
    """Log-probabilities, one token per sequence, whose ratio to an old log-probability of 0 is ``ratios``."""
    return torch.tensor([[math.log(r)] for r in ratios], requires_grad=True)


def test_masked_mean_ignores_masked_positions_over_all_and_per_row():
    values = torch.tensor([[1.0, 2.0, BIG], [3.0, -BIG, 5.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    assert masked_mean(values, mask).item() == pytest.approx(2.75)  # (1 + 2 + 3 + 5) / 4
    assert masked_mean(values, mask, dim=-1).tolist() == pytest.approx([1.5, 4.0])  # (1 + 2) / 2, (3 + 5) / 2


def test_masked_mean_of_nothing_is_zero_even_over_nan():
    values = torch.tensor([[float("nan"), BIG]])
    assert masked_mean(values, torch.zeros(1, 2)).item() == 0.0
    assert masked_mean(values, torch.zeros(1, 2), dim=-1).tolist() == [0.0]


def test_group_advantages_use_the_sample_std_per_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    # Group 1: mean 0.5, deviations +-0.5, sample variance 4 * 0.25 / 3 = 1/3, std 0.57735 (population std: 0.5,
    # which would give exactly +-1). Group 2: every reward equal, so 0 / (0 + 1e-4) = 0.
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)  # 0.86588
    assert group_advantages(rewards, 4).tolist() == pytest.approx([a, -a, -a, a, 0, 0, 0, 0])
    assert group_advantages(rewards, 4, scale=False).tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])


def test_group_advantages_of_pairs():
    # [1, -0.1]: mean 0.45, deviations +-0.55, sample std sqrt(2 * 0.55**2 / 1) = 0.77782.
    a = 0.55 / (math.sqrt(2) * 0.55 + 1e-4)  # 0.70702
    assert group_advantages(torch.tensor([1.0, -0.1]), 2).tolist() == pytest.approx([a, -a])


@pytest.mark.parametrize("group_size", [1, 3])
def test_a_group_size_that_cannot_split_the_rewards_is_refused(group_size):
    with pytest.raises(ConfigError, match=f"group size {group_size}"):
        group_advantages(torch.zeros(4), group_size)


# Four one-token sequences, old log-probabilities 0, epsilon 0.2:
#   a: ratio 1.5, A = +1: min(1.5, clip 1.2) = 1.2      -> loss -1.2, clipped high (its gradient is cut)
#   b: ratio 0.5, A = -1: min(-0.5, -clip 0.8) = -0.8   -> loss  0.8, clipped low (its gradient is cut)
#   c: ratio 1.5, A = -1: min(-1.5, -1.2) = -1.5        -> loss  1.5, not clipped (the pessimistic side)
#   d: ratio 0.5, A = +1: min(0.5, 0.8) = 0.5           -> loss -0.5, not clipped
ADVANTAGES = torch.tensor([1.0, -1.0, -1.0, 1.0])


def test_grpo_clips_at_both_bounds():
    logprobs = logs(1.5, 0.5, 1.5, 0.5)
    loss, stats = policy_loss(logprobs, torch.zeros(4, 1), ADVANTAGES, torch.ones(4, 1))
    assert loss.item() == pytest.approx((-1.2 + 0.8 + 1.5 - 0.5) / 4)  # 0.15
    assert stats == pytest.approx({"clip_ratio/low": 0.25, "clip_ratio/high": 0.25})
    loss.backward()
    # d(-r A)/d logprob = -r A (r = exp(logprob)); clipped tokens get none; each of 4 sequences weighs 1/4.
    assert logprobs.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 1.5 / 4, -0.5 / 4])


def test_dapo_clips_higher_by_default():
    # Same tokens with epsilon_high 0.28: a becomes min(1.5, 1.28) = 1.28; b keeps the lower bound 0.8.
    loss, stats = policy_loss(logs(1.5, 0.5, 1.5, 0.5), torch.zeros(4, 1), ADVANTAGES, torch.ones(4, 1), algo="dapo")
    assert loss.item() == pytest.approx((-1.28 + 0.8 + 1.5 - 0.5) / 4)  # 0.13
    assert stats == pytest.approx({"clip_ratio/low": 0.25, "clip_ratio/high": 0.25})


def test_a_ratio_between_the_two_upper_bounds_is_clipped_by_grpo_only():
    # ratio 1.25, A = +1: grpo clips to 1.2 (loss -1.2); dapo's 1.28 leaves it (loss -1.25).
    grpo, grpo_stats = policy_loss(logs(1.25), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1))
    dapo, dapo_stats = policy_loss(logs(1.25), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1), algo="dapo")
    assert (grpo.item(), grpo_stats["clip_ratio/high"]) == pytest.approx((-1.2, 1.0))
    assert (dapo.item(), dapo_stats["clip_ratio/high"]) == pytest.approx((-1.25, 0.0))
    explicit, _ = policy_loss(logs(1.25), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1), epsilon_high=0.3)
    assert explicit.item() == pytest.approx(-1.25)


# Two sequences of 1 and 3 tokens (ratio 1, so each token's loss is -A) with A = +1 and -1:
#   sequence 1: [-1]         sequence 2: [+1, +1, +1]; the masked slots hold +-10,000.
LOGPROBS = torch.tensor([[0.0, BIG, -BIG], [0.0, 0.0, 0.0]])
MASK = torch.tensor([[1, 0, 0], [1, 1, 1]])
SIGNS = torch.tensor([1.0, -1.0])


def test_sequence_and_token_normalisation_differ_on_unequal_lengths():
    grpo, _ = policy_loss(LOGPROBS, torch.zeros(2, 3), SIGNS, MASK, algo="grpo")
    dapo, _ = policy_loss(LOGPROBS, torch.zeros(2, 3), SIGNS, MASK, algo="dapo")
    assert grpo.item() == pytest.approx(0.0)  # mean(-1 / 1, 3 / 3) = 0
    assert dapo.item() == pytest.approx(0.5)  # (-1 + 3) / 4


@pytest.mark.parametrize("algo", ["grpo", "dapo"])
def test_masked_positions_reach_neither_the_loss_nor_the_gradient(algo):
    logprobs = LOGPROBS.clone().requires_grad_()
    loss, stats = policy_loss(logprobs, torch.zeros(2, 3), SIGNS, MASK, algo=algo)
    clean, _ = policy_loss(LOGPROBS * MASK, torch.zeros(2, 3), SIGNS, MASK, algo=algo)
    assert loss.item() == clean.item()
    assert stats == {"clip_ratio/low": 0.0, "clip_ratio/high": 0.0}
    loss.backward()
    assert torch.isfinite(logprobs.grad).all()
    assert logprobs.grad[0, 1:].tolist() == [0.0, 0.0]


def test_grpo_leaves_empty_sequences_out_of_its_mean():
    # Sequence 1 has loss -1; sequence 2 is wholly masked (a void-turn trajectory): the mean is -1, not -0.5.
    loss, _ = policy_loss(LOGPROBS, torch.zeros(2, 3), SIGNS, torch.tensor([[1, 0, 0], [0, 0, 0]]))
    assert loss.item() == pytest.approx(-1.0)


def test_sft_loss_is_the_mean_over_tokens_not_sequences():
    logprobs = torch.tensor([[-1.0, -2.0, BIG], [-3.0, -BIG, -BIG]])
    # NLL tokens 1, 2 and 3: (1 + 2 + 3) / 3 = 2 (a mean of sequence means would give (1.5 + 3) / 2 = 2.25).
    assert sft_loss(logprobs, torch.tensor([[1, 1, 0], [1, 0, 0]])).item() == pytest.approx(2.0)


# Two prompts, G = 2, two tokens each; ratio 1 everywhere, so a token's DAPO loss is -A.
#   group 0 (kept):     A = +1 on [1, 1] -> -1, -1;  A = -1 on [1, 0] -> +1.   L_DAPO = (-1 - 1 + 1) / 3 = -1/3
#   group 1 (filtered): A = +3 on every token; it would pull L_DAPO far down if it were counted.
#   SFT (one expert trajectory per prompt): NLL 1, 1 and 4 (the 4th slot is masked):  L_SFT = 6 / 3 = 2
ROLLOUT_MASK = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
ROLLOUT_ADVANTAGES = torch.tensor([1.0, -1.0, 3.0, 3.0])
SFT_LOGPROBS = torch.tensor([[-1.0, -1.0], [-4.0, BIG]])
SFT_MASK = torch.tensor([[1, 1], [1, 0]])


def mix(informative: list[bool], gamma: float, logprobs: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    rollout = torch.zeros(4, 2) if logprobs is None else logprobs
    return mixed_loss(
        rollout,
        torch.zeros(4, 2),
        ROLLOUT_ADVANTAGES,
        ROLLOUT_MASK,
        informative=torch.tensor(informative),
        sft_logprobs=SFT_LOGPROBS,
        sft_mask=SFT_MASK,
        gamma=gamma,
    )


@pytest.mark.parametrize(("gamma", "expected"), [(0.9, 0.9 * 2 - 0.1 / 3), (0.5, 1 - 1 / 6), (0.05, 0.1 - 0.95 / 3)])
def test_mixed_loss_weighs_sft_against_dapo_over_the_kept_groups(gamma, expected):
    loss, stats = mix([True, False], gamma)
    assert loss.item() == pytest.approx(expected)
    assert stats == pytest.approx(
        {"loss/sft": 2.0, "loss/policy": -1 / 3, "groups/dropped": 0.5, "clip_ratio/low": 0.0, "clip_ratio/high": 0.0}
    )


def test_filtered_groups_contribute_only_the_sft_term():
    logprobs = torch.zeros(4, 2, requires_grad=True)
    loss, stats = mix([False, False], 0.5, logprobs)
    assert loss.item() == pytest.approx(0.5 * 2.0)  # L_DAPO over no tokens is 0
    assert (stats["loss/policy"], stats["groups/dropped"]) == (0.0, 1.0)
    loss.backward()
    assert logprobs.grad.abs().sum().item() == 0.0


def test_only_the_kept_groups_rollouts_get_a_gradient():
    logprobs = torch.zeros(4, 2, requires_grad=True)
    mix([True, False], 0.5, logprobs)[0].backward()
    # (1 - gamma) * d(-r A)/d logprob / 3 kept tokens = 0.5 * -A / 3; masked and filtered slots get nothing.
    expected = [[-1 / 6, -1 / 6], [1 / 6, 0.0], [0.0, 0.0], [0.0, 0.0]]
    assert logprobs.grad.tolist() == [pytest.approx(row) for row in expected]


def test_mixed_loss_refuses_a_gamma_outside_0_1_and_groups_that_do_not_split_the_rows():
    with pytest.raises(ConfigError, match=r"gamma 1\.5"):
        mix([True, False], 1.5)
    with pytest.raises(ConfigError, match="3 groups"):
        mix([True, False, True], 0.5)
