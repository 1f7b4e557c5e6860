"""Model specs a user can type (``openai:qwen2.5-7b@http://localhost:8000/v1``) and the default one.

A spec is ``KIND:TARGET`` with an optional ``@URL`` (``openai`` only) and ``?key=value&...`` options::

    openai:MODEL[@URL]    any OpenAI-compatible server (vLLM, SGLang, llama.cpp server, Ollama, OpenAI)
    gguf:PATH             a GGUF file run in process by llama.cpp
    hf:REPO_OR_PATH       a Hugging Face model run by transformers
    embedded:NAME         a GGUF bundled with datalyst (``embedded:small``), run by llama.cpp
    replay:FILE.jsonl     recorded completions, one JSON string or object per line

Option values that look like integers, decimals or ``true``/``false`` become ``int``, ``float`` or
``bool``, so ``gguf:m.gguf?n_ctx=8192`` gives ``options == {"n_ctx": 8192}``. ``str(spec)`` renders a
spec that parses back to an equal one.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from datalyst.errors import ConfigError, first_problem

__all__ = ["DEFAULT_SPEC", "ModelKind", "ModelSpec", "OptionValue", "resolve_spec"]

DEFAULT_SPEC = "embedded:small"
FORMS = (
    "openai:MODEL[@URL], gguf:PATH, hf:REPO_OR_PATH, embedded:NAME or replay:FILE.jsonl, "
    "optionally followed by ?key=value&key=value"
)

OptionValue = str | int | float | bool

_URL = re.compile(r"https?://[^\s?]+")
_OPENAI_TARGET = re.compile(r"(?P<model>.+?)@(?P<url>https?://.*)", re.DOTALL)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")


class ModelKind(StrEnum):
    OPENAI = "openai"
    GGUF = "gguf"
    HF = "hf"
    EMBEDDED = "embedded"
    REPLAY = "replay"


class ModelSpec(BaseModel):
    """A parsed model spec; ``ModelSpec.parse(text)`` reads one and ``str(spec)`` writes it back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ModelKind
    target: str
    """The model name (openai), file path (gguf, replay), repo or path (hf) or bundled name (embedded)."""
    base_url: str | None = None
    """The server's base URL, e.g. ``http://localhost:8000/v1`` (openai only; None: the client's default)."""
    options: dict[str, OptionValue] = {}
    """Backend options from the ``?key=value`` suffix, e.g. ``{"n_ctx": 8192}``."""

    @field_validator("target")
    @classmethod
    def _check_target(cls, target: str) -> str:
        if not target or target != target.strip():
            raise ValueError(f"the target {target!r} is empty or has surrounding spaces")
        if "?" in target:
            raise ValueError(f"the target {target!r} contains '?', which starts the options")
        return target

    @model_validator(mode="after")
    def _check_parts(self) -> ModelSpec:
        if self.base_url is not None:
            if self.kind != ModelKind.OPENAI:
                raise ValueError(f"a base URL only goes with openai specs, not {self.kind.value}")
            if not _URL.fullmatch(self.base_url):
                raise ValueError(f"the base URL {self.base_url!r} must start with http:// or https:// and have no '?'")
        if self.kind == ModelKind.OPENAI and re.search(r"@https?://", self.target):
            raise ValueError(f"the model name {self.target!r} contains '@http'; put the URL in base_url")
        for key, value in self.options.items():
            if not _KEY.fullmatch(key):
                raise ValueError(f"the option name {key!r} is not an identifier")
            text = _render(value)
            if "&" in text or text != text.strip() or _coerce(text) != value:
                raise ValueError(f"the option {key}={value!r} would not read back the same from a spec string")
        return self

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """Read a spec such as ``openai:gpt-4o-mini`` or ``gguf:/m/q.gguf?n_ctx=8192``; ConfigError if malformed."""
        text = text.strip()
        kind, has_colon, rest = text.partition(":")
        if not has_colon or kind not in ModelKind.__members__.values():
            raise ConfigError(f"model spec {text!r} has no known kind; write {FORMS}")
        rest, _, query = rest.partition("?")
        target, base_url = rest, None
        if kind == ModelKind.OPENAI and (match := _OPENAI_TARGET.fullmatch(rest)):
            target, base_url = match["model"], match["url"]
        try:
            return cls(kind=ModelKind(kind), target=target, base_url=base_url, options=_parse_query(text, query))
        except ValidationError as exc:
            raise ConfigError(
                f"model spec {text!r} is invalid: {first_problem(exc, located=False)}; write {FORMS}"
            ) from exc

    def __str__(self) -> str:
        text = f"{self.kind.value}:{self.target}"
        if self.base_url is not None:
            text += f"@{self.base_url}"
        if self.options:
            text += "?" + "&".join(f"{key}={_render(value)}" for key, value in self.options.items())
        return text

    def with_options(self, **options: OptionValue) -> ModelSpec:
        """This spec with ``options`` added (they win over the spec's own); ConfigError if one cannot be written."""
        try:
            return ModelSpec(kind=self.kind, target=self.target, base_url=self.base_url, options=self.options | options)
        except ValidationError as exc:
            reason = first_problem(exc, located=False)
            raise ConfigError(f"cannot add options {options!r} to model spec '{self}': {reason}") from exc

    def check_options(self, accepted: Mapping[str, type]) -> dict[str, Any]:
        """The options converted to the types in ``accepted`` (name -> int, float, bool or str).

        Backends call this in ``from_spec``; an unknown name or a value of the wrong type is a ConfigError.
        """
        checked: dict[str, Any] = {}
        for key, value in self.options.items():
            if key not in accepted:
                names = ", ".join(accepted) or "none"
                raise ConfigError(f"model spec '{self}' has unknown option {key!r}; {self.kind.value} accepts: {names}")
            checked[key] = _convert(self, key, value, accepted[key])
        return checked


