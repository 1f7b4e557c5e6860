"""The value and preference losses against values worked out by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from datalyst.train._model_losses import preference_loss, value_loss  # noqa: E402  (needs torch)


def test_value_loss_is_the_mean_squared_error() -> None:
    predicted = torch.tensor([0.5, -1.0, 0.0])
    target = torch.tensor([1.0, -1.0, -0.5])
    # ((0.5 - 1)^2 + 0^2 + (0 + 0.5)^2) / 3 = (0.25 + 0 + 0.25) / 3 = 1/6
    assert value_loss(predicted, target).item() == pytest.approx(1 / 6)
    assert value_loss(target, target).item() == 0.0


def test_value_loss_gradient_points_toward_the_target() -> None:
    predicted = torch.tensor([0.5, -0.2], requires_grad=True)
    value_loss(predicted, torch.tensor([1.0, -1.0])).backward()
    # d/dp mean((p - t)^2) = 2 (p - t) / n: 2 * (-0.5) / 2 = -0.5 and 2 * 0.8 / 2 = 0.8
    assert predicted.grad.tolist() == pytest.approx([-0.5, 0.8])


def test_preference_loss_by_hand() -> None:
    # -log sigmoid(d) = log(1 + e^-d):
    # d = 1 -> log(1 + e^-1) = 0.3132617; d = 0 -> log 2; d = -2 -> log(1 + e^2) = 2.1269280
    assert preference_loss(torch.tensor([1.0]), torch.tensor([0.0])).item() == pytest.approx(0.3132617, rel=1e-6)
    assert preference_loss(torch.tensor([0.3]), torch.tensor([0.3])).item() == pytest.approx(math.log(2))
    pairs = preference_loss(torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0]))
    assert pairs.item() == pytest.approx((0.3132617 + 2.1269280) / 2, rel=1e-6)


def test_preference_loss_stays_finite_and_pushes_the_scores_apart() -> None:
    assert preference_loss(torch.tensor([-200.0]), torch.tensor([200.0])).item() == pytest.approx(400.0)
    assert preference_loss(torch.tensor([200.0]), torch.tensor([-200.0])).item() == 0.0
    preferred = torch.tensor([0.0], requires_grad=True)
    rejected = torch.tensor([0.0], requires_grad=True)
    preference_loss(preferred, rejected).backward()
    # d/dp log(1 + e^-(p - r)) = -sigmoid(r - p) = -1/2 at a tie; the rejected score gets +1/2
    assert (preferred.grad.item(), rejected.grad.item()) == pytest.approx((-0.5, 0.5))
