"""The cosine schedules of gamma, of the structure weight and of the learning rate."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")  # datalyst.train needs the [train] extra

from datalyst.errors import ConfigError
from datalyst.train._schedules import cosine, rate_scale, sft_weight, structure_weight


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.9),  # start
        (5, 0.475),  # middle of 11 steps (progress 5 / 10): cos = 0, so (0.9 + 0.05) / 2
        (10, 0.05),  # last step
        (20, 0.05),  # past the end: held
        (-3, 0.9),  # before the start: held
    ],
)
def test_gamma_goes_from_0_9_to_0_05(step, expected):
    assert sft_weight(step, 11) == pytest.approx(expected)


def test_gamma_at_a_quarter():
    # step 1 of 5 (progress 1/4): 0.05 + 0.85 * (1 + cos(pi / 4)) / 2 = 0.05 + 0.85 * 0.85355 = 0.77552
    assert sft_weight(1, 5) == pytest.approx(0.05 + 0.85 * (1 + math.sqrt(0.5)) / 2)
    assert sft_weight(1, 5) == pytest.approx(0.77552, abs=1e-5)


def test_gamma_never_rises():
    values = [sft_weight(step, 50) for step in range(50)]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize(("step", "expected"), [(0, 1.0), (5, 0.55), (10, 0.1)])  # middle: (1 + 0.1) / 2
def test_structure_weight_goes_from_1_to_its_floor(step, expected):
    assert structure_weight(step, 11) == pytest.approx(expected)


def test_structure_weight_floor_can_be_set():
    assert structure_weight(10, 11, floor=0.0) == pytest.approx(0.0)


def test_a_one_step_run_stays_at_the_start_and_an_empty_one_is_refused():
    assert cosine(0, 1, 0.9, 0.05) == 0.9
    with pytest.raises(ConfigError, match="at least one step, not 0"):
        sft_weight(0, 0)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 0.25),  # the first update already learns: 1 / (3 + 1)
        (2, 0.75),  # the last warm-up step
        (3, 1.0),  # the peak
        (5, 0.5),  # halfway through the 4 decay steps: (1 + cos(pi / 2)) / 2
        (6, 0.5 * (1 + math.cos(3 * math.pi / 4))),  # 0.14645
    ],
)
def test_the_learning_rate_warms_up_from_its_first_step_then_decays(step, expected):
    assert rate_scale(step, 7, 3) == pytest.approx(expected)


def test_without_warm_up_the_rate_starts_at_its_peak():
    assert rate_scale(0, 10, 0) == 1.0


def test_the_torch_scheduler_follows_rate_scale():
    import torch

    from datalyst.train._loop import cosine_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    scheduler = cosine_with_warmup(optimizer, warmup_ratio=0.3, total=7)  # ceil(2.1) = 3 warm-up steps
    rates = []
    for _ in range(7):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([2.0 * rate_scale(step, 7, 3) for step in range(7)])
    assert rates[0] == 0.5
