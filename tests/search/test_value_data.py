import pytest
from tree_helpers import hand_built

from datalyst.search import value_examples


def test_every_state_on_the_won_and_lost_paths_is_valued_by_its_q():
    examples = value_examples(hand_built())
    assert [example.id for example in examples] == ["t1#0@1", "t1#0@2", "t1#0@3", "t1#0@4", "t1#0@5"]
    assert [example.value for example in examples] == pytest.approx([0.05, 0.25, 1.0, -1.0, 0.5])


def test_a_state_is_the_conversation_up_to_its_turn():
    first, _, won, *_ = value_examples(hand_built())
    assert [message.content for message in first.messages[:2]] == ["system", "Question: What is the mean?"]
    assert first.messages[2].content == "Action: a" and "ran a" in first.messages[3].content
    assert won.messages[: len(first.messages)] == first.messages
    assert won.messages[len(first.messages)].content == "Answer: @mean[3.2] @max[9]"


def test_a_bounded_draw_of_paths_is_the_same_for_the_same_seed():
    one = value_examples(hand_built(), paths=1, seed=3)
    ids = {example.id.split("@")[1] for example in one}
    assert ids in ({"1", "3", "4"}, {"1", "2", "4", "5"})  # one won path and the one lost path, with ancestors
    assert value_examples(hand_built(), paths=1, seed=3) == one
