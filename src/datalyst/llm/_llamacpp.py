"""Chat models from a local GGUF file, run in this process by llama.cpp (``llama-cpp-python``).

The prompt is rendered with the chat template stored in the GGUF itself (``tokenizer.chat_template``,
through :class:`GGUFTokenizer`), so the model sees the format it was trained on. One ``Llama`` instance
is not thread-safe: calls queue on a lock and run one at a time in a worker thread, which keeps the
event loop free meanwhile.

Sampling is plain temperature and top-p (llama.cpp's extra defaults, top-k 40, min-p 0.05 and a
repeat penalty, are switched off); temperature 0 is greedy decoding. Tokens are taken one at a time,
so the completion's ids are exactly the sampled ones and its text is their decoding; generation ends
at the token that completes a stop string, which the text keeps whole. Log-probabilities are those of
the model's raw distribution, read from the last logits after each token, so they need no ``logits_all``;
scoring a given continuation feeds its tokens one at a time the same way, so its log-probabilities
are the ones generation would report.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable
from datalyst.llm._base import Completion, SamplingParams, TokenLogprob, find_stop
from datalyst.llm._gguf import GGUFTokenizer, Spelling, check_gguf, import_llama_cpp
from datalyst.llm._local import LocalModel
from datalyst.llm._spec import ModelKind, ModelSpec

__all__ = ["LlamaCppModel"]

DEFAULT_N_CTX_TOKENS = 8192
"""Context size when none is given, lowered to the model's trained context when that is shorter."""
MIN_N_CTX_TOKENS = 64
DEFAULT_N_BATCH_TOKENS = 512


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
        check_gguf(self.path)
        llama_cpp = import_llama_cpp()
        self.chat_tokenizer: GGUFTokenizer = GGUFTokenizer(self.path)
        """The GGUF's chat template and vocabulary (loaded apart from the weights, so it outlives ``close``)."""
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
        self._logits = _last_logits_reader(llama_cpp, self._llama)
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

    def _generate_one(
        self, prompt: list[int], params: SamplingParams, seed: int | None, cancelled: threading.Event
    ) -> Completion:
        llama, tokenizer = self._llama, self.chat_tokenizer
        llama.set_seed(0 if seed is None else seed)  # greedy decoding ignores it
        longest_stop = max((len(stop) for stop in params.stop), default=0)
        spelling = Spelling()
        ids: list[int] = []
        logprobs: list[TokenLogprob] | None = [] if params.logprobs else None
        finish_reason, stop = "length", None
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
                        finish_reason = "cancelled"
                        break
                    if tokenizer.ends_generation(token):
                        finish_reason = "stop"
                        break
                    ids.append(token)
                    if logprobs is not None:
                        logprobs.append(TokenLogprob(token=tokenizer.decode([token]), logprob=self._logprob(token)))
                    searched_from = max(0, len(spelling.text) - longest_stop + 1)
                    spelling.add(tokenizer.token_bytes(token))
                    if (hit := find_stop(spelling.text, params.stop, searched_from)) is not None:
                        finish_reason, stop = "stop", hit[1]
                        break
                    if len(ids) >= params.max_tokens:
                        break
        except RuntimeError as exc:  # llama_decode failed
            raise self._failed(exc) from exc
        text, offsets = spelling.finish()
        return Completion(
            text=text,
            finish_reason=finish_reason,
            stop=stop,
            prompt_tokens=len(prompt),
            completion_tokens=len(ids),
            token_ids=ids,
            offsets=offsets,
            logprobs=logprobs,
        )

    def _score_tokens(self, prompt: list[int], tokens: list[int], cancelled: threading.Event) -> list[float]:
        values: list[float] = []
        try:
            self._evaluate(prompt)
            for index, token in enumerate(tokens):
                if cancelled.is_set():
                    break
                if index:
                    self._llama.eval([tokens[index - 1]])
                values.append(self._logprob(token))
        except RuntimeError as exc:
            raise self._failed(exc) from exc
        return values

    def _evaluate(self, tokens: list[int]) -> None:
        """Leave ``tokens`` in the context with the logits after the last one, reusing a cached prefix."""
        llama = self._llama
        reused = 0
        for cached, token in zip(llama.input_ids[: llama.n_tokens], tokens[:-1], strict=False):
            if cached != token:
                break
            reused += 1
        llama.n_tokens = reused  # eval drops the cache past n_tokens first
        llama.eval(tokens[reused:])

    def _logprob(self, token: int) -> float:
        """log p(token) under the logits that produced it (the last ones llama.cpp computed)."""
        logits = self._logits().astype(np.float64)
        peak = logits.max()
        return float(logits[token] - peak - np.log(np.exp(logits - peak).sum()))

    def _failed(self, exc: RuntimeError) -> ModelResponseError:
        return ModelResponseError(
            f"llama.cpp failed while running {self.path.name} ({exc}); retry, or lower n_ctx or max_tokens"
        )


def _default_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def _last_logits_reader(llama_cpp: Any, llama: Any) -> Any:
    """A function returning (a view of) the logits of the last token llama.cpp evaluated."""
    n_vocab = llama.n_vocab()
    return lambda: np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(n_vocab,))


def _trained_context_tokens(llama: Any) -> int | None:
    architecture = llama.metadata.get("general.architecture")
    value = llama.metadata.get(f"{architecture}.context_length")
    return int(value) if value and str(value).isdigit() else None
