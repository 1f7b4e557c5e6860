"""Chat models from a local GGUF file, run in this process by llama.cpp (``llama-cpp-python``).

The prompt is rendered with the chat template stored in the GGUF itself (``tokenizer.chat_template``),
so the model sees the format it was trained on. One ``Llama`` instance is not thread-safe: calls queue
on a lock and run one at a time in a worker thread, which keeps the event loop free meanwhile.

Sampling is plain temperature and top-p (llama.cpp's extra defaults, top-k 40, min-p 0.05 and a
repeat penalty, are switched off); temperature 0 is greedy decoding. Log-probabilities are those of the
model's raw distribution, read from the last logits after each token, so they need no ``logits_all``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable
from datalyst.llm._base import ChatMessage, Completion, SamplingParams, TokenLogprob
from datalyst.llm._local import GGUF_MAGIC, LocalModel, file_signature
from datalyst.llm._spec import ModelKind, ModelSpec

__all__ = ["LlamaCppModel"]

DEFAULT_N_CTX_TOKENS = 8192
"""Context size when none is given, lowered to the model's trained context when that is shorter."""
MIN_N_CTX_TOKENS = 64
DEFAULT_N_BATCH_TOKENS = 512
INSTALL_FIX = "CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install 'datalyst[llamacpp]'"


