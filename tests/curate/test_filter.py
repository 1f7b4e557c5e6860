"""curate filter: the stages in order, what each drops and why, and what is kept with its scores."""

from __future__ import annotations

import json

from datalyst.agent import Trajectory
from datalyst.curate import KEEP, Curated, Decision, FilterOptions, Strategy, Stratum, filter_run


class NoWord:
    """Drops trajectories whose answer holds a word."""

    name = "no_word"
    reasons = ("has_word",)

    def __init__(self, word: str) -> None:
        self.word = word

    def check(self, trajectory: Trajectory) -> Decision:
        return Decision(reason="has_word", detail=self.word) if self.word in (trajectory.answer or "") else KEEP


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_stage_sees_what_the_one_before_kept_and_every_drop_has_a_reason(judged_run):
    folder = judged_run()
    summary = filter_run(folder, [NoWord("bad")])
    assert [(s.stage, s.kept, s.dropped) for s in summary.funnel] == [
        ("select", 7, {"wrong_answer": 1}),
        ("no_word", 6, {"has_word": 1}),
        ("dedup", 5, {"exact_duplicate": 1}),
    ]
    kept = [Curated.model_validate(line) for line in lines(folder.kept)]
    assert [c.id for c in kept] == ["t#0", "o#0", "o#1", "o#2", "o#3"] and summary.kept == 5
    assert all(c.stratum == Stratum.SUCCESS and c.overthinking >= 0 for c in kept)
    assert kept[1].trajectory.task.answer == {"x": "East"} and kept[1].selected_by == "consistency"
    dropped = {d["id"]: (d["stage"], d["reason"]) for d in lines(folder.dropped)}
    assert dropped == {
        "t#3": ("select", "wrong_answer"),
        "t#1": ("no_word", "has_word"),
        "t#2": ("dedup", "exact_duplicate"),
    }
    manifest = json.loads((folder.path / "kept.jsonl.manifest.json").read_text())
    assert manifest["checks"] == ["no_word"] and manifest["summary"]["kept"] == 5


def test_expert_runs_mark_their_trajectories_as_the_experts(judged_run):
    filter_run(judged_run("expert"), [])
    assert {c["selected_by"] for c in lines(judged_run("expert").kept) if c} <= {"expert"}


def test_non_con_keeps_wrong_answers_as_persistent_failures(judged_run):
    folder = judged_run()
    summary = filter_run(folder, [], FilterOptions(strategy=Strategy.NON_CON))
    kept = {c["id"]: c["stratum"] for c in lines(folder.kept)}
    assert kept["t#3"] == "persistent_failure" and summary.by_stratum["persistent_failure"] == 1


def test_overthinking_sampling_and_the_strata_mix_are_stages_of_their_own(judged_run):
    folder = judged_run()
    summary = filter_run(folder, [], FilterOptions(keep=3))
    assert summary.funnel[-1].stage == "overthinking" and summary.kept == 3
    assert summary.funnel[-1].dropped == {"not_sampled": 3}
    folder = judged_run()
    summary = filter_run(
        folder,
        [],
        FilterOptions(strategy=Strategy.NON_CON, mix={Stratum.SUCCESS: 0.5, Stratum.PERSISTENT_FAILURE: 0.5}),
    )
    assert summary.funnel[-1].stage == "mix" and summary.by_stratum == {"persistent_failure": 1, "success": 2}
