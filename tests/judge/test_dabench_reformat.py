"""DABench's reformat step: the conversation the reformatting model sees, and what its reply does to the score."""

from __future__ import annotations

import asyncio

from datalyst.judge import REFORMAT_SAMPLING, areformat_dabench, judge_for, reformat_messages
from datalyst.llm import ReplayModel, Role
from datalyst.tasks import Task

TASK = Task(
    id="3",
    question="How many passengers paid more than 100?",
    constraints="Count rows, not unique names.",
    format="@count[number] where number is an integer.",
    judge="dabench",
    answer={"count": "57"},
)


def test_the_model_sees_the_question_its_response_and_a_request_for_the_format():
    question, response, request = reformat_messages(TASK, "The answer is @57.")
    assert [question.role, response.role, request.role] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert TASK.question in question.content and TASK.constraints in question.content
    assert "Format: @count[number] where number is an integer." in question.content
    assert response.content == "The answer is @57."
    assert TASK.format in request.content and "@answer_name[value]" in request.content
    no_constraints = reformat_messages(TASK.model_copy(update={"constraints": ""}), "x")[0].content
    assert "Constraints" not in no_constraints


def test_a_right_value_in_the_wrong_form_counts_once_reformatted():
    model = ReplayModel(["@count[57]"])
    reformatted = asyncio.run(areformat_dabench(model, TASK, "@57"))
    assert reformatted == "@count[57]"
    judge = judge_for(TASK)
    assert not asyncio.run(judge.ajudge("@57")).correct and asyncio.run(judge.ajudge(reformatted)).correct
    [(messages, params)] = model.calls
    assert params == REFORMAT_SAMPLING and params.temperature == 0.0 and len(messages) == 3


def test_a_response_that_already_gives_every_part_asked_is_kept_without_asking_the_model():
    model = ReplayModel(["@count[58]"])
    given = "There are @count[57] of them."
    assert asyncio.run(areformat_dabench(model, TASK, given)) == given
    assert model.calls == []
    two = TASK.model_copy(update={"format": "@count[number] @share[percent]"})
    assert asyncio.run(areformat_dabench(model, two, "@count[57]")) == "@count[58]"  # one part missing: asked
