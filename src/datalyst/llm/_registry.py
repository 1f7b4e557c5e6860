"""``load_model(spec)``: the backend for a spec kind, imported only when that kind is asked for.

``load_tokenizer(spec)`` does the same for a local model's chat tokenizer, without its weights.

Every backend class provides ``from_spec(spec: ModelSpec) -> Self``: it reads ``spec.target``,
``spec.base_url`` and ``spec.options`` (through ``spec.check_options``, so an unknown option is a
ConfigError), sets ``self.spec = str(spec)``, and imports its optional dependencies inside the call.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm._base import ChatModel
from datalyst.llm._spec import ModelKind, ModelSpec, OptionValue, resolve_spec
from datalyst.llm._tokenizer import ChatTokenizer

__all__ = ["load_model", "load_tokenizer"]

BACKENDS: dict[ModelKind, str] = {
    ModelKind.OPENAI: "datalyst.llm._openai:OpenAIModel",
    ModelKind.GGUF: "datalyst.llm._llamacpp:LlamaCppModel",
    ModelKind.EMBEDDED: "datalyst.llm._llamacpp:LlamaCppModel",  # after _embedded.ensure_model finds the file
    ModelKind.HF: "datalyst.llm._transformers:TransformersModel",
    ModelKind.REPLAY: "datalyst.llm._replay:ReplayModel",
}
TOKENIZERS: dict[ModelKind, str] = {
    ModelKind.GGUF: "datalyst.llm._gguf:GGUFTokenizer",
    ModelKind.EMBEDDED: "datalyst.llm._gguf:GGUFTokenizer",  # of the file ensure_model finds
    ModelKind.HF: "datalyst.llm._transformers:load_hf_tokenizer",
}
ENSURE_EMBEDDED = "datalyst.llm._embedded:ensure_model"
EMBEDDED_INFO = "datalyst.llm._embedded:get_model"
ADAPTER_PATH = "datalyst.llm._embedded:adapter_path"
EXTRAS: dict[ModelKind, str] = {ModelKind.GGUF: "llamacpp", ModelKind.EMBEDDED: "llamacpp", ModelKind.HF: "hf"}
"""The ``pip install 'datalyst[EXTRA]'`` that brings a kind's third-party packages."""


def load_model(spec: str | ModelSpec | None = None, **options: OptionValue) -> ChatModel:
    """The chat model for ``spec``, with ``options`` added to the spec's own ``?key=value`` options.

    A string goes through :func:`resolve_spec` (so ``openai:`` specs pick up ``$DATALYST_BASE_URL``);
    None means the default spec. The options become part of ``model.spec``, the string recorded in
    trajectories.

    >>> model = load_model("openai:qwen2.5-7b-instruct@http://localhost:8000/v1", max_concurrency=8)
    >>> model.spec
    'openai:qwen2.5-7b-instruct@http://localhost:8000/v1?max_concurrency=8'
    """
    parsed = spec if isinstance(spec, ModelSpec) else resolve_spec(spec)
    if options:
        parsed = parsed.with_options(**options)
    try:
        if parsed.kind == ModelKind.EMBEDDED:
            return _load_embedded(parsed)
        return _import(parsed.kind, BACKENDS[parsed.kind]).from_spec(parsed)
    except ModuleNotFoundError as exc:
        raise _missing_package(parsed.kind, exc) from exc


def load_tokenizer(spec: str | ModelSpec | None = None) -> ChatTokenizer:
    """The chat tokenizer (template and vocabulary) of a local model spec, without loading its weights.

    ``embedded:NAME`` and ``gguf:PATH`` give a :class:`GGUFTokenizer` (an embedded model is fetched first
    if missing); ``hf:PATH_OR_REPO`` an :class:`HFTokenizer`. The spec's options are ignored: none of them
    changes the tokenizer. Server and replay specs have no tokenizer here (ConfigError).

    >>> tokenizer = load_tokenizer("embedded:small")
    >>> tokenizer.end_of_turn
    '<|im_end|>'
    """
    parsed = spec if isinstance(spec, ModelSpec) else resolve_spec(spec)
    if parsed.kind not in TOKENIZERS:
        raise ConfigError(
            f"model spec '{parsed}' names no local files to read a tokenizer from; give an embedded:, gguf: or "
            "hf: spec of the same model"
        )
    target: str | Path = parsed.target
    try:
        if parsed.kind == ModelKind.EMBEDDED:
            target = _import(parsed.kind, ENSURE_EMBEDDED)(parsed.target)
        return _import(parsed.kind, TOKENIZERS[parsed.kind])(target)
    except ModuleNotFoundError as exc:
        raise _missing_package(parsed.kind, exc) from exc


def _load_embedded(spec: ModelSpec) -> ChatModel:
    """The llama.cpp model for the bundled GGUF named ``spec.target``, as located by ``ensure_model``."""
    info = _import(spec.kind, EMBEDDED_INFO)(spec.target)
    options = {"n_ctx": info.context_tokens, **spec.options}  # the context size the registry recommends
    if info.adapter is not None:
        if "adapter" in spec.options:
            raise ConfigError(
                f"embedded:{info.name} already applies its own adapter; give adapter= to the base model's spec"
            )
        options["adapter"] = str(_import(spec.kind, ADAPTER_PATH)(info))
    path = Path(_import(spec.kind, ENSURE_EMBEDDED)(spec.target))
    backend = _import(spec.kind, BACKENDS[spec.kind])
    model = backend.from_spec(ModelSpec(kind=ModelKind.GGUF, target=str(path), options=options))
    model.spec = str(spec)  # record "embedded:small", which names the same weights on every machine
    return model


def _import(kind: ModelKind, dotted: str) -> Any:
    module_name, _, attribute = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # a third-party package the backend needs; load_model names the extra to install
        raise ModelUnavailable(
            f"{kind.value}: specs need {module_name}, which this datalyst installation lacks; "
            "upgrade datalyst or use an openai: spec"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError as exc:
        raise ModelUnavailable(
            f"{kind.value}: specs need {dotted}, which {module_name} does not define; upgrade datalyst"
        ) from exc


def _missing_package(kind: ModelKind, exc: ModuleNotFoundError) -> ModelUnavailable:
    extra = EXTRAS.get(kind)
    fix = f"pip install 'datalyst[{extra}]'" if extra else f"pip install {exc.name}"
    return ModelUnavailable(f"{kind.value}: specs need the Python package {exc.name!r}, which is missing; {fix}")
