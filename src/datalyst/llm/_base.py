"""The interface every model backend implements, and the records that cross it."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


class ChatMessage(BaseModel):
    """One message of a chat."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class SamplingParams(BaseModel):
    """How to sample completions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(1, ge=1)
    """Completions to return for the same messages."""
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1)
    """Tokens to generate at most, per completion."""
    stop: tuple[str, ...] = ()
    """Generation ends before any of these strings; the string itself is not returned."""
    seed: int | None = None
    logprobs: bool = False
    """Return the log-probability of each generated token (when the backend can)."""


class TokenLogprob(BaseModel):
    token: str
    logprob: float


class Completion(BaseModel):
    """One generated continuation."""

    text: str
    finish_reason: str
    """``stop`` (a stop string or the end of the answer), ``length`` (max_tokens reached) or a backend's own."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: ``await model.agenerate(messages, params)`` returns ``params.n`` completions."""

    spec: str
    """The model spec string this model was loaded from (recorded in every trajectory)."""

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]: ...

    async def aclose(self) -> None: ...
