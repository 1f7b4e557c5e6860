"""curate report: counts at every stage, the mixes of what is kept, plots and a page of examples."""

from __future__ import annotations

import json

from datalyst.curate import build_report, filter_run, write_report


def test_the_report_counts_every_stage_and_shows_kept_and_dropped_examples(judged_run):
    run = judged_run()
    filter_run(run, [])
    report = build_report(run, count_tokens=lambda text: len(text.split()))
    assert (report.tasks, report.verified_tasks, report.trajectories, report.kept) == (2, 1, 8, 6)
    assert report.ground_truth_yield == 1.0 and report.consistency_yield == 1.0 and report.judge is None
    assert [(s.stage, s.kept) for s in report.funnel] == [("select", 7), ("dedup", 6)]
    assert report.mix["category"] == {"Ranking": 4, "Counting": 2} and report.mix["format"] == {"csv": 4, "none": 2}
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
