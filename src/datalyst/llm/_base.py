"""The interface every model backend implements, and the records that cross it."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, Self, runtime_checkable

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

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    n: int = Field(1, ge=1, json_schema_extra={"option": False})
    """Completions to return for the same messages."""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature (0: greedy)."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling: the smallest set of tokens whose probabilities add up to this."""
    max_tokens: int = Field(1024, ge=1)
    """Tokens per model turn (per completion) at most."""
    stop: tuple[str, ...] = Field((), json_schema_extra={"option": False})
    """Generation ends at the first of these strings; the text keeps it (see :attr:`Completion.stop`)."""
    seed: int | None = None
    """Seed of sampling (None: unseeded)."""
    logprobs: bool = Field(False, json_schema_extra={"option": False})
    """Return the log-probability of each generated token (when the backend can)."""


class TokenLogprob(BaseModel):
    token: str
    logprob: float


class Completion(BaseModel):
    """One generated continuation.

    When generation ended at a stop string, ``text`` ends with it (plus whatever else the last token held),
    so ``text`` is exactly what the model produced. ``token_ids``, ``offsets`` and ``logprobs`` describe the
    same tokens when the backend reports them: ``offsets[i]`` is the length of the text tokens ``0..i``
    decode to, so ``offsets[-1] == len(text)``.
    """

    text: str
    finish_reason: str
    """``stop`` (a stop string or the end of the answer), ``length`` (max_tokens reached) or a backend's own."""
    stop: str | None = None
    """The stop string that ended generation, if one did."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_ids: list[int] | None = None
    offsets: list[int] | None = None
    logprobs: list[TokenLogprob] | None = None
    """One per token, aligned with ``token_ids`` when both are present."""
    first_token_s: float | None = None
    """Seconds from the request to the first generated token (reading the prompt, waiting for a slot),
    when the backend measures it."""

    def cut(self, n_chars: int) -> Completion:
        """The shortest prefix of whole tokens covering the first ``n_chars`` characters.

        Without offsets the text is cut at ``n_chars`` and token ids and logprobs are dropped, since
        nothing says which tokens the shorter text holds.
        """
        if n_chars >= len(self.text):
            return self
        if self.offsets is None:
            return self.model_copy(update={"text": self.text[:n_chars], "token_ids": None, "logprobs": None})
        kept = bisect_left(self.offsets, n_chars) + 1 if n_chars > 0 else 0
        return self.model_copy(
            update={
                "text": self.text[: self.offsets[kept - 1]] if kept else "",
                "completion_tokens": kept,
                "token_ids": self.token_ids[:kept] if self.token_ids is not None else None,
                "offsets": self.offsets[:kept],
                "logprobs": self.logprobs[:kept] if self.logprobs is not None else None,
            }
        )

    def ended_at_stop(self, stops: Sequence[str]) -> Completion:
        """This completion cut just after the first of ``stops`` in its text (kept), or itself if none occurs."""
        if (hit := find_stop(self.text, stops)) is None:
            return self
        return self.cut(hit[0]).model_copy(update={"finish_reason": "stop", "stop": hit[1]})


def find_stop(text: str, stops: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """Where the first stop string in ``text`` (looking from ``start``) ends, and which one it is, or None."""
    found = [(index + len(stop), stop) for stop in stops if stop and (index := text.find(stop, start)) >= 0]
    return min(found, default=None)


class AsyncClosing:
    """``async with model:`` closes the model (its ``aclose``) when the block ends."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: ``await model.agenerate(messages, params)`` returns ``params.n`` completions.

    When the last message is the assistant's, it is a turn begun for the model: the completions continue its
    text (and do not repeat it)."""

    spec: str
    """The model spec string this model was loaded from (recorded in every trajectory)."""

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ScoringModel(ChatModel, Protocol):
    """A chat model that can also score a given continuation (the in-process llama.cpp and transformers ones)."""

    async def ascore(self, messages: Sequence[ChatMessage], continuation: str | Sequence[int]) -> Completion:
        """``continuation`` (text, or token ids) as a completion of ``messages``, with each token's logprob."""
        ...
