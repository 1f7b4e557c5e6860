"""Consistency judges: the deterministic rule and a judge model, on answers with known verdicts."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.curate._consistency import Attempt, LLMConsistency, RuleConsistency, parse_agreement
from datalyst.llm import ReplayModel


def attempts(*answers: str | None) -> list[Attempt]:
    return [Attempt(answer=answer, reasoning="r", length=len(answer or "")) for answer in answers]


def test_rule_consistency_agrees_and_picks_the_most_concise():
    verdict = asyncio.run(RuleConsistency().acheck("q", attempts("@n[10]", "@n[10.0]", "@n[10.00]")))
    assert verdict.agree and verdict.best == 0
    longer = [
        Attempt(answer="@n[10]", length=90),
        Attempt(answer="@n[10]", length=40),
        Attempt(answer="@n[10]", length=60),
    ]
    assert asyncio.run(RuleConsistency().acheck("q", longer)).best == 1


def test_rule_consistency_names_the_clashing_attempts():
    verdict = asyncio.run(RuleConsistency().acheck("q", attempts("@n[10]", "@n[10]", "@n[12]")))
    assert not verdict.agree and verdict.best is None
    assert "attempts 1 and 3, 2 and 3" in verdict.critique and "attempt 3: @n[12]" in verdict.critique


def test_an_attempt_without_an_answer_breaks_the_agreement():
    verdict = asyncio.run(RuleConsistency().acheck("q", attempts("@n[10]", None, "@n[10]")))
    assert not verdict.agree and "attempt 2: (no answer)" in verdict.critique


@pytest.mark.parametrize(
    ("reply", "agree", "best", "problem"),
    [
        ("<reasoning>Same.</reasoning><agree>yes</agree><best>2</best>", True, 1, None),
        ("<reasoning>Differ.</reasoning>\n<agree> No </agree>", False, None, None),
        ("<agree>yes</agree><best>4</best>", None, None, "from 1 to 3"),
        ("<agree>maybe</agree>", None, None, "<agree>"),
        ("<agree>yes</agree><agree>no</agree>", None, None, "<agree>"),
        ("They agree.", None, None, "<agree>"),
    ],
)
def test_parse_agreement(reply, agree, best, problem):
    found, wrong = parse_agreement(reply, 3)
    if problem is None:
        assert wrong is None and found.agree is agree and found.best == best
    else:
        assert found is None and problem in wrong


def test_the_judge_model_sees_every_answer_and_is_asked_again_after_an_unreadable_reply():
    model = ReplayModel(["I think they agree.", "<reasoning>All say 10.</reasoning><agree>yes</agree><best>3</best>"])
    judge = LLMConsistency(model)
    verdict = asyncio.run(judge.acheck("How many?", attempts("@n[10]", "ten: @n[10]", "@n[10.0]")))
    assert verdict.agree and verdict.best == 2 and verdict.critique == "All say 10."
    first_prompt = model.calls[0][0][-1].content
    assert all(answer in first_prompt for answer in ("@n[10]", "ten: @n[10]", "@n[10.0]", "How many?"))
    assert len(model.calls) == 2 and "could not be read" in model.calls[1][0][-1].content
    assert judge.name == "llm:replay"


def test_a_judge_that_never_answers_readably_disagrees():
    verdict = asyncio.run(LLMConsistency(ReplayModel(["no", "no"]), max_attempts=2).acheck("q", attempts("1", "1")))
    assert not verdict.agree and "could not be read" in verdict.critique
