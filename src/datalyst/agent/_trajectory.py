"""The trajectory record: everything one agent run did, versioned, written as one JSON line.

Schema 2 (this version) renamed ``sample`` to ``trial`` and gave each turn the text kept in the
conversation (``text``) beside the raw completion, with its token ids and log-probabilities.
Records of schema 1 are migrated when read; records of a newer schema are refused.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from datalyst.agent._dialect import ActionKind
from datalyst.llm import ChatMessage, SamplingParams
from datalyst.sandbox import ExecResult
from datalyst.tasks import Task

SCHEMA_VERSION = 7
"""2 renamed ``sample`` to ``trial`` and kept only the cut text in the conversation; 3 added ``Turn.first_token_s``;
4 added ``Trajectory.guidance``; 5 added ``Trajectory.earlier``; 6 added ``Turn.last_call`` and ``Turn.redraws``;
7 added ``Turn.format_check``."""


def cell_key(code: str) -> str:
    """A cell's code with its whitespace collapsed: two cells with the same key run the same code."""
    return " ".join(code.split())


def trajectory_id(task_id: str, trial: int) -> str:
    """The id of a task's ``trial``-th trajectory: unique within a run, the key for resuming."""
    return f"{task_id}#{trial}"


class Termination(StrEnum):
    ANSWER = "answer"
    MAX_TURNS = "max_turns"
    EXECUTION_ERRORS = "execution_errors"
    """Too many consecutive cells failed."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The conversation no longer fits the model's context."""
    FAILED = "failed"
    """Our side failed (model server, sandbox); ``Trajectory.error`` says how. A resumed run retries it."""

    @property
    def words(self) -> str:
        """How the run ended, as an analyst would say it."""
        return _ENDINGS[self]


_ENDINGS = {
    Termination.ANSWER: "the agent answered",
    Termination.MAX_TURNS: "the agent used all its turns without answering",
    Termination.EXECUTION_ERRORS: "the code kept failing",
    Termination.CONTEXT_OVERFLOW: "the conversation grew too long for the model",
    Termination.FAILED: "something went wrong on our side",
}


class Turn(BaseModel):
    """One model turn and, for a code turn, what running it gave back."""

    model_config = ConfigDict(extra="forbid")

    index: int
    raw: str
    """The completion exactly as the model wrote it (for the record)."""
    text: str
    """The assistant message kept in the conversation: ``raw`` cut after its first action. The model
    saw this text in every later turn, and training examples are built from it."""
    token_ids: list[int] | None = None
    """Token ids of ``text`` as generated (None when the backend gives none)."""
    logprobs: list[float] | None = None
    """Log-probability of each token of ``token_ids`` under the sampling model (when asked for)."""
    thought: str = ""
    kind: ActionKind
    code: str | None = None
    answer: str | None = None
    observation: str | None = None
    """The text the agent was shown (before the dialect wraps it)."""
    last_call: str | None = None
    """After the observation, in the same message: the agent's call for an answer when no turn is left."""
    format_check: str | None = None
    """After an answer that did not fit the task's answer format: what was off, and the call to answer again."""
    result: ExecResult | None = None
    figures: dict[str, str] = {}
    """PNG figures the cell saved: file name -> base64 (for notebooks and HTML pages)."""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generation_s: float = 0.0
    """Seconds the model took for the turn, from the request to its last token."""
    first_token_s: float | None = None
    """Of ``generation_s``, the seconds before its first token (when the backend measures it)."""
    redraws: int = 0
    """Times the turn was drawn again before this drawing because it repeated the cell that had just failed
    (``AgentConfig.repeat_guard``; ``generation_s`` counts them all). The drawings set aside are not kept."""
    execution_s: float = 0.0

    @property
    def is_void(self) -> bool:
        return self.kind == ActionKind.VOID

    @property
    def cell_failed(self) -> bool:
        """The turn ran a cell and it failed (an error, a timeout or a crash)."""
        return self.result is not None and not self.result.ok


class Trajectory(BaseModel):
    """A full run of the agent on one task."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    """``<task id>#<trial>``: unique within a run, the key for resuming."""
    task: Task
    trial: int = 0
    dialect: str
    model: str
    sampling: SamplingParams
    system_prompt: str
    earlier: list[ChatMessage] = []
    """A follow-up question's conversation before it (after the system prompt), as the model saw it; empty
    for a task asked on its own."""
    first_message: str
    """The task as the model read it, ``guidance`` included."""
    guidance: str = ""
    """What sampling added at the end of ``first_message`` (workflow knowledge, a reflection's critique),
    exactly. Training views drop it, so a model learns to act without the hint."""
    setup_code: str | None = None
    """Code run in the sandbox before the first turn (the files loaded, ``AgentConfig.preload``); the first
    message shows it and its output. Rebuilding the trajectory's sandbox runs it first."""
    turns: list[Turn] = []
    answer: str | None = None
    termination: Termination
    error: str | None = None
    started_at: datetime
    duration_s: float = 0.0
    datalyst_version: str = ""

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Bring a record of an older schema up to this one; refuse a newer one."""
        if not isinstance(data, dict):
            return data
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise ValueError(
                f"trajectory schema {version} is newer than this datalyst reads ({SCHEMA_VERSION}); upgrade datalyst"
            )
        if version == 1:
            data = {**data, "trial": data.get("sample", 0)}
            data.pop("sample", None)
            # Schema 1 kept the whole completion in the conversation: that is what the model saw.
            data["turns"] = [{**turn, "text": turn.get("raw", "")} for turn in data.get("turns", [])]
        if isinstance(version, int) and version < SCHEMA_VERSION:
            data = {**data, "schema_version": SCHEMA_VERSION}  # 2 -> 3 -> ... -> 6 only added fields
        return data

    @property
    def task_message(self) -> str:
        """The first message without the guidance: the task as a model sees it outside sampling."""
        return self.first_message.removesuffix(self.guidance)

    @property
    def agent_tokens(self) -> int:
        """Tokens the agent wrote in all its turns (environment output and end-of-turn tokens excluded)."""
        return sum(turn.completion_tokens for turn in self.turns)

    @property
    def n_void_turns(self) -> int:
        return sum(turn.is_void for turn in self.turns)

    @property
    def failed(self) -> bool:
        return self.termination == Termination.FAILED
