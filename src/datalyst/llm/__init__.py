"""Language models behind one small interface (:class:`ChatModel`), whatever serves them.

``load_model("embedded:small")``, ``load_model("openai:NAME@URL")``, ``load_model("gguf:PATH")``…
Backends are imported only when asked for, so importing this package stays cheap. Local models also
score given continuations (:class:`ScoringModel`), and ``load_tokenizer(spec)`` gives a model's chat
template and vocabulary (:class:`ChatTokenizer`) for building training ids. ``llama_cpp_source()`` gives
the llama.cpp source tree of the installed llama-cpp-python (its converters and tools), ``llama_cpu()`` which of
its CPU libraries runs here (:class:`CpuPath`, chosen once by trial runs); a LoRA adapter
runs through llama.cpp as ``embedded:NAME?adapter=PATH``, a peft folder once its conversion is saved
there as ``ADAPTER_GGUF``.
"""

from datalyst.llm._base import ChatMessage, ChatModel, Completion, Role, SamplingParams, ScoringModel, TokenLogprob
from datalyst.llm._cache import CachedModel
from datalyst.llm._cpu import CpuPath, llama_cpu
from datalyst.llm._embedded import DEFAULT_MODEL as DEFAULT_EMBEDDED_MODEL
from datalyst.llm._embedded import (
    base_weights,
    ensure_model,
    fetch_model,
    is_cached,
    list_models,
    model_path,
    models_dir,
    own_dialect,
)
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._gguf import ADAPTER_GGUF, GGUFTokenizer
from datalyst.llm._registry import load_model, load_tokenizer
from datalyst.llm._replay import ReplayModel
from datalyst.llm._source import llama_cpp_source
from datalyst.llm._spec import ModelKind, ModelSpec, resolve_spec
from datalyst.llm._streaming import text_streamed_to
from datalyst.llm._tokenizer import ChatTokenizer, HFTokenizer, common_prefix, token_completion, wire_messages

__all__ = [
    "ADAPTER_GGUF",
    "DEFAULT_EMBEDDED_MODEL",
    "CachedModel",
    "ChatMessage",
    "ChatModel",
    "ChatTokenizer",
    "Completion",
    "ContextOverflow",
    "CpuPath",
    "GGUFTokenizer",
    "HFTokenizer",
    "ModelKind",
    "ModelSpec",
    "ReplayModel",
    "Role",
    "SamplingParams",
    "ScoringModel",
    "TokenLogprob",
    "base_weights",
    "common_prefix",
    "ensure_model",
    "fetch_model",
    "is_cached",
    "list_models",
    "llama_cpp_source",
    "llama_cpu",
    "load_model",
    "load_tokenizer",
    "model_path",
    "models_dir",
    "own_dialect",
    "resolve_spec",
    "text_streamed_to",
    "token_completion",
    "wire_messages",
]
