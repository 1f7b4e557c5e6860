"""Linguistic integrity: a corpus of garbled, drifting and clean thoughts with the verdict each must get."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from curate_helpers import trajectory_of

from datalyst.agent import ActionKind, Trajectory, Turn
from datalyst.curate._language import GARBLED_TEXT, MIXED_LANGUAGES, LanguageCheck, main_script, script
from datalyst.sandbox import ExecResult
from datalyst.tasks import Task

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "language_cases.yaml").read_text("utf-8")
)


def trajectory(
    thought: str,
    answer: str = "@mean_revenue[261.41]",
    observation: str = "   region  revenue\n0  north    120.5",
    question: str = "What is the mean revenue?",
    first_message: str | None = None,
) -> Trajectory:
    """A code turn that printed ``observation``, then an answer turn with ``thought`` and ``answer``."""
    turns = [
        Turn(
            index=0, raw="", text="", thought="Let me look at the data.", kind=ActionKind.CODE, code="print(df)",
            observation=observation, result=ExecResult(stdout=observation),
        ),
        Turn(index=1, raw="", text="", thought=thought, kind=ActionKind.ANSWER, answer=answer),
    ]  # fmt: skip
    return trajectory_of(
        turns, Task(id="t", question=question, format="@mean_revenue[value]"), first_message=first_message
    )


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_corpus(case):
    fields = {key: value for key, value in case.items() if key not in ("name", "expect")}
    verdict = LanguageCheck().check(trajectory(**fields))
    assert verdict.reason == case["expect"], verdict.detail


def test_the_corpus_covers_both_reasons_and_clean_text():
    assert {case["expect"] for case in CASES} == {None, GARBLED_TEXT, MIXED_LANGUAGES}
    assert LanguageCheck().reasons == (GARBLED_TEXT, MIXED_LANGUAGES)


def test_the_detail_says_where_and_what():
    garbled = LanguageCheck().check(trajectory("The cafÃ© is open."))
    assert garbled.detail == "turn 1: mojibake 'Ã©' (UTF-8 'é' read as Latin-1)"
    mixed = LanguageCheck().check(trajectory("The mean \u662f 3.5, \u6240\u4ee5 done."))
    assert mixed.detail == "3 letters in CJK from turn 1 on: '\u662f', '\u6240', '\u4ee5'"


def test_a_word_counts_as_copied_only_from_data_already_seen():
    """A Cyrillic name in the first thought is not excused by an observation that comes after it."""
    seen_later = trajectory("Done.", observation="city: \u041c\u043e\u0441\u043a\u0432\u0430")
    first = seen_later.turns[0].model_copy(update={"thought": "I expect \u041c\u043e\u0441\u043a\u0432\u0430 to lead."})
    seen_later.turns[0] = first
    assert LanguageCheck().check(seen_later).reason == MIXED_LANGUAGES


def test_a_stray_foreign_letter_is_tolerated_up_to_the_threshold():
    stray = trajectory("The mean\u662f 3.5.")
    assert LanguageCheck().check(stray).kept
    assert LanguageCheck(max_foreign_letters=0).check(stray).reason == MIXED_LANGUAGES


def test_letters_fall_into_scripts():
    assert [script(char) for char in "a\u00e9\u0416\u5317\u306b\u30ab\ud55c\u00b5\u2113\uff41"] == [
        "LATIN", "LATIN", "CYRILLIC", "CJK", "CJK", "CJK", "HANGUL", None, None, "LATIN",
    ]  # fmt: skip
    assert main_script("What is the mean?") == "LATIN"
    assert main_script("\u041a\u0430\u043a\u043e\u0432\u0430 mean?") == "CYRILLIC"
    assert main_script("123 + 4") == "LATIN"


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-8"])
def test_random_bytes_read_as_text_never_pass(encoding):
    rng = random.Random(13)
    for _ in range(50):
        soup = bytes(rng.randrange(256) for _ in range(48)).decode(encoding, errors="replace")
        assert not LanguageCheck().check(trajectory(f"The result is {soup} as expected.")).kept, ascii(soup)
