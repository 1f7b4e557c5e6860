"""curate report: counts at every stage, the mixes of what is kept, plots and a page of examples."""

from __future__ import annotations

import json

from datalyst.agent import ActionKind, Turn
from datalyst.curate import curation_report, filter_run, render_curation, write_report
from datalyst.sandbox import ExecResult


def test_the_report_counts_every_stage_and_shows_kept_and_dropped_examples(judged_run):
    run = judged_run()
    filter_run(run, [])
    report = curation_report(run, count_tokens=lambda text: len(text.split()))
    assert (report.tasks, report.verified_tasks, report.trajectories, report.kept) == (2, 1, 8, 6)
    assert report.ground_truth_yield == 1.0 and report.consistency_yield == 1.0 and report.judge is None
    assert [(s.stage, s.kept) for s in report.funnel] == [("select", 7), ("dedup", 6)]
    assert report.mix["category"] == {"Ranking": 4, "Counting": 2} and report.mix["format"] == {"csv": 4, "none": 2}
    assert report.mix["asks"] == {"answer": 6}
    assert report.mix["stratum"] == {"success": 6} and report.mix["selected_by"] == {
        "consistency": 4,
        "ground_truth": 2,
    }
    # "<think>Counted the rows once.</think>\n<answer>@n[4]</answer>" is 5 words; the turn has no token ids
    assert report.lengths["turns"].max == 1 and report.lengths["agent_tokens"].max >= 5

    index = write_report(run, report, sample=10)
    page = index.read_text()
    assert "dropped at select: wrong_answer" in page and "dropped at dedup: exact_duplicate" in page
    assert "Which?" in page and 'href="trajectories/t-3.html"' in page
    assert (index.parent / "trajectories" / "t-3.html").exists()
    assert all((index.parent / name).stat().st_size > 1000 for name in ("funnel.png", "mix.png", "lengths.png"))
    assert json.loads((index.parent / "report.json").read_text())["kept"] == 6
    assert "| select | 7 | wrong_answer 1 |" in (index.parent / "report.md").read_text()


def test_the_report_counts_what_making_the_trajectories_cost_and_the_kept_ones_that_recovered(judged_run):
    run = judged_run()
    failing = Turn(index=0, raw="x", text="<code>1/0</code>", kind=ActionKind.CODE, code="1/0",
                   result=ExecResult(timed_out=True), completion_tokens=30, prompt_tokens=100)  # fmt: skip
    trajectories = run.trajectories()
    second = trajectories[1]  # t#1: right, and kept
    trajectories[1] = second.model_copy(update={"turns": [failing, *second.turns], "duration_s": 12.0})
    run.samples.write_text("".join(t.model_dump_json() + "\n" for t in trajectories))
    filter_run(run, [])
    report = curation_report(run)
    assert report.kept == 6 and report.recovered == 1
    assert report.spent.model_dump() == {
        "completion_tokens": 30, "prompt_tokens": 100, "cells": 1, "seconds": 12.0,
        "per_kept": {"completion_tokens": 5.0, "prompt_tokens": 16.7, "cells": 0.2, "seconds": 2.0}}  # fmt: skip
    assert "1 of the 6 kept reached their answer after a failing cell" in render_curation(report)
