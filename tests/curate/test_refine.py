"""curate refine: finer workflows for categories that rarely pass, kept in the run and used by its guidance."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.curate import Guide, category_pass_rates, refine_run
from datalyst.errors import ConfigError, ModelResponseError
from datalyst.llm import ReplayModel

STEPS = "1. Load the table.\n2. Check the rank column.\n3. Sort descending.\n4. Report the top item."


def test_pass_rates_count_round_zero_by_category(judged_run):
    rates = category_pass_rates(judged_run())
    assert {name: (r.tasks, r.passed) for name, r in rates.items()} == {"Counting": (1, 1), "Ranking": (1, 1)}


def test_categories_below_the_rate_get_refined_workflows_that_guide_later_sampling(judged_run):
    run = judged_run()
    lines = run.verdicts.read_text().splitlines()
    run.verdicts.write_text(lines[0] + "\n" + lines[1].replace('"passed":true', '"passed":false') + "\n")
    model = ReplayModel([STEPS])
    refined = asyncio.run(refine_run(run, model, below=0.5, min_tasks=1))
    assert refined == {"Ranking": STEPS} and run.config().workflows == {"Ranking": STEPS}
    assert "Ranking" in model.calls[0][0][1].content
    task = next(t.task for t in run.trajectories() if t.task.category == "Ranking")
    assert "2. Check the rank column." in Guide(workflows=run.config().workflows)(task)


def test_a_model_that_writes_no_steps_is_a_clear_error(judged_run):
    run = judged_run()
    run.verdicts.write_text(run.verdicts.read_text().replace('"passed":true', '"passed":false'))
    with pytest.raises(ModelResponseError, match="write them by hand"):
        asyncio.run(refine_run(run, ReplayModel(["Sure!"]), min_tasks=1))
    with pytest.raises(ConfigError):
        asyncio.run(refine_run(run, ReplayModel([]), below=0))


def test_sampling_again_keeps_the_refined_workflows(judged_run):
    run = judged_run()
    run.save(run.config().model_copy(update={"workflows": {"Ranking": STEPS}}))
    resumed = run.start(run.config().model_copy(update={"workflows": {}}))
    assert resumed.workflows == {"Ranking": STEPS} and run.config().workflows == {"Ranking": STEPS}
