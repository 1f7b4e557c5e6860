"""GGUF files read by llama.cpp: checking a file, importing ``llama_cpp``, and the file's chat tokenizer.

:class:`GGUFTokenizer` loads only the vocabulary (``vocab_only``, well under a second and a few MB) and
the chat template stored in the file's metadata (``tokenizer.chat_template``).

:func:`find_adapter` locates a LoRA adapter for llama.cpp: a GGUF adapter file, or a peft adapter folder
holding its conversion as ``ADAPTER_GGUF`` (``datalyst.train.adapter_to_gguf`` writes it there).
"""

from __future__ import annotations

import codecs
import ctypes
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm._base import ChatMessage
from datalyst.llm._cpu import INSTALL_FIX
from datalyst.llm._local import GGUF_MAGIC, file_signature
from datalyst.llm._tokenizer import TemplateRenderer, find_end_of_turn

__all__ = ["ADAPTER_GGUF", "GGUFTokenizer", "Spelling", "check_gguf", "find_adapter", "import_llama_cpp"]

ADAPTER_GGUF = "adapter_model.gguf"
"""The GGUF conversion of a peft adapter, kept in the adapter's folder beside ``PEFT_WEIGHTS``."""
PEFT_WEIGHTS = "adapter_model.safetensors"
CONVERT_FIX = "convert it with datalyst.train.adapter_to_gguf(FOLDER, base=SPEC_OF_THE_MODEL_TRAINED_ON)"
_PIECE_BYTES = 64
"""First guess at a token's length in bytes; longer pieces are read again with the size llama.cpp asks for."""


def check_gguf(path: Path) -> None:
    """ModelUnavailable unless ``path`` is a file that starts like a GGUF."""
    if not path.is_file():
        where = "is a folder" if path.is_dir() else "does not exist"
        raise ModelUnavailable(f"GGUF model {path} {where}; give the path of a .gguf file")
    if (magic := file_signature(path)) != GGUF_MAGIC:
        raise ModelUnavailable(
            f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'); "
            "convert the model with llama.cpp's convert_hf_to_gguf.py or download a .gguf"
        )


def find_adapter(path: Path) -> Path:
    """The GGUF adapter file ``path`` names: the file itself, or ``ADAPTER_GGUF`` in a peft adapter folder
    (ConfigError when it is missing or older than the folder's weights)."""
    if path.is_dir():
        converted = path / ADAPTER_GGUF
        if not converted.is_file():
            raise ConfigError(f"adapter folder {path} holds no {ADAPTER_GGUF} for llama.cpp; {CONVERT_FIX}")
        weights = path / PEFT_WEIGHTS
        if weights.is_file() and weights.stat().st_mtime > converted.stat().st_mtime:
            raise ConfigError(f"{converted} is older than {weights.name} beside it; {CONVERT_FIX} again")
        return converted
    if not path.is_file():
        raise ConfigError(f"adapter {path} does not exist; give a GGUF LoRA adapter or a converted peft adapter folder")
    if (magic := file_signature(path)) != GGUF_MAGIC:
        raise ConfigError(f"adapter {path} is not a GGUF file (it starts with {magic!r}); {CONVERT_FIX}")
    return path


def import_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or ModelUnavailable naming the extra to install."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailable(
            f"gguf: models need the Python package 'llama_cpp', which cannot be imported ({exc}); {INSTALL_FIX}"
        ) from exc
    _log_errors_only(llama_cpp)
    return llama_cpp


_GGML_LOG_LEVEL_ERROR = 4
_log_callback: Any = None


def _log_errors_only(lib: Any) -> None:
    """Let llama.cpp's log through to stderr only for errors (its warnings are about settings chosen here)."""
    global _log_callback
    if _log_callback is None:

        def log(level: int, text: bytes, _: ctypes.c_void_p) -> None:
            if level == _GGML_LOG_LEVEL_ERROR:
                sys.stderr.write(text.decode(errors="replace"))

        _log_callback = lib.llama_log_callback(log)
        lib.llama_log_set(_log_callback, ctypes.c_void_p(0))


class GGUFTokenizer:
    """The vocabulary and chat template of a GGUF file, as a :class:`~datalyst.llm.ChatTokenizer`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        check_gguf(self.path)
        llama_cpp = import_llama_cpp()
        from llama_cpp import _internals  # the pinned llama-cpp-python's model wrapper (frees the model on close)

        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        try:
            self._model = _internals.LlamaModel(path_model=str(self.path), params=params, verbose=False)
        except ValueError as exc:
            raise ModelUnavailable(
                f"llama.cpp cannot read the vocabulary of {self.path} ({exc}); re-download the file or upgrade "
                "llama-cpp-python"
            ) from exc
        self._llama_cpp = llama_cpp
        template = self._model.metadata().get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(
                f"GGUF model {self.path} has no chat template (tokenizer.chat_template); use the GGUF of an "
                "instruct or chat model"
            )
        eos = self._model.token_eos()
        self._render = TemplateRenderer(
            template,
            name=self.path.name,
            bos_token=self._special_text(self._model.token_bos()),
            eos_token=self._special_text(eos),
        )
        self.end_of_turn: str = find_end_of_turn(self, self.is_special, self._special_text(eos))
        """The text of the token that closes an assistant message (``<|im_end|>`` in ChatML)."""

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages`` (ending with the assistant header when asked)."""
        return self._render(messages, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: special tokens in it parsed as special, no BOS added."""
        return list(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens included (bytes that are not UTF-8 become U+FFFD)."""
        return b"".join(self.token_bytes(token) for token in ids).decode("utf-8", errors="replace")

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens as their text); a character may span several tokens."""
        vocab, to_piece = self._model.vocab, self._llama_cpp.llama_token_to_piece
        buffer = ctypes.create_string_buffer(_PIECE_BYTES)
        size = to_piece(vocab, token, buffer, _PIECE_BYTES, 0, True)
        if size < 0:  # the piece is longer than the buffer: llama.cpp says how long
            buffer = ctypes.create_string_buffer(-size)
            size = to_piece(vocab, token, buffer, -size, 0, True)
        return buffer.raw[:size]

    def offsets(self, ids: Sequence[int]) -> list[int]:
        """``offsets[i]``: characters of ``decode(ids)`` covered by tokens ``0..i``."""
        spelling = Spelling()
        for token in ids:
            spelling.add(self.token_bytes(token))
        return spelling.finish()[1]

    def ends_generation(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, end of turn and the like)."""
        return bool(self._llama_cpp.llama_vocab_is_eog(self._model.vocab, token))

    def is_special(self, token: int) -> bool:
        """Whether ``token`` is a control token (``<|im_end|>``) rather than text."""
        return self.ends_generation(token) or bool(self._llama_cpp.llama_vocab_is_control(self._model.vocab, token))

    def _special_text(self, token: int) -> str:
        return self.decode([token]) if token >= 0 else ""


class Spelling:
    """The text of a growing sequence of token bytes, and where each token's text ends.

    A character split over several tokens appears when its last byte arrives, so the tokens before
    that one cover no new character (their offsets repeat). Bytes that are not UTF-8 become U+FFFD,
    exactly as :meth:`GGUFTokenizer.decode` writes them.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.offsets: list[int] = []

    def add(self, piece: bytes) -> None:
        self.text += self._decoder.decode(piece)
        self.offsets.append(len(self.text))

    def finish(self) -> tuple[str, list[int]]:
        """The text and offsets, with an unfinished last character written as U+FFFD."""
        self.text += self._decoder.decode(b"", final=True)
        if self.offsets:
            self.offsets[-1] = len(self.text)
        return self.text, self.offsets
