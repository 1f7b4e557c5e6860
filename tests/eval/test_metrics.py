"""pass@1 / pass@k, bootstrap intervals, behaviour counts and paired comparisons, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from datalyst.agent import Status
from datalyst.eval import EvalOutcome, bootstrap, paired_difference, pass_rates
from datalyst.eval._metrics import score_matrix, unbiased_pass_at_k


def verdicts(table: dict[str, list[float]]) -> list[EvalOutcome]:
    return [
        EvalOutcome(
            trajectory_id=f"{task}#{trial}",
            task_id=task,
            dialect="datamind",
            trial=trial,
            score=score,
            status=Status.RIGHT if score == 1.0 else Status.WRONG,
        )
        for task, scores in table.items()
        for trial, score in enumerate(scores)
    ]


def test_pass_at_1_averages_trials_and_pass_at_k_takes_the_best():
    # task a: right 1 of 3; b: 3 of 3; c: never; d: partial credit 0.5 twice (DABench sub-answers).
    rates = pass_rates(verdicts({"a": [1, 0, 0], "b": [1, 1, 1], "c": [0, 0, 0], "d": [0.5, 0, 0.5]}))
    assert rates.n_tasks == 4 and rates.k == 3
    assert rates.pass_at_1.value == pytest.approx((1 / 3 + 1 + 0 + 1 / 3) / 4)  # 0.4167
    assert rates.pass_at_k.value == pytest.approx((1 + 1 + 0 + 0.5) / 4)  # 0.625
    assert rates.pass_at_1.low <= rates.pass_at_1.value <= rates.pass_at_1.high


def test_a_missing_trial_counts_as_zero():
    table = verdicts({"a": [1, 1], "b": [1, 1]})[:-1]  # b#1 never ran
    ids, matrix = score_matrix(table)
    assert ids == ["a", "b"] and matrix.tolist() == [[1, 1], [1, 0]]


def test_no_verdicts_give_zero_rates():
    rates = pass_rates([])
    assert rates.n_tasks == 0 and rates.pass_at_1.value == 0.0 and rates.pass_at_k.value == 0.0


def test_task_ids_sort_naturally():
    ids, _ = score_matrix(verdicts({"10": [1], "9": [0], "x": [1]}))
    assert ids == ["9", "10", "x"]


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = np.array([1.0] * 30 + [0.0] * 30)
    first, again = bootstrap(values, seed=1), bootstrap(values, seed=1)
    assert first == again and first.value == 0.5
    assert 0.35 < first.low < 0.5 < first.high < 0.65  # about +-1.96 * sqrt(.25/60) = 0.127
    assert bootstrap(np.array([1.0, 1.0]), seed=0).low == 1.0
    assert bootstrap(np.array([]), seed=0).value == 0.0


def test_paired_difference_of_a_clear_win_is_significant():
    a, b = np.zeros(40), np.ones(40)
    diff = paired_difference(a, b)
    assert diff.delta.value == 1.0 and diff.is_significant and diff.p_value < 0.001


def test_paired_difference_of_equal_runs_is_not_significant():
    scores = np.array([1.0, 0.0] * 20)
    diff = paired_difference(scores, scores.copy())
    assert diff.delta.value == 0.0 and diff.p_value == 1.0 and not diff.is_significant


def test_paired_difference_of_one_flip_is_not_significant():
    a = np.array([1.0, 0.0] * 20)
    b = a.copy()
    b[1] = 1.0  # one task more out of 40
    diff = paired_difference(a, b)
    assert diff.delta.value == pytest.approx(1 / 40)
    assert diff.p_value > 0.4  # a single sign: half of the flips are as extreme


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 1, 0.3),  # c / n
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7, 5) / C(10, 5)
        (10, 6, 5, 1.0),  # fewer than k wrong samples: some draw of k always holds a right one
        (5, 0, 1, 0.0),
    ],
)
def test_the_unbiased_estimator_matches_its_closed_form(n, c, k, expected):
    assert unbiased_pass_at_k(n, c, k) == pytest.approx(expected)
