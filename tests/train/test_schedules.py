"""The cosine schedules of gamma and of the structure weight, at their ends, middle and quarter."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")  # datalyst.train needs the [train] extra

from datalyst.errors import ConfigError
from datalyst.train._schedules import cosine, sft_weight, structure_weight


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
