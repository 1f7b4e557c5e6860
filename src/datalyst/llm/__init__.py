"""Language models behind one small interface (:class:`ChatModel`), whatever serves them.

``load_model("embedded:small")``, ``load_model("openai:NAME@URL")``, ``load_model("gguf:PATH")``…
Backends are imported only when asked for, so importing this package stays cheap.
"""

from datalyst.llm._base import ChatMessage, ChatModel, Completion, Role, SamplingParams, TokenLogprob
from datalyst.llm._cache import CachedModel
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._registry import load_model
from datalyst.llm._replay import ReplayModel
from datalyst.llm._spec import ModelKind, ModelSpec, resolve_spec

__all__ = [
    "CachedModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "ContextOverflow",
    "ModelKind",
    "ModelSpec",
    "ReplayModel",
    "Role",
    "SamplingParams",
    "TokenLogprob",
    "load_model",
    "resolve_spec",
]
