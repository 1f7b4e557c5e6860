"""Self-correction chains with recorded completions: real sandbox, scripted working and guiding models."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.agent import ActionKind, Termination, to_messages
from datalyst.curate import RunFolder, Stratum, export_sharegpt, read_curated
from datalyst.curate._corrections import CorrectionOptions, correct_programs, summarize_chains
from datalyst.llm import ReplayModel
from datalyst.tasks import Case, Task

SQUARES = Task(
    id="squares",
    question="a(n) = n^2. Write a program that reads n and prints a(n).",
    judge="cases",
    tests=[Case(input="2\n", output="4"), Case(input="3\n", output="9"), Case(input="10\n", output="100")],
)
WRONG = "It is n times n, I think plus one.\n```python\nn = int(input())\nprint(n * n + 1)\n```"
RIGHT = "The square of n.\n```python\nn = int(input())\nprint(n * n)\n```"
WHY = "The program adds 1 to the square, so every output is one too large."


def _chains(tmp_path, script: list[str], rounds: int = 3, tasks=(SQUARES,)):
    worker = ReplayModel(script, per_turn=True, spec="replay:worker")
    guide = ReplayModel([WHY] * 8, spec="replay:guide")
    folder = RunFolder(tmp_path / "run")
    summary = asyncio.run(correct_programs(list(tasks), ["squares.jsonl"], folder, worker, guide,
                                           options=CorrectionOptions(rounds=rounds), progress=False))  # fmt: skip
    return folder, summary, worker, guide


def test_a_failing_program_gets_the_case_and_the_explanation_and_is_corrected(tmp_path):
    folder, summary, worker, guide = _chains(tmp_path, [WRONG, RIGHT])
    [chain] = folder.trajectories()
    first, second = chain.turns
    assert (first.kind, second.kind) == (ActionKind.ANSWER, ActionKind.ANSWER)
    error = first.result.error
    assert error.ename == "TestFailure" and error.evalue == "0 of 3 test cases pass; input '2': wrong output"
    assert first.observation == (
        "Your program fails a test case.\nInput: 2\nExpected output: 4\nYour program printed: 5\n"
        f"Why: {WHY}\n\nWrite the corrected program in one ```python block."
    )
    assert second.result.ok and second.observation is None
    assert first.execution_s > 0 and second.execution_s > 0  # the cases' run is timed like a cell's
    assert (chain.termination, chain.answer) == (Termination.ANSWER, "n = int(input())\nprint(n * n)")
    # the worker's second call saw its first program and the feedback; the guide saw the program and the case
    assert worker.calls[1][0][-1].content == first.observation
    request = guide.calls[0][0][-1].content
    assert SQUARES.question in request and "print(n * n + 1)" in request and "expected output is '4'" in request
    assert summary.model_dump() == {"chains": 1, "first_try": 0, "passed": 1, "mean_rounds": 1.0,
                                    "by_rounds": {1: 1}, "failed": 0}  # fmt: skip
    [kept] = read_curated(folder)
    assert (kept.selected_by, kept.stratum) == ("tests", Stratum.ERROR_CORRECTION)
    roles = [(m.role, m.failed) for m in to_messages(kept.trajectory)]
    assert [r for r, _ in roles] == ["system", "user", "assistant", "user", "assistant"]
    assert roles[2][1] and not roles[4][1]  # the wrong program is context, not a target, unless asked


def test_a_chain_stops_after_its_rounds_and_is_not_kept(tmp_path):
    folder, summary, _, guide = _chains(tmp_path, [WRONG] * 4, rounds=1)
    [chain] = folder.trajectories()
    assert len(chain.turns) == 2 and chain.turns[-1].observation is None  # no feedback after the last program
    assert chain.termination == Termination.ANSWER and not chain.turns[-1].result.ok
    assert len(guide.calls) == 1
    assert (summary.chains, summary.passed) == (1, 0) and read_curated(folder) == []


def test_first_try_successes_and_a_resumed_run(tmp_path):
    other = SQUARES.model_copy(update={"id": "squares-2"})
    folder, summary, _, guide = _chains(tmp_path, [RIGHT], tasks=(SQUARES, other))
    assert (summary.first_try, summary.passed, summary.mean_rounds) == (2, 2, 0.0) and guide.calls == []
    assert {record.stratum for record in read_curated(folder)} == {Stratum.SUCCESS}
    again = summarize_chains(folder.trajectories())
    _, resumed, worker, _ = _chains(tmp_path, [RIGHT], tasks=(SQUARES, other))
    assert resumed == again and worker.calls == []  # nothing ran twice
    exported = export_sharegpt(read_curated(folder), tmp_path / "exports")
    assert exported.records == 2


def test_a_void_reply_is_asked_again_without_using_a_round(tmp_path):
    folder, summary, _, _ = _chains(tmp_path, ["I would loop over n.", RIGHT], rounds=0)
    [chain] = folder.trajectories()
    assert [t.kind for t in chain.turns] == [ActionKind.VOID, ActionKind.ANSWER]
    assert summary.first_try == 1


@pytest.mark.parametrize("rounds", [-1])
def test_rounds_cannot_be_negative(rounds):
    with pytest.raises(ValueError):
        CorrectionOptions(rounds=rounds)
