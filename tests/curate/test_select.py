"""The four selection strategies on judged groups with known verdicts."""

from __future__ import annotations

import pytest

from datalyst.curate import GroupVerdict, Strategy, select, with_agreed_answer
from datalyst.tasks import Task

VERIFIED = Task(id="v", question="How many?", answer={"n": "4"}, judge="dabench")
OPEN = Task(id="o", question="Which?", judge="dabench")
FAILED = Task(id="f", question="Why?")
UNJUDGED = Task(id="u", question="When?")

VERDICTS = [
    GroupVerdict(id="v@0", task_id="v", round=0, method="ground_truth", trajectory_ids=["v#0", "v#1", "v#2"],
                 correct=[True, False, True], passed=True, best="v#2"),
    GroupVerdict(id="o@0", task_id="o", round=0, method="rule", trajectory_ids=["o#0", "o#1", "o#2"],
                 correct=[True] * 3, passed=True, best="o#1", answer="@region[East]"),
    GroupVerdict(id="f@0", task_id="f", round=0, method="rule", trajectory_ids=["f#0", "f#1", "f#2"],
                 correct=[False] * 3, passed=False, critique="they differ"),
]  # fmt: skip


@pytest.fixture
def trajectories(answered):
    pool = [answered(VERIFIED, k, "@n[4]" if k != 1 else "@n[5]") for k in range(3)]
    pool += [answered(OPEN, k, "@region[East]") for k in range(3)]
    pool += [answered(FAILED, k, str(k)) for k in range(3)]
    return [*pool, answered(UNJUDGED, 0, "x")]


def kept_ids(trajectories, strategy, seed=0):
    kept, dropped = select(trajectories, VERDICTS, strategy, seed=seed)
    assert len(kept) + len(dropped) == len(trajectories)
    return [item.trajectory.id for item in kept], {item.id: item.reason for item in dropped}


def test_con_select_keeps_the_judges_best_of_each_passed_group(trajectories):
    kept, dropped = kept_ids(trajectories, Strategy.CON_SELECT)
    assert kept == ["v#2", "o#1"]
    assert dropped == {
        **{"v#0": "not_chosen", "v#1": "wrong_answer", "o#0": "not_chosen", "o#2": "not_chosen"},
        **{"f#0": "inconsistent", "f#1": "inconsistent", "f#2": "inconsistent", "u#0": "not_judged"},
    }


def test_random_select_keeps_one_right_trajectory_per_group_reproducibly(trajectories):
    picks = {tuple(kept_ids(trajectories, Strategy.RANDOM_SELECT, seed)[0]) for seed in range(20)}
    assert all(len(p) == 2 and p[0] in ("v#0", "v#2") and p[1].startswith("o#") for p in picks) and len(picks) > 1
    assert kept_ids(trajectories, Strategy.RANDOM_SELECT, 7) == kept_ids(trajectories, Strategy.RANDOM_SELECT, 7)


def test_non_select_keeps_every_right_trajectory(trajectories):
    assert kept_ids(trajectories, Strategy.NON_SELECT)[0] == ["v#0", "v#2", "o#0", "o#1", "o#2"]


def test_non_con_keeps_everything_and_says_which_are_right(trajectories):
    kept, dropped = select(trajectories, VERDICTS, Strategy.NON_CON)
    assert not dropped and [item.trajectory.id for item in kept] == [t.id for t in trajectories]
    assert [item.correct for item in kept] == [True, False, True, True, True, True, False, False, False, False]
    assert {item.selected_by for item in kept} == {"unfiltered"}


def test_kept_trajectories_of_open_tasks_carry_the_agreed_answer(trajectories):
    kept, _ = select(trajectories, VERDICTS, Strategy.NON_SELECT)
    by_id = {item.trajectory.id: item for item in kept}
    assert by_id["o#0"].trajectory.task.answer == {"region": "East"} and by_id["o#0"].selected_by == "consistency"
    assert by_id["v#0"].trajectory.task.answer == {"n": "4"} and by_id["v#0"].selected_by == "ground_truth"


def test_an_agreed_answer_without_named_parts_is_judged_by_the_rule():
    task = with_agreed_answer(FAILED, "about 42 percent")
    assert task.answer == "about 42 percent" and task.judge == "rule"
