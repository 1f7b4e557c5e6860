"""curate judge: ground truth for verified tasks, consistency for the rest, and reflection on failures."""

from __future__ import annotations

import asyncio
import json

import pytest

from datalyst.agent import AgentConfig
from datalyst.curate import (
    RuleConsistency,
    RunConfig,
    RunFolder,
    judge_group,
    judge_run,
    read_group_verdicts,
    tasks_in_band,
)
from datalyst.llm import ReplayModel
from datalyst.tasks import Task


@pytest.fixture
def verified(examples_dir) -> Task:
    return Task(id="regions", question="How many regions?", format="@regions[value]", answer={"regions": "4"},
                judge="dabench", files=[str(examples_dir / "sales.csv")], category="Counting")  # fmt: skip


@pytest.fixture
def open_task(examples_dir) -> Task:
    return Task(id="best", question="Which region sells most?", format="@region[name]", judge="dabench",
                files=[str(examples_dir / "sales.csv")], category="Ranking")  # fmt: skip


@pytest.fixture
def group(answered):
    def make(task, *answers):
        return [answered(task, trial, answer, thought="x" * (10 * trial)) for trial, answer in enumerate(answers)]

    return make


def test_a_verified_task_passes_when_one_answer_is_right_and_the_shortest_right_one_is_best(verified, group):
    verdict = asyncio.run(
        judge_group(group(verified, "@regions[5]", "@regions[4]", "@regions[4.0]"), 0, RuleConsistency())
    )
    assert verdict.method == "ground_truth" and verdict.passed
    assert verdict.correct == [False, True, True] and verdict.best == "regions#1" and verdict.answer is None
    assert verdict.critique == "2 of 3 answers are right (attempt 1: wrong: regions)."


def test_a_verified_task_whose_answers_are_all_wrong_fails_without_revealing_the_gold(verified, group):
    verdict = asyncio.run(judge_group(group(verified, "@regions[5]", None, "@regions[3]"), 0, RuleConsistency()))
    assert not verdict.passed and verdict.best is None and verdict.correct == [False] * 3
    assert "4" not in verdict.critique


def test_an_open_task_passes_when_its_answers_agree_and_takes_the_agreed_answer(open_task, group):
    verdict = asyncio.run(
        judge_group(group(open_task, "@region[East]", "@region[east]", "@region[East]"), 2, RuleConsistency())
    )
    assert verdict.id == "best@2" and verdict.method == "rule" and verdict.passed
    assert verdict.correct == [True] * 3 and verdict.best == "best#0" and verdict.answer == "@region[East]"


def test_an_open_task_whose_answers_disagree_fails(open_task, group):
    verdict = asyncio.run(
        judge_group(group(open_task, "@region[East]", "@region[West]", "@region[East]"), 0, RuleConsistency())
    )
    assert not verdict.passed and verdict.correct == [False] * 3 and verdict.answer is None


def write_run(tmp_path, trajectories, n=3) -> RunFolder:
    run = RunFolder(tmp_path / "run")
    run.start(RunConfig(source="sample", tasks=["tasks.jsonl"], model="replay", agent=AgentConfig(), n=n))
    run.samples.write_text("".join(t.model_dump_json() + "\n" for t in trajectories))
    return run


def test_reflection_samples_failed_tasks_again_with_the_critique_and_rescues_them(tmp_path, verified, open_task, group):
    run = write_run(tmp_path, [
        *group(verified, "@regions[4]", "@regions[5]", "@regions[4]"),
        *group(open_task, "@region[East]", "@region[West]", "@region[North]"),
    ])  # fmt: skip
    model = ReplayModel(["<think>Recounted.</think>\n<answer>@region[East]</answer>"] * 3)
    summary = asyncio.run(judge_run(run, RuleConsistency(), rounds=1, model=model, concurrency=1, progress=False))
    prompts = [call[0][1].content for call in model.calls]
    assert len(prompts) == 3 and all("Attempt 2: @region[West]" in p and "disagree" in p for p in prompts)
    assert all("A workflow" not in p for p in prompts)  # the run was sampled without knowledge
    reflected = [t for t in run.trajectories() if t.trial >= 3]
    assert sorted(t.id for t in reflected) == ["best#3", "best#4", "best#5"]
    assert all(t.guidance and t.first_message.endswith(t.guidance) for t in reflected)
    verdicts = {v.id: v for v in read_group_verdicts(run)}
    assert set(verdicts) == {"regions@0", "best@0", "best@1"} and verdicts["best@1"].passed
    assert summary.rescued == 1 and summary.passed_by_round == {0: 1, 1: 1} and summary.failed_by_round == {0: 1}
    assert summary.by_method == {"ground_truth": {"passed": 1, "tasks": 1}, "rule": {"passed": 1, "tasks": 1}}
    manifest = json.loads((run.path / "verdicts.jsonl.manifest.json").read_text())
    assert manifest["summary"]["rescued"] == 1

    again = asyncio.run(judge_run(run, RuleConsistency(), rounds=1, model=ReplayModel([]), progress=False))
    assert again == summary and len(read_group_verdicts(run)) == 3  # nothing judged or sampled twice


def test_without_a_model_failed_tasks_stay_failed_and_incomplete_groups_wait(tmp_path, open_task, verified, group):
    run = write_run(tmp_path, [*group(open_task, "@region[East]", "@region[West]", "@region[East]"),
                               *group(verified, "@regions[4]", "@regions[4]")])  # fmt: skip
    summary = asyncio.run(judge_run(run, RuleConsistency(), rounds=2, progress=False))
    assert summary.groups == 1 and summary.failed_by_round == {0: 1} and summary.incomplete == 1


def test_a_verified_task_judged_by_a_model_uses_the_judge_model(answered):
    task = Task(id="d", question="Describe the trend.", answer="rising", judge="llm")
    model = ReplayModel(["<thought>Same.</thought><score>1</score>"])
    verdict = asyncio.run(judge_group([answered(task, 0, "It goes up.")], 0, RuleConsistency(), judge_model=model))
    assert verdict.method == "ground_truth" and verdict.passed and len(model.calls) == 1


def test_the_tasks_in_a_band_of_pass_rates_are_the_verified_ones_solved_that_often(judged_run):
    run = judged_run()  # t: ground truth, right 3 times in 4; o: agreed by the rule judge (no verified answer)
    assert [task.id for task in tasks_in_band(run, 0.2, 0.8)] == ["t"]
    assert tasks_in_band(run, 0.8, 1.0) == [] and [task.id for task in tasks_in_band(run, 0.75, 0.75)] == ["t"]
