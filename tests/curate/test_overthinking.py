"""Datarus's overthinking score on hand-made thoughts, and sampling by score with the 90/10 split."""

from __future__ import annotations

import random

import pytest
from curate_helpers import trajectory_of

from datalyst.agent import ActionKind, Trajectory, Turn
from datalyst.curate._overthinking import (
    OVERTHINKING_VERSION,
    Overthinking,
    overthinking_score,
    sample_by_overthinking,
    score_segments,
)
from datalyst.errors import ConfigError
from datalyst.sandbox import ExecResult
from datalyst.tasks import Task


def trajectory(*thoughts: str, answer: str = "@total[3]") -> Trajectory:
    """One code turn per thought but the last, which answers."""
    turns = [
        Turn(index=i, raw="", text="", thought=t, kind=ActionKind.CODE, code="print(1)", result=ExecResult(stdout="1"))
        for i, t in enumerate(thoughts[:-1])
    ]
    turns.append(Turn(index=len(turns), raw="", text="", thought=thoughts[-1], kind=ActionKind.ANSWER, answer=answer))
    return trajectory_of(turns, Task(id="t", question="Total?"))


def test_a_sentence_that_nearly_repeats_an_earlier_thought_is_a_repeated_hypothesis():
    score = overthinking_score(
        trajectory(
            "The mean revenue is about 261 per order, I think. Load it.",
            # trigrams 6 shared of 8 (jaccard 0.75): a repeat; the short sentence is no hypothesis
            "The mean revenue is about 261 per order. Print the totals by region now.",
            # 3 shared of 9 (jaccard 1/3): a new hypothesis
            "The mean revenue is about 300 per order.",
        )
    )
    assert (score.hypotheses, score.repeats) == (4, 1)
    assert score.repeat_share == 0.25


def test_a_repeat_within_one_segment_is_no_repeated_hypothesis():
    assert score_segments(["The mean is about 261 here. The mean is about 261 here."]).repeats == 0


def test_filler_phrases_are_counted_per_100_words():
    # 12 words in the thought, 2 in the answer: hmm, "wait,", "let me check again", "to be sure"
    score = overthinking_score(trajectory("Hmmm, wait, let me check again. To be sure I print it."))
    assert (score.words, score.fillers) == (14, 4)
    assert score.filler_rate == pytest.approx(400 / 14)
    assert score.filler_part == pytest.approx(score.filler_rate / (score.filler_rate + 2))


def test_fillers_need_whole_words():
    assert score_segments(["Await the hmmer result, then unwait it; the waiter is to be surely paid."]).fillers == 0


def test_a_long_span_written_again_is_stale():
    sentence = "the revenue column holds the price times the quantity of each order"  # 12 words, 10 trigrams
    score = score_segments([sentence, f"{sentence} so we sum it up"])
    # second segment: 17 words, 15 trigrams, its first 10 already seen in a row (a run of 10 >= 8)
    assert (score.shingles, score.stale_shingles) == (25, 10)
    assert score.stale_share == 0.4


def test_a_short_reused_phrase_is_not_stale():
    score = score_segments(["we sum the revenue column of the table", "then sum the revenue column of the rows"])
    # 'sum the revenue column of the' is 4 trigrams seen again: a run shorter than 8
    assert score.shingles == 6 + 6 and score.stale_shingles == 0


def test_the_total_weighs_the_three_parts_and_stays_below_one():
    score = Overthinking(words=10, hypotheses=4, repeats=2, fillers=1, stale_shingles=3, shingles=6)
    # 0.4 * 0.5 + 0.2 * (10 / 12) + 0.4 * 0.5
    assert score.total == pytest.approx(0.2 + 0.2 * 10 / 12 + 0.2)
    assert score.model_dump()["total"] == score.total and score.version == OVERTHINKING_VERSION
    assert score_segments([]).total == 0.0


def test_thoughts_split_at_blank_lines_into_segments():
    chain = "The answer is the sum of all revenue values.\n\nThe answer is the sum of all revenue values, surely."
    assert overthinking_score(trajectory(chain)).repeats == 1


