"""Chat tokenizers: a model's chat template and vocabulary, for building exactly the ids it sees.

A :class:`ChatTokenizer` renders a conversation with the model's own chat template, turns text into
token ids (special tokens written in the text, such as ``<|im_start|>``, become their special ids; no
BOS is added, since templates write their own) and back (special tokens come back as their text).
``end_of_turn`` is the text of the token that closes an assistant message (``<|im_end|>`` in ChatML).

:class:`HFTokenizer` wraps a transformers tokenizer; ``GGUFTokenizer`` (in ``_gguf``) reads a GGUF file.
Both render templates the way transformers does, so a conversation renders the same through either.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm._base import ChatMessage, Completion, Role, TokenLogprob

__all__ = ["ChatTokenizer", "HFTokenizer", "LocalTokenizer", "TemplateRenderer", "find_end_of_turn", "wire_messages"]

_PROBE = "datalyst end-of-turn probe"
"""An assistant message no template writes on its own: what follows it in a rendering closes the turn."""
_REPLACEMENT = "\ufffd"


@runtime_checkable
class ChatTokenizer(Protocol):
    """A model's chat template and vocabulary (see the module docstring)."""

    end_of_turn: str

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class LocalTokenizer(ChatTokenizer, Protocol):
    """A chat tokenizer that also says where each token's text ends (what the local backends need)."""

    def offsets(self, ids: Sequence[int]) -> list[int]:
        """``offsets[i]``: characters of ``decode(ids)`` covered by tokens ``0..i`` (the last is its length)."""
        ...


def token_completion(
    tokenizer: LocalTokenizer, ids: list[int], logprobs: Sequence[float] | None, **fields: Any
) -> Completion:
    """The completion of the tokens ``ids``: their text (decoded, unless ``fields`` give it) and offsets, each token's
    log-probability when ``logprobs`` are given, and ``fields`` (``finish_reason``, ``prompt_tokens``...)."""
    if "text" not in fields:
        fields["text"] = tokenizer.decode(ids)
    if logprobs is not None:  # fewer values than tokens only when scoring was cancelled
        fields["logprobs"] = [
            TokenLogprob(token=tokenizer.decode([token]), logprob=value)
            for token, value in zip(ids, logprobs, strict=False)
        ]
    return Completion(completion_tokens=len(ids), token_ids=ids, offsets=tokenizer.offsets(ids), **fields)


class _Message(Protocol):
    role: Role
    content: str


def wire_messages(messages: Sequence[_Message]) -> list[dict[str, str]]:
    """Messages (chat or training messages) as the plain ``role``/``content`` dicts chat templates read."""
    return [{"role": message.role.value, "content": message.content} for message in messages]


class TemplateRenderer:
    """A chat template compiled the way transformers compiles it (sandboxed jinja2, trimmed blocks)."""

    def __init__(self, template: str, *, name: str, bos_token: str, eos_token: str) -> None:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        environment.filters["tojson"] = _tojson  # jinja2's own escapes HTML characters
        environment.globals |= {"raise_exception": raise_exception, "strftime_now": _strftime_now}
        self.name = name
        try:
            self._template = environment.from_string(template)
        except TemplateError as exc:
            raise ModelUnavailable(f"the chat template of {name} does not compile ({exc}); use another model") from exc
        self._special = {"bos_token": bos_token, "eos_token": eos_token}

    def __call__(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str:
        return render_checked(
            self.name,
            lambda: self._template.render(
                messages=wire_messages(messages),
                tools=None,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **self._special,
            ),
        )


def render_checked(name: str, render: Callable[[], str]) -> str:
    """``render()``, with a template's refusal (its ``raise_exception`` or a jinja2 error) as a ConfigError."""
    try:
        return render()
    except Exception as exc:  # jinja2 errors, the template's own raise_exception, TypeErrors inside it
        raise ConfigError(
            f"the chat template of {name} rejects these messages ({exc}); adapt the roles or order to what the "
            "model accepts"
        ) from exc


def find_end_of_turn(tokenizer: ChatTokenizer, is_special: Callable[[int], bool], fallback: str) -> str:
    """The text of the special token the template writes right after an assistant message, else ``fallback``."""
    probe = [ChatMessage(role=Role.USER, content="Hi"), ChatMessage(role=Role.ASSISTANT, content=_PROBE)]
    try:
        rendered = tokenizer.render(probe, add_generation_prompt=False)
    except ConfigError:
        return fallback
    after = rendered.partition(_PROBE)[2]
    ids = tokenizer.encode(after) if after else []
    return tokenizer.decode(ids[:1]) if ids and is_special(ids[0]) else fallback


class HFTokenizer:
    """A transformers tokenizer (``PreTrainedTokenizerBase`` with a chat template) as a :class:`ChatTokenizer`."""

    def __init__(self, tokenizer: Any, *, name: str | None = None) -> None:
        self.tokenizer = tokenizer
        """The wrapped transformers tokenizer."""
        self.name = name or str(getattr(tokenizer, "name_or_path", "") or "this tokenizer")
        if not getattr(tokenizer, "chat_template", None):
            raise ModelUnavailable(
                f"{self.name} has no chat template; use an instruct or chat model, or add chat_template to its "
                "tokenizer_config.json"
            )
        special = set(tokenizer.all_special_ids)
        self.end_of_turn: str = find_end_of_turn(self, special.__contains__, tokenizer.eos_token or "")
        """The text of the token that closes an assistant message."""

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages`` (ending with the assistant header when asked)."""
        return render_checked(
            self.name,
            lambda: self.tokenizer.apply_chat_template(
                wire_messages(messages), tokenize=False, add_generation_prompt=add_generation_prompt
            ),
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: special tokens in it parsed as special, no BOS added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens included."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def offsets(self, ids: Sequence[int]) -> list[int]:
        """``offsets[i]``: characters of ``decode(ids)`` covered by tokens ``0..i``.

        Read from the decoded prefixes. A prefix that ends inside a character decodes it as U+FFFD, which
        is not counted until the token that completes the character.
        """
        text, covered, offsets = self.decode(ids), 0, []
        for end in range(1, len(ids) + 1):
            prefix = self.decode(ids[:end])
            if end < len(ids):
                prefix = prefix.rstrip(_REPLACEMENT)
            if text.startswith(prefix):
                covered = max(covered, len(prefix))
            offsets.append(covered)
        return offsets


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids ``a`` and ``b`` share (what a cached sequence saves a new one)."""
    return next((index for index, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
