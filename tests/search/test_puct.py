import math

import pytest
from tree_helpers import code, hand_built, root

from datalyst.agent import Outcome, Status
from datalyst.search import LOST, Ending, Tree, backup, ending_reward, puct, select


def test_backup_counts_each_value_at_the_node_and_every_ancestor():
    tree = hand_built()
    visits = [node.visits for node in tree.nodes]
    sums = [round(node.value_sum, 9) for node in tree.nodes]
    assert visits == [6, 4, 2, 1, 1, 1, 1]
    assert sums == [0.7, 0.2, 0.5, 1.0, -1.0, 0.5, 0.2]
    assert tree.nodes[0].q == pytest.approx(0.7 / 6) and tree.nodes[1].q == pytest.approx(0.05)


def test_puct_is_q_plus_the_prior_weighted_exploration_term():
    tree = hand_built()
    first, second = tree.nodes[1], tree.nodes[2]
    # Q + c * P * sqrt(N_parent) / (1 + N), by hand with N_parent = 6
    assert puct(first, 6, 1.25) == pytest.approx(0.05 + 1.25 * 0.5 * math.sqrt(6) / 5)
    assert puct(second, 6, 1.25) == pytest.approx(0.25 + 1.25 * 0.9 * math.sqrt(6) / 3)
    assert puct(second, 6, 0.0) == pytest.approx(0.25)


def test_selection_skips_branches_that_have_all_ended():
    tree = hand_built()
    # node 2 scores higher, but its only child ended: the open leaf is node 6, under node 1
    assert select(tree, 1.25).id == 6
    assert select(tree, 0.0).id == 6
    tree.nodes[6].ending = Ending.ERRORS
    assert select(tree, 1.25) is None


def two_open_children(values: tuple[float, float], priors: tuple[float, float]) -> Tree:
    tree = Tree.start(root())
    for value, prior in zip(values, priors, strict=True):
        child = tree.add(tree.nodes[0], code(0, "x"), prior=prior, ending=None, errors_in_a_row=0)
        backup(tree, child, value)
    return tree


def test_without_exploration_the_best_value_wins_and_exploration_favours_likely_turns():
    tree = two_open_children(values=(0.1, 0.3), priors=(0.9, 0.1))
    assert select(tree, 0.0).id == 2
    # 0.1 + 5 * 0.9 * sqrt(2) / 2 = 3.28 against 0.3 + 5 * 0.1 * sqrt(2) / 2 = 0.65
    assert select(tree, 5.0).id == 1


def test_ties_go_to_the_likelier_turn_then_the_earlier_one():
    assert select(two_open_children(values=(0.0, 0.0), priors=(0.2, 0.6)), 0.0).id == 2
    assert select(two_open_children(values=(0.0, 0.0), priors=(0.4, 0.4)), 0.0).id == 1


def test_a_fresh_root_is_the_first_node_to_expand():
    assert select(Tree.start(root()), 1.25).id == 0


def _outcome(status: Status, **scores: float) -> Outcome:
    return Outcome(trajectory_id="t#0", task_id="t", dialect="jupiter", trial=0, status=status, **scores)


@pytest.mark.parametrize(
    ("ending", "outcome", "reward"),
    [
        (Ending.ANSWER, _outcome(Status.RIGHT, score=1.0, share=1.0), 1.0),
        (Ending.ANSWER, _outcome(Status.WRONG, score=0.0, share=0.5), 0.5),  # half the sub-answers right
        (Ending.ANSWER, _outcome(Status.WRONG, score=0.0, share=0.0), LOST),
        (Ending.ANSWER, _outcome(Status.RIGHT, score=1.0), 1.0),  # a single answer
        (Ending.ANSWER, _outcome(Status.MALFORMED, score=0.0), LOST),
        (Ending.ANSWER, _outcome(Status.UNANSWERED), LOST),
        (Ending.ERRORS, None, LOST),
        (Ending.VOID, None, LOST),
        (Ending.DEPTH, None, LOST),
        (Ending.OVERFLOW, None, LOST),
    ],
)
def test_an_ended_branch_earns_its_share_of_right_sub_answers_or_minus_one(ending, outcome, reward):
    assert ending_reward(ending, outcome) == pytest.approx(reward)
