"""Sequence problems: statements, exact cases, the guide's check with its repair, and reference solutions."""

from __future__ import annotations

import asyncio
import random

import pytest

from datalyst.judge import judge_for
from datalyst.llm import ReplayModel
from datalyst.synth._sequence_problems import (
    SequenceOptions,
    guide_level,
    make_problem,
    make_sequence_tasks,
    read_predictions,
)
from datalyst.synth._sequences import combinatorial, digits, number_theory
from datalyst.tasks import read_tasks

CATALOGUE = {s.id: s for s in combinatorial() + number_theory() + digits()}
CATALAN = CATALOGUE["combinatorial.catalan"]


def test_a_problem_shows_the_first_terms_and_computes_every_case():
    problem = make_problem(CATALAN, random.Random(0))
    inside, beyond = problem.examples
    assert 2 <= int(inside.input) < problem.shown <= int(beyond.input)  # the statement fixes only the first
    assert 5 <= len(problem.tests) <= 7
    for case in (*problem.examples, *problem.tests):
        assert case.output == str(CATALAN.term(int(case.input)))
    assert {inside.input, beyond.input}.isdisjoint(case.input for case in problem.tests)
    text = problem.statement()
    assert CATALAN.definition in text and "are 1, 1, 2, 5, 14, 42, 132, 429, ..." in text
    assert f"Output: {beyond.output}" in text and "Explanation: C(" in text
    hidden = problem.statement(outputs=False)
    assert f"Input: {beyond.input.strip()}" in hidden and "Output:" not in hidden.split("Example 1")[1]
    assert "a(0) = 1, a(1) = 1, a(2) = 2" in problem.statement(indexed=True)


def test_predictions_are_read_from_the_end_of_a_reply():
    assert read_predictions("a(3) is 5, so 3 -> 5\n12 -> 208012\n3 -> 6") == {"3": "6", "12": "208012"}
    assert read_predictions("I cannot tell.") == {}


def _guide(*replies: str) -> ReplayModel:
    return ReplayModel(list(replies))


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        (["{i} -> {I}\n{b} -> {B}"], ("guide solved", False)),
        (["{i} -> {I}\n{b} -> 0"], ("guide unsolved", False)),  # sound statement, hard problem: kept
        (["{i} -> 0\n{b} -> {B}", "{i} -> {I}\n{b} -> {B}"], ("guide solved after repair", True)),
        (["{i} -> 0", "{i} -> 0"], (None, True)),  # the statement still does not fix it: ambiguous
    ],
)
def test_the_guide_keeps_sound_problems_and_repairs_or_drops_unclear_ones(replies, expected):
    problem = make_problem(CATALAN, random.Random(1))
    (inside, beyond) = problem.examples
    values = {"i": inside.input.strip(), "I": inside.output, "b": beyond.input.strip(), "B": beyond.output}
    guide = _guide(*(reply.format(**values) for reply in replies))
    assert asyncio.run(guide_level(problem, guide)) == expected
    first_request = guide.calls[0][0][-1].content
    assert "Output:" not in first_request and f"a({values['i']}) and a({values['b']})" in first_request
    assert first_request.endswith(f"\n{values['i']} -> ?\n{values['b']} -> ?")  # no example value to copy
    if len(replies) == 2:
        assert "a(0) = 1, a(1) = 1" in guide.calls[1][0][-1].content


def test_a_guide_without_predictions_is_an_error():
    with pytest.raises(LookupError):
        asyncio.run(guide_level(make_problem(CATALAN, random.Random(1)), _guide("No idea.")))


def test_the_stage_writes_resumable_tasks_and_counts_what_the_guide_drops(tmp_path):
    out = tmp_path / "sequences.jsonl"
    summary = make_sequence_tasks(out, options=SequenceOptions(count=12, seed=2), progress=False)
    tasks = read_tasks(out)
    assert summary.tasks == 12 == len(tasks) and summary.units == 12
    assert {task.judge for task in tasks} == {"cases"} and len({task.id for task in tasks}) == 12
    assert summary.by_category == {"sequence": 12} and all(5 <= len(task.tests) <= 7 for task in tasks)
    again = make_sequence_tasks(out, options=SequenceOptions(count=12, seed=2), progress=False)
    assert again.tasks == 12 and out.read_text().count("\n") == 12  # nothing made twice

    guided = tmp_path / "guided.jsonl"
    summary = make_sequence_tasks(
        guided, guide=_guide(*["0 -> 0"] * 6), options=SequenceOptions(count=3), progress=False
    )
    assert summary.tasks == 0 and summary.rejected_by_check == {"ambiguous": 3}


REFERENCE = {
    "combinatorial.catalan": "from math import comb\nn = int(input())\nprint(comb(2 * n, n) // (n + 1))\n",
    "number_theory.divisor_count": "n = int(input())\nprint(sum(n % d == 0 for d in range(1, n + 1)))\n",
    "digits.thue_morse": "print(bin(int(input())).count('1') % 2)\n",
}


@pytest.mark.parametrize("sequence_id", sorted(REFERENCE))
def test_reference_solutions_pass_their_problems_in_the_sandbox(sequence_id):
    from datalyst.synth._sequence_problems import problem_task

    task = problem_task(make_problem(CATALOGUE[sequence_id], random.Random(5)), seed=5)
    judge = judge_for(task)
    assert asyncio.run(judge.ajudge(f"```python\n{REFERENCE[sequence_id]}```")).correct
    wrong = asyncio.run(judge.ajudge("print(int(input()))"))
    assert not wrong.correct and wrong.reason.endswith("wrong output")


def test_problems_from_an_oeis_export_are_marked(tmp_path):
    squares = ",".join(str(n * n) for n in range(30))
    (tmp_path / "stripped").write_text(f"A000290 ,{squares},\n")
    (tmp_path / "names").write_text("A000290 The squares: a(n) = n^2.\n")
    out = tmp_path / "oeis.jsonl"
    make_sequence_tasks(out, options=SequenceOptions(count=5, oeis=tmp_path), progress=False)
    [task] = read_tasks(out)
    assert task.source == "synth:sequences:oeis" and "CC BY-SA 4.0" in task.question
    assert all(case.output == str((int(case.input) - 1) ** 2) for case in task.tests)  # numbered from 1