class LlamaCppModel(LocalModel):
    """A GGUF chat model loaded in process; ``await model.agenerate(messages, params)`` like any ChatModel.

    ``n_ctx_tokens`` None means 8192, or the trained context if shorter. ``n_threads`` None means one
    less than the cores this process may use (at least one): llama.cpp's threads spin while they wait
    for each other, so a pool that competes with other busy processes (the sandbox, a test run) slows
    down many times over, while one spare core costs little. Loading happens in the constructor
    (under a second for small models).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx_tokens: int | None = None,
        n_threads: int | None = None,
        n_batch_tokens: int = DEFAULT_N_BATCH_TOKENS,
        spec: str | None = None,
    ) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        self.spec = spec or str(ModelSpec(kind=ModelKind.GGUF, target=str(self.path)))
        if n_ctx_tokens is not None and n_ctx_tokens < MIN_N_CTX_TOKENS:
            raise ConfigError(
                f"n_ctx={n_ctx_tokens} is too small for a chat model; use at least {MIN_N_CTX_TOKENS}, e.g. 4096"
            )
        if n_threads is not None and n_threads < 1:
            raise ConfigError(f"n_threads={n_threads} must be at least 1; leave it unset for one less than the cores")
        if n_batch_tokens < 1:
            raise ConfigError(f"n_batch={n_batch_tokens} must be at least 1; leave it unset ({DEFAULT_N_BATCH_TOKENS})")
        _check_gguf(self.path)
        llama_cpp = _import_llama_cpp()
        threads = n_threads or _default_threads()
        try:
            self._llama: Any = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=n_ctx_tokens or DEFAULT_N_CTX_TOKENS,
                n_batch=n_batch_tokens,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelUnavailable(
                f"llama.cpp cannot load {self.path} ({exc}); the file may be truncated or use an architecture "
                "this llama-cpp-python does not know: re-download it or upgrade llama-cpp-python"
            ) from exc
        self._eog = _eog_checker(llama_cpp, self._llama)
        self._logits = _last_logits_reader(llama_cpp, self._llama)
        self._template = _chat_template(llama_cpp, self._llama, self.path)
        trained = _trained_context_tokens(self._llama)
        self.n_ctx_tokens: int = self._llama.n_ctx()
        """Prompt plus completion tokens that fit; more raises :class:`ContextOverflow`."""
        if n_ctx_tokens is None and trained:
            self.n_ctx_tokens = min(self.n_ctx_tokens, trained)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> LlamaCppModel:
        """Build from ``gguf:PATH``; options: n_ctx, n_threads, n_batch (all in tokens or threads)."""
        options = spec.check_options({"n_ctx": int, "n_threads": int, "n_batch": int})
        return cls(
            spec.target,
            n_ctx_tokens=options.get("n_ctx"),
            n_threads=options.get("n_threads"),
            n_batch_tokens=options.get("n_batch", DEFAULT_N_BATCH_TOKENS),
            spec=str(spec),
        )

    def _is_loaded(self) -> bool:
        return self._llama is not None

    def _release(self) -> None:
        self._llama.close()
        self._llama = None

    def _prompt_tokens(self, messages: list[ChatMessage]) -> list[int]:
        wire = [{"role": message.role.value, "content": message.content} for message in messages]
        try:
            prompt = self._template(messages=wire).prompt
        except Exception as exc:  # jinja2 errors and the template's own raise_exception (a ValueError)
            raise ConfigError(
                f"the chat template of {self.path.name} rejects these messages ({exc}); "
                "adapt the roles or order to what the model accepts"
            ) from exc
        # Like llama-cpp-python's own chat handler: the template writes any BOS itself.
        return self._llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def _generate_one(
        self, prompt: list[int], params: SamplingParams, seed: int | None, cancelled: threading.Event
    ) -> Completion:
        llama = self._llama
        llama.set_seed(0 if seed is None else seed)  # greedy decoding ignores it
        stops = [stop.encode("utf-8") for stop in params.stop]
        longest_stop_bytes = max((len(stop) for stop in stops), default=0)
        tokens: list[int] = []
        logprobs: list[TokenLogprob] | None = [] if params.logprobs else None
        text = b""
        finish_reason = "length"
        generator = llama.generate(
            prompt,
            temp=params.temperature,
            top_p=params.top_p,
            top_k=0,
            min_p=0.0,
            typical_p=1.0,
            repeat_penalty=1.0,
        )
        try:
            with contextlib.closing(generator):
                for token in generator:
                    if cancelled.is_set():
                        break
                    if self._eog(token):
                        finish_reason = "stop"
                        break
                    piece = llama.detokenize([token])
                    tokens.append(token)
                    if logprobs is not None:
                        logprobs.append(
                            TokenLogprob(token=piece.decode("utf-8", errors="replace"), logprob=self._logprob(token))
                        )
                    searched_from = max(0, len(text) - longest_stop_bytes + 1)
                    text += piece
                    cut = _first_stop(text, stops, searched_from)
                    if cut is not None:
                        text, finish_reason = text[:cut], "stop"
                        break
                    if len(tokens) >= params.max_tokens:
                        break
        except RuntimeError as exc:  # llama_decode failed
            raise ModelResponseError(
                f"llama.cpp failed while generating with {self.path.name} ({exc}); retry, or lower n_ctx or max_tokens"
            ) from exc
        return Completion(
            text=text.decode("utf-8", errors="ignore"),  # drops a character cut in half by max_tokens
            finish_reason=finish_reason,
            prompt_tokens=len(prompt),
            completion_tokens=len(tokens),
            logprobs=logprobs,
        )

    def _logprob(self, token: int) -> float:
        """log p(token) under the logits that produced it (the last ones llama.cpp computed)."""
        logits = self._logits().astype(np.float64)
        peak = logits.max()
        return float(logits[token] - peak - np.log(np.exp(logits - peak).sum()))


def _first_stop(text: bytes, stops: list[bytes], searched_from: int) -> int | None:
    """Where the earliest stop string starts in ``text`` (looking from ``searched_from``), or None."""
    found = [position for stop in stops if (position := text.find(stop, searched_from)) >= 0]
    return min(found, default=None)


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        where = "is a folder" if path.is_dir() else "does not exist"
        raise ModelUnavailable(f"GGUF model {path} {where}; give the path of a .gguf file")
    if (magic := file_signature(path)) != GGUF_MAGIC:
        raise ModelUnavailable(
            f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'); "
            "convert the model with llama.cpp's convert_hf_to_gguf.py or download a .gguf"
        )


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailable(
            f"gguf: models need the Python package 'llama_cpp', which cannot be imported ({exc}); {INSTALL_FIX}"
        ) from exc
    return llama_cpp


def _default_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def _eog_checker(llama_cpp: Any, llama: Any) -> Any:
    """A function telling whether a token ends generation (EOS, end-of-turn and the like)."""
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    return lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token))


def _last_logits_reader(llama_cpp: Any, llama: Any) -> Any:
    """A function returning (a view of) the logits of the last token llama.cpp evaluated."""
    n_vocab = llama.n_vocab()
    return lambda: np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(n_vocab,))


def _chat_template(llama_cpp: Any, llama: Any, path: Path) -> Any:
    """The GGUF's own chat template as a llama-cpp-python formatter; ModelUnavailable if it has none."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelUnavailable(
            f"GGUF model {path} has no chat template (tokenizer.chat_template); use the GGUF of an instruct or "
            "chat model"
        )

    def special_text(token: int) -> str:
        return llama.detokenize([token], special=True).decode("utf-8", errors="replace") if token >= 0 else ""

    return llama_cpp.llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=special_text(llama.token_eos()),
        bos_token=special_text(llama.token_bos()),
        add_generation_prompt=True,
    )


def _trained_context_tokens(llama: Any) -> int | None:
    architecture = llama.metadata.get("general.architecture")
    value = llama.metadata.get(f"{architecture}.context_length")
    return int(value) if value and str(value).isdigit() else None
