"""Trajectory strata from hand-made and real runs, and selections that follow a target mix."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from curate_helpers import trajectory_of

from datalyst.agent import ActionKind, Agent, Trajectory, Turn
from datalyst.curate import DATARUS_MIX, Stratum, mix_strata, stratum
from datalyst.errors import ConfigError
from datalyst.llm import ReplayModel
from datalyst.sandbox import CellError, ExecResult
from datalyst.tasks import Task

OK = ExecResult(stdout="15684.58")
FAILED = ExecResult(error=CellError(ename="KeyError", evalue="'revenu'"))

S, E, C, F = Stratum.SUCCESS, Stratum.ERROR_CORRECTION, Stratum.SELF_CORRECTION, Stratum.PERSISTENT_FAILURE


def trajectory(*cells: tuple[str, ExecResult], final: str = "I have the total.") -> Trajectory:
    """A code turn per (thought, result) in ``cells``, then an answer turn with the thought ``final``."""
    turns = [
        Turn(index=i, raw="", text="", thought=thought, kind=ActionKind.CODE, code="x", result=result)
        for i, (thought, result) in enumerate(cells)
    ]
    turns.append(Turn(index=len(turns), raw="", text="", thought=final, kind=ActionKind.ANSWER, answer="@t[1]"))
    return trajectory_of(turns, Task(id="t", question="Total?"))


def test_a_wrong_answer_is_a_persistent_failure_whatever_happened_before():
    assert stratum(trajectory(("Sum it.", OK)), correct=False) == F
    assert stratum(trajectory(("Sum it.", FAILED), ("Fix the name.", OK)), correct=False) == F


def test_a_clean_correct_run_is_a_success():
    assert stratum(trajectory(("Load the file.", OK), ("Sum the revenue instead of counting rows.", OK)), True) == S


def test_a_failed_cell_before_a_right_answer_is_error_correction():
    assert stratum(trajectory(("Sum it.", FAILED), ("The column is 'revenue'.", OK)), correct=True) == E
    timed_out = ExecResult(timed_out=True)
    assert stratum(trajectory(("Loop over rows.", timed_out), ("Vectorise it.", OK)), correct=True) == E


def test_error_correction_wins_over_a_self_correction_thought():
    cells = (("Sum it.", FAILED), ("That is wrong, use the right name.", OK), ("That was wrong too.", OK))
    assert stratum(trajectory(*cells), correct=True) == E


@pytest.mark.parametrize(
    "thought",
    [
        "That is wrong: the total counts refunds twice.",
        "I made a mistake, the filter kept 2023.",
        "I used the wrong column; revenue is the one.",
        "The mean should be taken over orders instead of rows.",
        "I forgot to drop the refunds.",
        "Let me recompute without the duplicates.",
        "That doesn't look right for a total, so check it.",
        "I should have grouped by region first.",
    ],
)
def test_a_thought_after_a_good_cell_that_says_a_result_was_wrong_is_self_correction(thought):
    assert stratum(trajectory(("Sum it.", OK), (thought, OK)), correct=True) == C
    assert stratum(trajectory(("Sum it.", OK), final=thought), correct=True) == C


def test_a_correction_phrase_before_any_observation_is_no_self_correction():
    assert stratum(trajectory(("I made a mistake in the plan, start over.", OK)), correct=True) == S


@pytest.mark.parametrize(
    "thought",
    ["The revenue should be summed per region.", "Use the median instead of the mean, as asked.", "Looks right."],
)
def test_ordinary_thoughts_are_not_corrections(thought):
    assert stratum(trajectory(("Load it.", OK), (thought, OK)), correct=True) == S


def code(source: str, thought: str) -> str:
    return f"<think>{thought}</think>\n<code>\n```python\n{source}\n```\n</code>"


def test_a_real_run_with_a_traceback_then_a_fix_is_error_correction(examples_dir):
    task = Task(id="sales", question="Total revenue?", format="@total[value]", files=[str(examples_dir / "sales.csv")])
    model = ReplayModel(
        [
            code("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df['revenu'].sum())", "Sum revenue."),
            code("print(round(df['revenue'].sum(), 2))", "The column is called revenue."),
            "<think>I have it.</think>\n<answer>@total[15684.58]</answer>",
        ],
        per_turn=True,
    )
    run = asyncio.run(Agent(model).arun(task))
    assert run.turns[0].result.error.ename == "KeyError" and run.answer == "@total[15684.58]"
    assert stratum(run, correct=True) == E


# Target mix


def test_the_scarcest_stratum_for_its_share_sets_the_size():
    strata = [S] * 50 + [E] * 50 + [C] * 6 + [F] * 30
    picked = mix_strata(list(range(len(strata))), strata, DATARUS_MIX, rng=random.Random(0))
    # 6 self-corrections at 15% cap n below 7 / 0.15 = 46.7; 46, 45, 44 and 43 each give them a 7th by largest
    # remainders (6.9, 6.75, 6.6, 6.45); 42 -> 16.8, 14.7, 6.3, 4.2 -> 16, 14, 6, 4 and the 2 left to 16.8 and 14.7
    assert Counter(strata[i] for i in picked) == {S: 17, E: 15, C: 6, F: 4}


def test_the_selection_is_seeded_random_within_strata_and_keeps_input_order():
    items = [f"s{i}" for i in range(10)] + [f"e{i}" for i in range(10)]
    strata = [S] * 10 + [E] * 10
    target = {S: 1, E: 1}
    picks = [mix_strata(items[:15], strata[:15], target, rng=random.Random(seed)) for seed in range(10)]
    # 5 e's: 12 would take 6 of them; 11 -> 5.5 and 5.5, the spare one to success (listed first)
    assert all(Counter(p[0] for p in picked) == {"s": 6, "e": 5} for picked in picks)
    assert all(picked == sorted(picked, key=items.index) for picked in picks)
    assert len({tuple(picked) for picked in picks}) > 1
    assert picks[3] == mix_strata(items[:15], strata[:15], target, rng=random.Random(3))


def test_shares_are_normalised_and_strata_without_a_share_are_left_out():
    strata = [S] * 8 + [E] * 3 + [F] * 5
    picked = mix_strata(list(range(16)), strata, {S: 60, E: 20, F: 0}, rng=random.Random(0))
    assert Counter(strata[i] for i in picked) == {S: 8, E: 3}  # 8 / 0.75 -> n = 10 or 11; 11 -> 8.25, 2.75 -> 8, 3


def test_a_stratum_with_a_share_but_no_items_is_left_out_and_empty_input_gives_nothing():
    strata = [S] * 10 + [E] * 3
    picked = mix_strata(list(range(13)), strata, DATARUS_MIX, rng=random.Random(0))
    # shares 0.40 and 0.35 of 0.75 (8/15, 7/15): 8 -> 4.27, 3.73 -> 4, 4 (one too many); 7 -> 3.73, 3.27 -> 4, 3
    assert Counter(strata[i] for i in picked) == {S: 4, E: 3}
    assert mix_strata([], [], DATARUS_MIX, rng=random.Random(0)) == []


def test_bad_targets_are_refused():
    with pytest.raises(ConfigError, match="one of them above 0"):
        mix_strata([1], [S], {S: 0.0}, rng=random.Random(0))
    with pytest.raises(ConfigError, match="0 or more"):
        mix_strata([1], [S], {S: 1.0, E: -0.5}, rng=random.Random(0))
    with pytest.raises(ValueError, match="1 items but 2 strata"):
        mix_strata([1], [S, E], DATARUS_MIX, rng=random.Random(0))
