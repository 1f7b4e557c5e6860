"""Language models behind one small interface (:class:`ChatModel`), whatever serves them."""

from datalyst.llm._base import ChatMessage, ChatModel, Completion, Role, SamplingParams, TokenLogprob

__all__ = ["ChatMessage", "ChatModel", "Completion", "Role", "SamplingParams", "TokenLogprob"]
