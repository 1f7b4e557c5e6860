"""Stored trajectories of every stage, judged through the one outcome, give the verdicts and rewards each stage
gave before it had one (``fixtures/outcomes/expected.json``, recorded with the stages' own judging code).

The 58 trajectories come from round 1's and round 2's samples (templates, trap datasets, follow-ups, void turns,
runs that ran out of turns or cells), the expert's runs, model-written questions with no gold answer, a dev run of
DABench, and two edge cases (a blank answer, a run that failed on our side).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest

from datalyst.agent import Trajectory
from datalyst.curate import RuleConsistency, judge_group
from datalyst.eval import ajudge_trajectories
from datalyst.search import Ending, ending_reward
from datalyst.train import with_outcomes
from datalyst.train._rewards import datamind_reward
from datalyst.train._rollouts import score
from datalyst.train._verl import compute_score

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "outcomes"


@pytest.fixture(scope="module")
def stored() -> tuple[list[Trajectory], list[dict]]:
    with gzip.open(FIXTURES / "trajectories.jsonl.gz", "rt", encoding="utf-8") as lines:
        trajectories = [Trajectory.model_validate_json(line) for line in lines if line.strip()]
    expected = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    assert [t.id for t in trajectories] == [row["id"] for row in expected]
    return trajectories, expected


def test_evaluation_outcomes_are_the_verdicts_it_gave(stored):
    trajectories, expected = stored
    reformatted = {(t.dialect, t.id): t.answer for t in trajectories if t.answer}
    outcomes = asyncio.run(ajudge_trajectories(trajectories, reformatted=reformatted, require_isolation=False))
    got = [{"answered": o.answered, "score": o.score, "correct": o.correct, "detail": o.detail,
            "reformatted_score": o.reformatted_score} for o in outcomes]  # fmt: skip
    assert got == [row["eval"] for row in expected]


def test_the_ground_truth_filter_passes_the_trajectories_it_passed(stored):
    trajectories, expected = stored
    got = {t.id: asyncio.run(judge_group([t], 0, RuleConsistency())).correct[0] for t in trajectories
           if t.task.checkable(by_model=True)}  # fmt: skip
    assert got == {row["id"]: row["curate"] for row in expected if "curate" in row}


def test_rl_and_verl_rewards_are_the_ones_rl_gave(stored):
    trajectories, expected = stored
    got = {}
    for trajectory in trajectories:
        if trajectory.task.checkable() and not trajectory.failed:
            run = asyncio.run(score(trajectory))
            reward = datamind_reward(correct=run.correct, well_formed=run.well_formed, length=run.length)
            fields = {"outcome": run.outcome.model_dump_json(), "agent_tokens": run.length}  # what verl passes on
            assert asyncio.run(compute_score("bench", "", None, extra_info=fields))["score"] == reward
            got[trajectory.id] = {"correct": run.correct, "well_formed": run.well_formed, "length": run.length,
                                  "reward": reward}  # fmt: skip
    assert got == {row["id"]: row["rl"] for row in expected if "rl" in row}


def test_value_returns_and_search_rewards_are_the_ones_they_gave(stored):
    trajectories, expected = stored
    judged = with_outcomes(trajectories)
    assert [None if o is None else o.correct for _, o in judged] == [row["value"] for row in expected]
    searched = {t.id: ending_reward(Ending.ANSWER, o) for t, o in judged if o is not None and t.answer is not None}
    assert searched == {row["id"]: row["search"] for row in expected if "search" in row}
