"""The trajectory record: everything one agent run did, versioned, written as one JSON line."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from datalyst.agent._dialect import ActionKind
from datalyst.llm import SamplingParams
from datalyst.sandbox import ExecResult
from datalyst.tasks import Task

SCHEMA_VERSION = 1


class Termination(StrEnum):
    ANSWER = "answer"
    MAX_TURNS = "max_turns"
    EXECUTION_ERRORS = "execution_errors"
    """Too many consecutive cells failed."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The conversation no longer fits the model's context."""
    FAILED = "failed"
    """Our side failed (model server, sandbox); ``Trajectory.error`` says how."""


class Turn(BaseModel):
    """One model turn and, for a code turn, what running it gave back."""

    model_config = ConfigDict(extra="forbid")

    index: int
    raw: str
    """The completion exactly as the model wrote it."""
    thought: str = ""
    kind: ActionKind
    code: str | None = None
    answer: str | None = None
    observation: str | None = None
    """The text the agent was shown (before the dialect wraps it)."""
    result: ExecResult | None = None
    figures: dict[str, str] = {}
    """PNG figures the cell saved: file name -> base64 (for notebooks and HTML pages)."""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generation_s: float = 0.0
    execution_s: float = 0.0

    @property
    def is_void(self) -> bool:
        return self.kind == ActionKind.VOID


class Trajectory(BaseModel):
    """A full run of the agent on one task."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    """``<task id>#<sample index>``: unique within a run, the key for resuming."""
    task: Task
    sample: int = 0
    dialect: str
    model: str
    sampling: SamplingParams
    system_prompt: str
    first_message: str
    turns: list[Turn] = []
    answer: str | None = None
    termination: Termination
    error: str | None = None
    started_at: datetime
    duration_s: float = 0.0
    datalyst_version: str = ""

    @property
    def n_void_turns(self) -> int:
        return sum(turn.is_void for turn in self.turns)
