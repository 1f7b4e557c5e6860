"""The checks a draft's answer must pass, each with its reason."""

from __future__ import annotations

import pytest

from datalyst.sandbox import Sandbox
from datalyst.synth._templates import Answer, Draft
from datalyst.synth._verify import near_duplicate, shingles, verify


def draft(code: str, *answers: Answer) -> Draft:
    return Draft("test", "Counting", "easy", "How many?", "", answers or (Answer("n", "a count", integer=True),), code)


@pytest.fixture(scope="module")
def box():
    with Sandbox() as sandbox:
        yield sandbox


@pytest.mark.parametrize(
    ("code", "answers", "reason"),
    [
        ("print('@n[12]')", (), None),
        ("raise ValueError('no')", (), "solution_failed"),
        ("import random\nprint(f'@n[{random.randrange(10**9)}]')", (), "not_deterministic"),
        ("print('@m[12]')", (), "answer_missing"),
        ("print('@n[12.5]')", (), "badly_written"),
        ("print('@x[3.1]')", (Answer("x", "a mean", decimals=2),), "badly_written"),
        ("print('@x[nan]')", (Answer("x", "a name"),), "badly_written"),
        ("print('@n[0]')", (), "zero_answer"),
        ("print('@x[-0.00]')", (Answer("x", "a difference", decimals=2),), "zero_answer"),
        ("print('@x[123.46]')", (Answer("x", "a mean", decimals=2),), "answer_in_prompt"),
        ("print('@x[0.46]')", (Answer("x", "a share", decimals=2),), None),  # too few digits to be a giveaway
        ("print('@a[1]@b[2]@c[3]@d[4]@e[5]@f[6]')", tuple(Answer(n, "x") for n in "abcdef"), "too_many_answers"),
    ],
)
def test_each_check_has_its_reason(box, code, answers, reason):
    verdict = verify(draft(code, *answers), code, box, prompt="price: min 0.4571, mean 123.456, max 900")
    assert verdict.reason == reason, verdict
    assert (verdict.answer is None) == (reason is not None)


def test_near_duplicates_differ_in_a_word_or_two():
    kept = [shingles("What is the median price of the rows whose region is north?")]
    assert near_duplicate("What is the median price of the rows whose region is North ?", kept)
    assert not near_duplicate("How many rows have units greater than 200?", kept)
