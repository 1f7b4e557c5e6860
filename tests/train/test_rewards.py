"""DataMind's Eq. 8, Datarus's tag reward and the curriculum blend, against values worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datalyst.agent import Step, get_dialect

pytest.importorskip("torch")  # datalyst.train needs the [train] extra

from datalyst.errors import ConfigError
from datalyst.train._rewards import curriculum_reward, datamind_reward, length_reward, tag_reward


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (100, 1.0),  # under l_min
        (256, 1.0),  # at l_min
        (257, 0.5 + 0.5 * 767 / 768),  # just past it: 0.99935
        (640, 0.75),  # halfway: 0.5 + 0.5 * (1024 - 640) / (1024 - 256) = 0.5 + 0.5 * 0.5
        (1024, 0.5),  # at l_max
        (5000, 0.5),  # beyond
    ],
)
def test_length_reward(length, expected):
    assert length_reward(length) == pytest.approx(expected)


def test_length_reward_with_other_bounds():
    assert length_reward(15, l_min=10, l_max=20) == pytest.approx(0.75)  # 0.5 + 0.5 * 5 / 10


@pytest.mark.parametrize(("l_min", "l_max"), [(1024, 256), (256, 256), (-1, 10)])
def test_length_bounds_out_of_order_are_refused(l_min, l_max):
    with pytest.raises(ConfigError, match="length bounds"):
        length_reward(100, l_min=l_min, l_max=l_max)


@pytest.mark.parametrize(
    ("correct", "well_formed", "expected"),
    [
        (True, True, 0.75),  # right: r_length of 640 tokens
        (True, False, 0.75),  # right answers are paid whatever the format (Eq. 8's first case)
        (False, True, 0.0),  # wrong but well formed
        (False, False, -0.1),  # wrong and malformed
    ],
)
def test_datamind_reward(correct, well_formed, expected):
    assert datamind_reward(correct=correct, well_formed=well_formed, length=640) == pytest.approx(expected)


def test_datamind_reward_passes_its_bounds_on():
    assert datamind_reward(correct=True, well_formed=True, length=15, l_min=10, l_max=20) == pytest.approx(0.75)


@given(st.booleans(), st.booleans(), st.integers(min_value=0, max_value=100_000))
def test_datamind_reward_lies_in_its_three_bands(correct, well_formed, length):
    reward = datamind_reward(correct=correct, well_formed=well_formed, length=length)
    assert reward in (-0.1, 0.0) or 0.5 <= reward <= 1.0


DATARUS = get_dialect("datarus")
CODE_TURN = DATARUS.render(Step(thought="Load the file.", code="print(1)"))
ANSWER_TURN = DATARUS.render(Step(thought="Done.", answer="@mean[3.2]"))


def test_a_datarus_trajectory_written_by_our_dialect_earns_the_whole_reward():
    # <step> at position 0: 1; thought .8, action .6, action_input .4, </step> .2, stop_analysis .6; <thought>
    # and <answer> after <stop_analysis>: .2 each. 4.0 / 4.0 = 1.
    assert tag_reward(CODE_TURN + "\n" + ANSWER_TURN) == pytest.approx(1.0)


def test_tag_reward_of_single_turns():
    assert tag_reward(CODE_TURN) == pytest.approx(3.0 / 4)  # 1 + .8 + .6 + .4 + .2, no conclusion
    assert tag_reward(ANSWER_TURN) == pytest.approx(1.8 / 4)  # no <step>: .8 + .6 + .2 + .2


def test_the_step_tag_earns_more_the_earlier_it_opens():
    text = "x" * 30 + "<step>" + "y" * 4  # 40 characters, <step> at 30: 1 - 30 / 40 = 0.25
    assert tag_reward(text) == pytest.approx(0.25 / 4)
    assert tag_reward("no tags at all") == 0.0


def test_conclusion_tags_count_only_after_stop_analysis():
    assert tag_reward("<answer>42</answer><stop_analysis>") == pytest.approx(0.6 / 4)  # the tag alone
    assert tag_reward("<stop_analysis>\n<answer>42</answer>") == pytest.approx(0.8 / 4)  # + .2 for <answer>


def test_action_input_is_not_mistaken_for_action():
    assert tag_reward("<action_input>x</action_input>") == pytest.approx(0.4 / 4)


@pytest.mark.parametrize(("weight", "expected"), [(1.0, 0.5), (0.25, 0.875), (0.0, 1.0)])
def test_curriculum_reward_blends_structure_and_semantics(weight, expected):
    assert curriculum_reward(0.5, 1.0, weight) == pytest.approx(expected)  # 0.25 * 0.5 + 0.75 * 1.0 = 0.875


def test_curriculum_weight_outside_0_1_is_refused():
    with pytest.raises(ConfigError, match=r"structure weight 1\.2"):
        curriculum_reward(0.5, 1.0, 1.2)
