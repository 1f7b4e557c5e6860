"""Programs judged in the sandbox: HumanEval's official verdicts, and unit-test cases read from stdin."""

from __future__ import annotations

import asyncio

import pytest

from datalyst.judge import (
    CasesJudge,
    humaneval_completion,
    humaneval_program,
    judge_for,
    program_text,
    run_case,
    run_program,
)
from datalyst.paths import benchmarks_dir
from datalyst.tasks import Case, Task, load_humaneval


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Task]:
    path = benchmarks_dir() / "humaneval" / "HumanEval.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"HumanEval not found at {path}; set DATALYST_BENCHMARKS")
    return {task.id: task for task in load_humaneval(path)}


def _judge(task: Task, answer: str):
    return asyncio.run(judge_for(task).ajudge(answer))


def test_every_canonical_solution_passes(humaneval):
    assert len(humaneval) == 164

    async def failures() -> list[str]:
        return [task.id for task in humaneval.values() if not (await judge_for(task).ajudge(task.solution)).correct]

    assert asyncio.run(failures()) == []


@pytest.mark.parametrize(
    ("task_id", "completion", "verdict"),
    [
        # HumanEval/0 asks whether two numbers are closer than a threshold; returning False always is wrong
        ("HumanEval/0", "    return False\n", "failed: AssertionError"),
        ("HumanEval/2", "    return number // 0\n", "failed: ZeroDivisionError: float floor division"),
        ("HumanEval/2", "    while True:\n        pass\n", "timed out"),
        ("HumanEval/2", "    return number % 1.0\n  oops\n", "failed: IndentationError"),
        ("HumanEval/2", "    import sys\n    sys.exit(0)\n", "failed: SystemExit: 0"),  # the harness fails any exit
    ],
)
def test_broken_completions_get_the_harness_verdicts(humaneval, task_id, completion, verdict):
    judgement = _judge(humaneval[task_id], completion)
    assert not judgement.correct
    assert judgement.reason.startswith(verdict)


def test_a_chat_answer_with_the_whole_function_replaces_the_prompts_stub(humaneval):
    task = humaneval["HumanEval/2"]  # truncate_number: the decimal part of a positive float
    answer = "Here it is:\n```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```\n"
    assert humaneval_completion(task.question, answer).startswith("\ndef truncate_number")
    assert _judge(task, answer).correct
    program = humaneval_program(task.question, "    return number % 1.0\n", task.check, task.entry_point)
    assert program.startswith(task.question + "    return number % 1.0\n\n")
    assert program.endswith("check(truncate_number)\n")


def test_program_text_takes_the_first_fenced_block():
    assert program_text("I will read n.\n```python\nn = int(input())\n```\nmore\n```python\nx\n```") == (
        "n = int(input())\n"
    )
    assert program_text("print(1)") == "print(1)\n"


def test_a_case_passes_on_its_output_word_for_word_and_may_exit():
    double = "n = int(input())\nprint(n * 2)\nexit()\n"
    assert run_case(double, Case(input="21\n", output="42")).passed
    wrong = run_case(double, Case(input="2\n", output="5"))
    assert (wrong.passed, wrong.result, wrong.stdout) == (False, "wrong output", "4\n")
    assert run_program("import sys\nprint(sys.stdin.read().split())", stdin="3 4\n").stdout == "['3', '4']\n"


def test_the_cases_judge_reports_the_first_failing_case_and_the_share_passed():
    judge = CasesJudge((Case(input="1", output="1"), Case(input="2", output="4"), Case(input="3", output="9")))
    judgement = asyncio.run(judge.ajudge("```python\nn = int(input())\nprint(n if n < 3 else n * n)\n```"))
    assert (judgement.correct, judgement.share) == (False, pytest.approx(2 / 3))
    assert judgement.reason == "2 of 3 test cases pass; input '2': wrong output"
    assert asyncio.run(judge.ajudge("print(int(input()) ** 2)")).correct


def test_a_program_cannot_reach_host_files_or_the_network(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host data")
    assert run_program(f"print(open({str(secret)!r}).read())").result.startswith("failed: FileNotFoundError")
    network = run_program("import socket\nsocket.create_connection(('1.1.1.1', 53), 1)")
    assert network.result.startswith("failed: OSError")
