"""Each task's judge scores the agent's final answer; trajectories without an answer score 0."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from datalyst.agent import Termination, Trajectory
from datalyst.errors import ConfigError, DataFileError
from datalyst.eval import ajudge_trajectories, judge_answer
from datalyst.judge import LLMJudge
from datalyst.llm import ReplayModel, SamplingParams
from datalyst.tasks import Task, load_bird


def trajectory(task: Task, answer: str | None, trial: int = 0) -> Trajectory:
    return Trajectory(
        id=f"{task.id}#{trial}",
        task=task,
        trial=trial,
        dialect="datamind",
        model="replay",
        sampling=SamplingParams(),
        system_prompt="",
        first_message="",
        answer=answer,
        termination=Termination.ANSWER if answer else Termination.MAX_TURNS,
        started_at=datetime.now(UTC),
    )


def test_dabench_needs_every_sub_answer_and_names_the_wrong_ones():
    task = Task(id="6", question="?", judge="dabench", answer={"a": "1.50", "b": "x", "c": "3"})
    assert judge_answer(task, "@a[1.5000000001] @b[x] @c[4]") == (0.0, "wrong: c")
    assert judge_answer(task, "@a[1.50]@b[x]@c[3]") == (1.0, None)
    assert judge_answer(task, "no format at all")[0] == 0.0


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Final Answer: 1062", 1.0),
        ("I added them up.\nFinal Answer: 1,062", 1.0),  # normalization strips punctuation
        ("1062", 1.0),  # our agent's answer needs no "Final Answer:" prefix
        ("1063", 0.0),
    ],
)
def test_tablebench_uses_the_official_item_metric(answer, score):
    task = Task(id="t", question="?", judge="tablebench", answer="1062", category="NumericalReasoning",
                subcategory="Aggregation")  # fmt: skip
    assert judge_answer(task, answer)[0] == score


def test_tablebench_within_ten_percent_for_statistical_analysis():
    task = Task(id="t", question="?", judge="tablebench", answer="100", subcategory="StatisticalAnalysis")
    assert judge_answer(task, "109")[0] == 1.0 and judge_answer(task, "111")[0] == 0.0


def test_sql_tasks_are_judged_by_execution(bird_mini):
    task = load_bird(bird_mini)[0]
    assert judge_answer(task, f"```sql\n{task.answer_sql}\n```") == (1.0, None)
    score, error = judge_answer(task, "SELECT 1; DROP TABLE x")
    assert score == 0.0 and error.startswith("refused")
    as_columns = task.model_copy(update={"judge": "csv"})
    assert judge_answer(as_columns, task.answer_sql or "")[0] == 1.0


def test_a_sql_task_without_database_or_gold_query_is_a_data_error():
    with pytest.raises(DataFileError, match="answer_sql"):
        judge_answer(Task(id="s", question="?", judge="sql", files=["x.sqlite"]), "SELECT 1")


def test_rule_tasks_allow_three_percent():
    task = Task(id="r", question="?", answer=200)
    assert task.judge == "rule"
    assert judge_answer(task, "about 205.9")[0] == 1.0 and judge_answer(task, "207")[0] == 0.0


def test_unanswered_trajectories_score_zero_with_the_reason():
    task = Task(id="r", question="?", answer=1)
    [verdict] = asyncio.run(ajudge_trajectories([trajectory(task, None)]))
    assert not verdict.answered and verdict.score == 0.0 and verdict.detail == "no answer (max_turns)"


def test_model_judged_tasks_ask_the_judge_model():
    task = Task(id="m", question="Which region sells most?", judge="llm", answer="West")
    judge = LLMJudge(ReplayModel(["<thought>Same region.</thought><score>1</score>"]))
    [verdict] = asyncio.run(ajudge_trajectories([trajectory(task, "The West region")], llm_judge=judge))
    assert verdict.correct and verdict.detail == "Same region."
    with pytest.raises(ConfigError, match="judge-model"):
        asyncio.run(ajudge_trajectories([trajectory(task, "West")]))
