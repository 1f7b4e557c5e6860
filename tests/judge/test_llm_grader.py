"""The LLM grader against a scripted model: prompt, verdicts, retries, give-up and errors."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.errors import ConfigError, ModelError, ModelResponseError
from datalyst.judge import LLMGrader, LLMVerdict, parse_judgement, render_judge_prompt
from datalyst.llm import ReplayModel, Role, SamplingParams

GOOD = "<thought>The answer 0.45 is within 3% of 0.452.</thought>\n<score>1</score>"
WRONG = "<thought>The answer 12 is far from 20.</thought>\n<score>0</score>"


def run(coro):
    return asyncio.run(coro)


# ---------------------------------------------------------------- reading a reply


@pytest.mark.parametrize(
    ("reply", "score", "problem"),
    [
        (GOOD, 1, None),
        (WRONG, 0, None),
        ("<thought>ok</thought><score> 1 </score>", 1, None),  # spaces around the digit
        ("<THOUGHT>ok</THOUGHT><Score>0</Score>", 0, None),  # tags in any case
        ("<score>1</score> and again <score>1</score>", 1, None),  # a repeated identical score
        ("I think it is right.", None, "no <score>"),
        ("<score>1", None, "no <score>"),  # never closed
        ("<score>0.5</score>", None, "neither 0 nor 1"),
        ("<score>yes</score>", None, "neither 0 nor 1"),
        ("<score></score>", None, "neither 0 nor 1"),
        ("<score>0</score><score>1</score>", None, "several different scores"),
        ("", None, "no <score>"),
    ],
)
def test_parse_judgement(reply, score, problem):
    got_score, _, got_problem = parse_judgement(reply)
    assert got_score == score
    assert (got_problem is None) if problem is None else (problem in got_problem)


def test_reasoning_is_the_thought_or_the_text_before_the_score():
    assert parse_judgement(GOOD)[1] == "The answer 0.45 is within 3% of 0.452."
    assert parse_judgement("Close enough.\n<score>1</score>")[1] == "Close enough."
    assert parse_judgement("<thought>Unclosed <score>1</score>")[1] == "Unclosed"


# ---------------------------------------------------------------- the prompt


def test_prompt_holds_question_prediction_gold_and_the_tolerance():
    system, user = render_judge_prompt("What is the mean fare?", "About 34.7", {"mean_fare": 34.65})
    assert (system.role, user.role) == (Role.SYSTEM, Role.USER)
    assert "3%" in system.content and "0.03" in system.content
    assert "<thought>" in system.content and "<score>" in system.content
    assert "What is the mean fare?" in user.content
    assert "About 34.7" in user.content
    assert '{"mean_fare": 34.65}' in user.content  # non-text gold as JSON
    assert user.content.index("About 34.7") < user.content.index("34.65}")


def test_braces_and_template_syntax_in_answers_are_kept_verbatim():
    _, user = render_judge_prompt("Q {{ x }}?", "{% if %} {0}", "{gold}")
    assert "Q {{ x }}?" in user.content and "{% if %} {0}" in user.content and "{gold}" in user.content


# ---------------------------------------------------------------- judging


def test_a_good_verdict_in_one_call():
    model = ReplayModel([GOOD])
    verdict = run(LLMGrader(model).agrade("What is r?", "0.45", "0.452"))
    assert isinstance(verdict, LLMVerdict)
    assert (verdict.score, verdict.attempts, verdict.error) == (1, 1, None)
    assert verdict.is_correct
    assert verdict.reasoning == "The answer 0.45 is within 3% of 0.452."
    assert verdict.raw == [GOOD]
    messages, params = model.calls[0]
    assert [m.role for m in messages] == [Role.SYSTEM, Role.USER]
    assert "What is r?" in messages[1].content and "0.452" in messages[1].content
    assert params.temperature == 0.0 and params.max_tokens == 256 and params.n == 1


def test_a_zero_verdict():
    verdict = LLMGrader(ReplayModel([WRONG])).grade("How many?", "12", 20)
    assert (verdict.score, verdict.attempts, verdict.is_correct) == (0, 1, False)


def test_retry_after_an_unreadable_reply_then_success():
    model = ReplayModel(["Looks right to me.", GOOD])
    verdict = run(LLMGrader(model).agrade("What is r?", "0.45", "0.452"))
    assert (verdict.score, verdict.attempts, verdict.error) == (1, 2, None)
    assert verdict.raw == ["Looks right to me.", GOOD]
    second, _ = model.calls[1]
    assert [m.role for m in second] == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER]
    assert second[2].content == "Looks right to me."
    assert "no <score>" in second[3].content and "<score>0</score>" in second[3].content


def test_give_up_after_max_attempts_and_report_the_problem():
    replies = ["<score>maybe</score>", "no tags", "<score>0</score><score>1</score>"]
    model = ReplayModel(replies)
    verdict = run(LLMGrader(model, max_attempts=3).agrade("Q", "A", "B"))
    assert verdict.score is None and not verdict.is_correct
    assert verdict.attempts == 3
    assert verdict.raw == replies
    assert "3 attempt" in verdict.error and "several different scores" in verdict.error
    assert model.remaining == 0
    assert len(model.calls[-1][0]) == 2 + 2 * 2  # the opening plus two reply/correction pairs


def test_max_attempts_of_one_means_no_retry():
    model = ReplayModel(["???", GOOD])
    verdict = run(LLMGrader(model, max_attempts=1).agrade("Q", "A", "B"))
    assert (verdict.score, verdict.attempts, model.remaining) == (None, 1, 1)


def test_empty_answer_scores_zero_without_a_call():
    model = ReplayModel([])
    for predicted in ("", "   \n", None):
        verdict = run(LLMGrader(model).agrade("Q", predicted, "B"))
        assert (verdict.score, verdict.attempts, verdict.raw) == (0, 0, [])
    assert model.calls == []


def test_sampling_is_configurable_and_one_completion_is_asked_for():
    model = ReplayModel([GOOD])
    grader = LLMGrader(model, sampling=SamplingParams(n=4, temperature=0.7, max_tokens=64))
    run(grader.agrade("Q", "A", "B"))
    params = model.calls[0][1]
    assert (params.n, params.temperature, params.max_tokens) == (1, 0.7, 64)


def test_backend_errors_propagate():
    with pytest.raises(ModelError):
        run(LLMGrader(ReplayModel([])).agrade("Q", "A", "B"))  # the replay model has run out
    with pytest.raises(ModelResponseError):
        run(LLMGrader(ReplayModel(["bad"])).agrade("Q", "A", "B"))  # runs out on the retry


def test_bad_settings_are_rejected():
    with pytest.raises(ConfigError, match="max_attempts"):
        LLMGrader(ReplayModel([]), max_attempts=0)
    with pytest.raises(ConfigError, match="concurrency"):
        run(LLMGrader(ReplayModel([])).agrade_many([], concurrency=0))


def test_grade_many_keeps_input_order_and_bounds_concurrency():
    model = ReplayModel([GOOD, WRONG, GOOD, WRONG, GOOD], latency_s=0.01)
    grader = LLMGrader(model)
    active = peak = 0
    generate = model.agenerate

    async def counting(messages, params):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            return await generate(messages, params)
        finally:
            active -= 1

    model.agenerate = counting
    items = [(f"Q{i}", f"A{i}", f"B{i}") for i in range(5)]
    verdicts = run(grader.agrade_many(items, concurrency=2))
    assert [v.score for v in verdicts] == [1, 0, 1, 0, 1]  # replies are handed out in call order
    assert peak == 2
    assert [call[0][1].content.split("\n")[1] for call in model.calls] == [f"Q{i}" for i in range(5)]
