import pytest
from tree_helpers import hand_built

from datalyst.agent import Termination
from datalyst.errors import DataFileError
from datalyst.search import Tree


def test_a_path_is_a_trajectory_with_the_turns_from_the_root():
    tree = hand_built()
    won = tree.trajectory(tree.nodes[3])
    assert [turn.text for turn in won.turns] == ["Action: a", "Answer: @mean[3.2] @max[9]"]
    assert won.answer == "@mean[3.2] @max[9]" and won.termination is Termination.ANSWER
    assert tree.trajectory(tree.nodes[4]).termination is Termination.EXECUTION_ERRORS
    assert tree.trajectory(tree.nodes[6]).answer is None
    assert [node.id for node in tree.path(tree.nodes[5])] == [0, 2, 5]


def test_candidates_are_the_answers_in_the_order_found():
    tree = hand_built()
    assert [node.answer for node in tree.candidates()] == ["@mean[3.2] @max[9]", "@mean[3.2] @max[7]"]
    assert tree.is_open(tree.nodes[1]) and not tree.is_open(tree.nodes[2])


def test_a_tree_saves_and_loads_as_it_was(tmp_path):
    tree = hand_built()
    tree.save(tmp_path / "t1.json")
    assert Tree.load(tmp_path / "t1.json") == tree


def test_a_tree_of_a_newer_schema_or_not_a_tree_is_refused(tmp_path):
    newer = hand_built().model_dump_json().replace('"schema_version":1', '"schema_version":99', 1)
    (tmp_path / "newer.json").write_text(newer)
    with pytest.raises(DataFileError, match="newer than this datalyst reads"):
        Tree.load(tmp_path / "newer.json")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(DataFileError, match="not a search tree"):
        Tree.load(tmp_path / "junk.json")
