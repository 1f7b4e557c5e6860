"""Programs a model wrote, run against unit tests in the sandbox, never in this process.

Two kinds of test, one runner. CodeSeq's problems give cases: a program reads a case's input on standard
input and must print its output. HumanEval gives a ``check(candidate)`` function: the official harness runs
``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"`` and the sample passes when that runs
to its end within 3 seconds; it reports "passed", "timed out" or "failed: <exception>". The official
harness does so with a bare ``exec`` in its own process; here every run gets a fresh sandbox (no network, no
host files, its own limits), so one program's leftovers never reach the next case.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from datalyst.sandbox import CellError, ExecResult, Limits, Sandbox
from datalyst.tasks import Case

TIME_LIMIT_S = 3.0
"""HumanEval's limit per program, and ours per test case."""

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


class ProgramRun(BaseModel):
    """How one run of a program ended."""

    passed: bool
    """It ran to the end without an exception within the limits (and, for a case, printed the output)."""
    result: str
    """``passed``, ``timed out``, ``failed: <exception>`` or, for a case, ``wrong output``."""
    stdout: str = ""


def program_text(answer: str) -> str:
    """The program in an answer: its first fenced code block, or the whole answer when it has none."""
    match = _FENCE.search(answer)
    return (match.group(1) if match else answer).strip("\n") + "\n"


def run_program(
    source: str,
    *,
    files: Sequence[str | Path] = (),
    stdin: str = "",
    time_limit_s: float = TIME_LIMIT_S,
    exit_passes: bool = False,
    screen: bool = False,
    require_isolation: bool = True,
) -> ProgramRun:
    """Run ``source`` in a fresh sandbox holding ``files``, with ``stdin`` on its standard input.

    Any exception fails it, ``SystemExit`` too as in HumanEval's harness, unless ``exit_passes`` lets a
    program that prints its output end with ``exit()`` or ``sys.exit(0)``. A failure's reason names the
    exception's type before its message (the official harness writes the message alone). The sandbox's
    courtesy screen is off unless ``screen`` (it refuses ``input()``, which test-case programs need); its jail
    holds either way.
    """
    limits = Limits(wall_s=time_limit_s, cpu_s=time_limit_s)
    with Sandbox(files, limits=limits, screen_code=screen, require_isolation=require_isolation) as sandbox:
        if stdin:
            sandbox.run_python(f"import io, sys\nsys.stdin = io.StringIO({stdin!r})")
        return _ended(sandbox.run_python(source), exit_passes=exit_passes)


def _ended(result: ExecResult, *, exit_passes: bool) -> ProgramRun:
    if result.timed_out:
        return ProgramRun(passed=False, result="timed out", stdout=result.stdout)
    error = result.error
    clean_exit = error is not None and error.ename == "SystemExit" and error.evalue in ("", "0", "None")
    if error is not None and not (exit_passes and clean_exit):
        detail = f"{error.ename}: {error.evalue}" if error.evalue else error.ename
        return ProgramRun(passed=False, result=f"failed: {detail}", stdout=result.stdout)
    if result.crashed:
        return ProgramRun(passed=False, result="failed: the program's process died", stdout=result.stdout)
    return ProgramRun(passed=True, result="passed", stdout=result.stdout)


def run_case(source: str, case: Case, *, require_isolation: bool = True) -> ProgramRun:
    """Run ``source`` on one case; it passes when it prints the case's output (compared word by word)."""
    run = run_program(source, stdin=case.input, exit_passes=True, require_isolation=require_isolation)
    if run.passed and run.stdout.split() != case.output.split():
        return run.model_copy(update={"passed": False, "result": "wrong output"})
    return run


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program the official harness runs for one sample."""
    return f"{prompt}{completion}\n{test}\ncheck({entry_point})\n"


def humaneval_completion(prompt: str, answer: str) -> str:
    """What follows the prompt: a chat model's function (its code block) after a line break, so that its
    definition replaces the prompt's stub (a body of only a docstring); a bare body stays as it is."""
    code = program_text(answer) if "```" in answer else answer
    if re.search(r"^(def|class|import|from)\s", code, re.MULTILINE):
        return "\n" + code
    return code


async def arun_cases(source: str, cases: Sequence[Case], *, require_isolation: bool = True) -> list[ProgramRun]:
    """Every case in turn, each in its own sandbox (off the event loop)."""
    return [await asyncio.to_thread(run_case, source, case, require_isolation=require_isolation) for case in cases]


def first_failing(cases: Sequence[Case], runs: Sequence[ProgramRun]) -> tuple[Case, ProgramRun] | None:
    return next(((case, run) for case, run in zip(cases, runs, strict=True) if not run.passed), None)


def cases_summary(cases: Sequence[Case], runs: Sequence[ProgramRun]) -> str:
    """``2 of 3 test cases pass; input '7': wrong output`` (the first failing case, when one fails)."""
    text = f"{sum(run.passed for run in runs)} of {len(runs)} test cases pass"
    if (failing := first_failing(cases, runs)) is not None:
        case, run = failing
        text += f"; input {case.input.strip()!r}: {run.result}"
    return text


def cases_result(cases: Sequence[Case], runs: Sequence[ProgramRun]) -> ExecResult:
    """A program's run on its cases as a cell's result (for a trajectory's turn): ok when every case passes,
    else a ``TestFailure`` naming the first failing case."""
    failing = first_failing(cases, runs)
    if failing is None:
        return ExecResult(stdout=cases_summary(cases, runs))
    return ExecResult(stdout=failing[1].stdout, error=CellError(ename="TestFailure", evalue=cases_summary(cases, runs)))
