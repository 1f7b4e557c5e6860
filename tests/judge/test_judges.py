"""``judge_for(task)`` picks the judge the task names; every judge answers ``ajudge(answer)`` with a Judgement."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from datalyst.errors import ConfigError, DataFileError
from datalyst.judge import (
    DABenchJudge,
    Judge,
    Judgement,
    LLMJudge,
    RuleJudge,
    SqlJudge,
    TableBenchJudge,
    judge_for,
)
from datalyst.llm import ReplayModel
from datalyst.tasks import Task, load_bird


def judged(task: Task, answer: str, **options) -> Judgement:
    return asyncio.run(judge_for(task, **options).ajudge(answer))


def test_a_judgement_is_a_frozen_score_in_the_unit_interval():
    judgement = Judgement(score=0.5, correct=False, reason="half")
    with pytest.raises(ValidationError):
        judgement.score = 1.0
    for score in (-0.1, 1.1):
        with pytest.raises(ValidationError):
            Judgement(score=score, correct=False)


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (Task(id="d", question="?", judge="dabench", answer={"a": "1"}), DABenchJudge),
        (Task(id="t", question="?", judge="tablebench", answer="1", subcategory="Counting"), TableBenchJudge),
        (Task(id="s", question="?", judge="sql", files=["x.sqlite"], answer_sql="SELECT 1"), SqlJudge),
        (Task(id="r", question="?", answer=1), RuleJudge),
    ],
)
def test_each_task_gets_the_judge_it_names(task, kind):
    judge = judge_for(task)
    assert isinstance(judge, kind) and isinstance(judge, Judge)


def test_dabench_is_all_or_nothing_names_the_wrong_sub_answers_and_gives_their_share():
    task = Task(id="6", question="?", judge="dabench", answer={"a": "1.50", "b": "x", "c": "3"})
    partly = judged(task, "@a[1.5000000001] @b[x] @c[4]")
    assert partly == Judgement(score=0.0, correct=False, reason="wrong: c", share=2 / 3)
    assert judged(task, "@a[1.50]@b[x]@c[3]") == Judgement(score=1.0, correct=True, share=1.0)
    assert judged(task, "no format at all").share == 0.0
    unlabelled = judged(Task(id="7", question="?", judge="dabench"), "@a[1]")
    assert unlabelled.score == 0.0 and "no @name[value] answers" in unlabelled.reason


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
    assert judged(task, answer).score == score


def test_tablebench_partial_credit_and_the_ten_percent_slack():
    statistics = Task(id="t", question="?", judge="tablebench", answer="100", subcategory="StatisticalAnalysis")
    assert judged(statistics, "109").correct and not judged(statistics, "111").correct
    causal = Task(id="c", question="?", judge="tablebench", answer="red blue", subcategory="CausalAnalysis")
    partial = judged(causal, "red green blue")
    assert partial.score == pytest.approx(0.8) and not partial.correct


def test_sql_tasks_are_judged_by_execution(bird_mini):
    task = load_bird(bird_mini)[0]
    assert judged(task, f"```sql\n{task.answer_sql}\n```") == Judgement(score=1.0, correct=True)
    refused = judged(task, "SELECT 1; DROP TABLE x")
    assert refused.score == 0.0 and refused.reason.startswith("refused")
    assert judged(task.model_copy(update={"judge": "csv"}), task.answer_sql or "").correct


def test_a_sql_task_without_database_or_gold_query_is_a_data_error():
    with pytest.raises(DataFileError, match="answer_sql"):
        judge_for(Task(id="s", question="?", judge="sql", files=["x.sqlite"]))


def test_rule_tasks_allow_three_percent():
    task = Task(id="r", question="?", answer=200)
    assert judged(task, "about 205.9").correct and not judged(task, "207").correct


def test_model_judged_tasks_ask_the_judge_model():
    task = Task(id="m", question="Which region sells most?", judge="llm", answer="West")
    model = ReplayModel(["<thought>Same region.</thought><score>1</score>"])
    judge = judge_for(task, model=model)
    assert isinstance(judge, LLMJudge)
    assert asyncio.run(judge.ajudge("The West region")) == Judgement(score=1.0, correct=True, reason="Same region.")
    [(messages, _)] = model.calls
    assert "Which region sells most?" in messages[1].content and "The West region" in messages[1].content
    with pytest.raises(ConfigError, match="judge model"):
        judge_for(task)
