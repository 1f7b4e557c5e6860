"""Answers written as ``@name[value]`` parts, the convention of DABench's answer formats and of our own tasks:
reading the parts, and what keeps an answer from fitting the format its task asks for."""

from __future__ import annotations

import re

ANSWER_PATTERN = re.compile(r"@(\w+)\[(.*?)\]")
_DECIMALS = re.compile(r"\b(\d|one|two|three|four|five|six)\s+decimal\s+(?:places?|points?|digits?)", re.IGNORECASE)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_NUMBER = re.compile(r"^[-+]?(\d+)?\.?(\d*)(?:[eE][-+]?\d+)?$")


def extract_answers(response: str) -> dict[str, str]:
    """Every ``@name[value]`` in ``response``; a repeated name keeps its last value."""
    return dict(ANSWER_PATTERN.findall(response))


def format_problems(answer_format: str, answer: str) -> list[str]:
    """What keeps ``answer`` from fitting ``answer_format``, in plain words (empty when it fits, or when the format
    names no ``@name[...]`` parts): each part it asks for and the answer does not give, and each number given
    with more decimal places than the format allows (the most it names anywhere) or in scientific notation."""
    asked = extract_answers(answer_format)
    if not asked:
        return []
    given = extract_answers(answer)
    problems = [f"it does not give @{name}[...]" for name in asked if name not in given]
    most = max((int(n) if n.isdigit() else _WORDS[n.lower()] for n in _DECIMALS.findall(answer_format)), default=None)
    if most is None:
        return problems
    for name, value in given.items():
        if name not in asked or not value.strip() or not (number := _NUMBER.match(value.strip())):
            continue
        if "e" in value.lower():
            problems.append(f"@{name}[{value}] is in scientific notation; write it as a decimal number")
        elif len(number.group(2)) > most:
            problems.append(f"@{name}[{value}] has more decimal places than the format asks for")
    return problems
