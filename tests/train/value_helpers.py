"""Trajectories built by hand for the value and reward model tests (imported by their test modules)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from datalyst.agent import ActionKind, Termination, Trajectory, Turn
from datalyst.llm import SamplingParams
from datalyst.sandbox import CellError, ExecResult
from datalyst.tasks import Task


def cell(index: int, code: str, *, ok: bool = True) -> Turn:
    """A code turn whose cell printed 1, or raised a ValueError."""
    result = ExecResult(stdout="1") if ok else ExecResult(error=CellError(ename="ValueError", evalue="bad"))
    return Turn(index=index, raw=code, text=f"Action: {code}", kind=ActionKind.CODE, code=code,
                observation=result.render(), result=result)  # fmt: skip


def answer(index: int, value: str) -> Turn:
    return Turn(index=index, raw=value, text=f"Answer: {value}", kind=ActionKind.ANSWER, answer=value)


def void(index: int) -> Turn:
    return Turn(index=index, raw="hmm", text="hmm", kind=ActionKind.VOID, observation="Write an action or an answer.")


def trajectory(
    task: Task, trial: int, turns: Sequence[Turn], *, guidance: str = "", failed: bool = False
) -> Trajectory:
    """A trajectory of ``task``; it answers with its last turn when that is an answer."""
    last = turns[-1] if turns else None
    final = last.answer if last is not None and last.kind == ActionKind.ANSWER else None
    ended = Termination.FAILED if failed else Termination.ANSWER if final is not None else Termination.MAX_TURNS
    return Trajectory(id=f"{task.id}#{trial}", task=task, trial=trial, dialect="datamind", model="replay",
                      sampling=SamplingParams(), system_prompt="system", guidance=guidance,
                      first_message=f"Question: {task.question}{guidance}", turns=list(turns), answer=final,
                      termination=ended, started_at=datetime.now(UTC))  # fmt: skip
