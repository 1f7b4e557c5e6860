"""What a dialect is: how prompts are written and how a model's turn is read back."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel

from datalyst.sandbox import PREINSTALLED
from datalyst.tasks import Task


class ActionKind(StrEnum):
    CODE = "code"
    """Python to run in the sandbox (SQL goes through the ``execute_sql`` helper in Python)."""
    ANSWER = "answer"
    VOID = "void"
    """Neither a valid action nor an answer."""


class Step(BaseModel):
    """One assistant turn, parsed."""

    thought: str = ""
    code: str | None = None
    answer: str | None = None

    @property
    def kind(self) -> ActionKind:
        if self.answer is not None:
            return ActionKind.ANSWER
        return ActionKind.CODE if self.code else ActionKind.VOID


class PromptContext(BaseModel):
    """What a dialect needs to write the opening prompt."""

    task: Task
    file_names: list[str]
    """Base names of the files as the sandbox shows them."""
    file_info: str
    """Meta-information of the files (``datalyst.data.describe``), already bounded."""
    has_database: bool = False
    """A SQLite file is among the files, so ``get_db_info()`` and ``execute_sql()`` are available."""
    libraries: list[str] = list(PREINSTALLED)
    """What code can import in the sandbox (besides the standard library)."""
    preloaded: str = ""
    """The code that loaded the files before the first turn and what it printed (``AgentConfig.preload``)."""


class Dialect(Protocol):
    """A prompt builder, a parser and a renderer for one turn format (see docs/ARCHITECTURE)."""

    name: str
    answer_start: str
    """How a final answer begins (``Formatted answer:``, ``<answer>``); the last call begins the model's turn so."""
    stop: tuple[str, ...]
    """Stop sequences: generation ends at the end of the first action (its closing tag, kept in the
    text) or where the model starts writing the observation itself."""

    def opening(self, context: PromptContext) -> tuple[str, str]:
        """The system prompt and the first user message."""
        ...

    def follow_up(self, task: Task) -> str:
        """The user message that asks ``task``'s question later in a conversation about the same files
        (raises ConfigError where the dialect has no follow-ups)."""
        ...

    def parse(self, completion: str) -> Step:
        """Read one assistant turn; never raises (a turn that cannot be read is void)."""
        ...

    def action_end(self, completion: str) -> int:
        """Where the turn's first action ends (after its closing tags); the kept turn is the text before.

        For a void turn, where the observation marker begins (or the end of the text).
        """
        ...

    def render(self, step: Step) -> str:
        """The canonical text of a turn (``parse(render(step)) == step``)."""
        ...

    def observation(self, text: str) -> str:
        """The environment's reply to a code turn, wrapped the dialect's way."""
        ...

    def void_feedback(self) -> str:
        """What the environment says after a void turn."""
        ...

    def last_call(self) -> str:
        """What the agent says after the last observation when no turn is left: answer now, no more code."""
        ...

    def format_check(self, problems: Sequence[str], answer_format: str) -> str:
        """What the agent says after an answer that does not fit ``answer_format``: its ``problems``, and answer
        again."""
        ...