def resolve_spec(explicit: str | None = None, *, default: str = DEFAULT_SPEC) -> ModelSpec:
    """The spec to use: ``explicit``, else ``$DATALYST_MODEL``, else the config file, else ``default``
    (``embedded:small``; a command may have its own).

    The config file is ``$DATALYST_CONFIG``, else ``$XDG_CONFIG_HOME/datalyst/config.toml`` (default
    ``~/.config/datalyst/config.toml``), with ``model = "..."`` under ``[llm]``. An ``openai`` spec without
    ``@URL`` takes ``$DATALYST_BASE_URL``, else ``$OPENAI_BASE_URL``, else the OpenAI client's default.
    This is the only function of ``datalyst.llm`` that reads settings from the environment or a file.
    """
    if explicit:
        text, source = explicit, "the command line"
    elif env_model := os.environ.get("DATALYST_MODEL"):
        text, source = env_model, "$DATALYST_MODEL"
    elif found := _config_model():
        text, source = found
    else:
        text, source = default, "the default"
    try:
        spec = ModelSpec.parse(text)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (the spec came from {source})") from exc.__cause__
    if spec.kind == ModelKind.OPENAI and spec.base_url is None:
        env_url = os.environ.get("DATALYST_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        if env_url:
            try:
                spec = ModelSpec(kind=spec.kind, target=spec.target, base_url=env_url, options=spec.options)
            except ValidationError as exc:
                raise ConfigError(
                    f"base URL {env_url!r} from $DATALYST_BASE_URL or $OPENAI_BASE_URL is invalid; "
                    "use http(s)://HOST:PORT/v1"
                ) from exc
    return spec


def _config_model() -> tuple[str, str] | None:
    """``[llm] model`` from the config file and a description of where it came from, or None."""
    explicit_path = os.environ.get("DATALYST_CONFIG")
    if explicit_path:
        path = Path(explicit_path).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} named by $DATALYST_CONFIG does not exist; create it or unset it")
    else:
        config_home = os.environ.get("XDG_CONFIG_HOME") or Path("~/.config").expanduser()
        path = Path(config_home) / "datalyst" / "config.toml"
        if not path.is_file():
            return None
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}; fix or remove it") from exc
    llm = config.get("llm", {})
    model = llm.get("model") if isinstance(llm, dict) else None
    if model is None:
        return None
    if not isinstance(model, str):
        raise ConfigError(f'config file {path}: [llm] model must be a string such as "openai:gpt-4o-mini"')
    return model, f"config file {path}"


def _parse_query(text: str, query: str) -> dict[str, OptionValue]:
    options: dict[str, OptionValue] = {}
    for pair in filter(None, query.split("&")):
        key, has_equals, value = pair.partition("=")
        if not has_equals or key in options:
            problem = "is repeated" if key in options else "has no '=value'"
            raise ConfigError(f"model spec {text!r}: option {key!r} {problem}; write {FORMS}")
        options[key] = _coerce(value)
    return options


def _coerce(value: str) -> OptionValue:
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _render(value: OptionValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _convert(spec: ModelSpec, key: str, value: OptionValue, wanted: type) -> Any:
    if wanted is str:
        return _render(value)
    if wanted is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, wanted) and (wanted is bool or not isinstance(value, bool)):
        return value
    raise ConfigError(f"model spec '{spec}': option {key}={_render(value)} must be of type {wanted.__name__}")