def test_a_concise_trajectory_scores_lower_than_a_loopy_one():
    concise = trajectory(
        "Load the sales file and look at its columns.",
        "Revenue is price times quantity, so sum the revenue column.",
        "The sum is 15684.58, which answers the question.",
    )
    loop = "Hmm, the total revenue should be the sum of the revenue column in the sales table."
    loopy = trajectory(
        "Load the sales file and look at its columns.",
        f"{loop} Wait, let me check again.",
        f"{loop} Let me double-check to be sure.",
        f"Hmm, {loop} Wait, the sum is 15684.58.",
    )
    concise_score, loopy_score = overthinking_score(concise), overthinking_score(loopy)
    assert concise_score.total == 0.0
    assert loopy_score.repeats >= 2 and loopy_score.fillers >= 6 and loopy_score.stale_shingles > 0
    assert 0.3 < loopy_score.total < 1


# Sampling by score


def test_ninety_percent_are_the_most_concise_and_the_rest_come_from_deeper_ones():
    items = list("abcdefghijklmnopqrst")
    scores = [i / 100 for i in range(20)]
    for seed in range(5):
        picked = sample_by_overthinking(items, scores, 10, rng=random.Random(seed))
        # round(0.9 * 10) = 9 lowest (a..i), 1 drawn from j..t
        assert picked[:9] == list("abcdefghi") and len(picked) == 10 and picked[9] in "jklmnopqrst"


def test_the_deeper_part_is_drawn_at_random_and_the_same_seed_gives_the_same_draw():
    items, scores = list(range(20)), [float(i) for i in range(20)]
    draws = {tuple(sample_by_overthinking(items, scores, 10, rng=random.Random(seed))) for seed in range(20)}
    assert len(draws) > 1
    assert sample_by_overthinking(items, scores, 10, rng=random.Random(3)) == sample_by_overthinking(
        items, scores, 10, rng=random.Random(3)
    )


def test_the_concise_count_rounds_half_up():
    items, scores = list(range(10)), [float(i) for i in range(10)]
    picked = sample_by_overthinking(items, scores, 5, rng=random.Random(0))  # 0.9 * 5 = 4.5 -> 5
    assert picked == [0, 1, 2, 3, 4]
    picked = sample_by_overthinking(items, scores, 4, rng=random.Random(0), concise_share=0.5)
    assert picked[:2] == [0, 1] and all(i >= 2 for i in picked[2:]) and len(picked) == 4


def test_ties_at_the_edge_are_broken_at_random():
    items, scores = list("abcde"), [0.0, 0.0, 0.0, 0.5, 0.9]
    draws = {tuple(sample_by_overthinking(items, scores, 2, rng=random.Random(s), concise_share=1)) for s in range(30)}
    assert draws == {("a", "b"), ("a", "c"), ("b", "c")}


def test_items_above_the_threshold_are_dropped_first():
    items, scores = list("abcde"), [0.1, 0.9, 0.2, 0.8, 0.3]
    assert sample_by_overthinking(items, scores, 10, rng=random.Random(0), max_score=0.5) == ["a", "c", "e"]
    assert sample_by_overthinking(items, scores, 2, rng=random.Random(0), max_score=0.85, concise_share=1) == ["a", "c"]


def test_a_pool_no_larger_than_k_is_kept_whole_and_empty_input_gives_nothing():
    assert sample_by_overthinking(list("cab"), [0.3, 0.1, 0.2], 3, rng=random.Random(0)) == ["c", "a", "b"]
    assert sample_by_overthinking(list("cab"), [0.3, 0.1, 0.2], 0, rng=random.Random(0)) == []
    assert sample_by_overthinking([], [], 5, rng=random.Random(0)) == []


def test_bad_sampling_arguments_are_refused():
    with pytest.raises(ConfigError, match="between 0 and 1"):
        sample_by_overthinking([1], [0.0], 1, rng=random.Random(0), concise_share=1.5)
    with pytest.raises(ConfigError, match="0 or more"):
        sample_by_overthinking([1], [0.0], -1, rng=random.Random(0))
    with pytest.raises(ValueError, match="1 items but 2 scores"):
        sample_by_overthinking([1], [0.0, 1.0], 1, rng=random.Random(0))
