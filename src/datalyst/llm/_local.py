"""What in-process models share: one generation at a time in a worker thread, n completions by seed.

A loaded model is not thread-safe and holds a lot of memory, so calls queue on a lock per event
loop (waiting callers hold no thread) and then run one at a time under a threading lock. A
cancelled call sets an event the backend checks after every token.

Prompts are the model's chat template rendered by its :attr:`LocalModel.chat_tokenizer`, so training
code that renders a conversation with the same tokenizer builds exactly the ids the model saw.
Completions carry their token ids, offsets and (when asked) log-probabilities; ``ascore`` gives the
log-probability of each token of a continuation that is given rather than generated.
"""

from __future__ import annotations

import asyncio
import random
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm._base import AsyncClosing, ChatMessage, Completion, Role, SamplingParams
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._tokenizer import LocalTokenizer, token_completion

GGUF_MAGIC = b"GGUF"
MIN_N_CTX_TOKENS = 64
SEED_MODULUS = 2**31
"""Seeds stay below 2**31: llama.cpp reads them as uint32, where 0xFFFFFFFF means "random"."""


def seeds(params: SamplingParams) -> list[int | None]:
    """The seed of each completion to generate: one None (greedy) at temperature 0, else ``seed + k`` for
    completion ``k`` (a random base when ``params.seed`` is None), so a completion does not depend on ``n``."""
    if params.temperature == 0:
        return [None]
    base_seed = params.seed if params.seed is not None else random.randrange(SEED_MODULUS)
    return [(base_seed + k) % SEED_MODULUS for k in range(params.n)]


def file_signature(path: Path) -> bytes:
    """The first bytes of a model file, to tell a GGUF (``GGUF_MAGIC``) from anything else."""
    try:
        with path.open("rb") as file:
            return file.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ModelUnavailable(f"model file {path} cannot be read ({exc}); check its permissions") from exc


class LocalModel(AsyncClosing):
    """Base of the llama.cpp and transformers backends; subclasses implement the four hooks below."""

    spec: str
    n_ctx_tokens: int
    """Prompt plus completion tokens that fit; more raises :class:`ContextOverflow`."""
    chat_tokenizer: LocalTokenizer
    """The model's chat template and vocabulary: what renders and tokenizes its prompts."""

    def __init__(self, n_ctx_tokens: int | None) -> None:
        """Check the context size asked for (``n_ctx_tokens``, None for the backend's default)."""
        if n_ctx_tokens is not None and n_ctx_tokens < MIN_N_CTX_TOKENS:
            raise ConfigError(
                f"n_ctx={n_ctx_tokens} is too small for a chat model; use at least {MIN_N_CTX_TOKENS}, e.g. 4096"
            )
        self._thread_lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    # -- hooks

    def _is_loaded(self) -> bool:
        raise NotImplementedError

    def _release(self) -> None:
        """Free the weights."""
        raise NotImplementedError

    def _generate(
        self, prompt: list[int], params: SamplingParams, seeds: list[int | None], cancelled: threading.Event
    ) -> list[Completion]:
        """One completion per seed, in order; a seed of None means greedy decoding."""
        raise NotImplementedError

    def _score_tokens(self, prompt: list[int], tokens: list[int], cancelled: threading.Event) -> list[float]:
        """log p(tokens[i] | prompt + tokens[:i]) for each i, under the model's raw distribution."""
        raise NotImplementedError

    async def _agenerate(
        self, messages: list[ChatMessage], params: SamplingParams, cancelled: threading.Event
    ) -> list[Completion]:
        """The completions of one seed each (``seeds``); by default one call at a time, in a worker thread."""
        async with self._loop_lock():
            return await asyncio.to_thread(self._generate_all, messages, params, cancelled)

    async def _ascore(
        self, messages: list[ChatMessage], continuation: str | Sequence[int], cancelled: threading.Event
    ) -> Completion:
        async with self._loop_lock():
            return await asyncio.to_thread(self._score, messages, continuation, cancelled)

    # -- shared

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        """``params.n`` completions.

        With temperature 0 decoding is greedy, so one completion is generated and returned ``n`` times.
        Otherwise completion ``k`` uses seed ``seed + k`` (a random base seed when ``seed`` is None), so
        it does not depend on ``n``.
        """
        cancelled = threading.Event()
        try:
            completions = await self._agenerate(list(messages), params, cancelled)
        except asyncio.CancelledError:
            cancelled.set()  # generation stops at its next token
            raise
        if len(completions) == params.n:
            return completions
        return [completions[0]] + [completions[0].model_copy(deep=True) for _ in range(params.n - 1)]  # greedy

    async def ascore(self, messages: Sequence[ChatMessage], continuation: str | Sequence[int]) -> Completion:
        """How likely the model finds ``continuation`` as its answer to ``messages``.

        A string is tokenized on its own and placed after the prompt's tokens, as the model would have
        generated it; token ids (a completion's ``token_ids``) are scored exactly as given. The result has
        the continuation's text, ids and offsets, the log-probability of each token (under the model's raw
        distribution, as ``agenerate`` reports them) and ``finish_reason="scored"``.
        """
        cancelled = threading.Event()
        try:
            return await self._ascore(list(messages), continuation, cancelled)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def aclose(self) -> None:
        """Free the model's memory; later calls raise ModelUnavailable."""
        async with self._loop_lock():
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Free the model's memory now (waits for a generation in progress)."""
        with self._thread_lock:
            if self._is_loaded():
                self._release()

    def _loop_lock(self) -> asyncio.Lock:
        """This event loop's queue for the model (callers wait here, not in worker threads)."""
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:
            lock = self._loop_locks[loop] = asyncio.Lock()
        return lock

    def _prompt(self, messages: list[ChatMessage], more_tokens: int, more: str) -> list[int]:
        """The prompt's token ids; ContextOverflow if ``more_tokens`` (described by ``more``) do not fit after it."""
        if not self._is_loaded():
            raise ModelUnavailable(f"the model {self.spec!r} was closed; load it again with load_model")
        tokenizer = self.chat_tokenizer
        *asked, last = messages
        if last.role == Role.ASSISTANT:  # a turn begun for the model: it writes on from there
            prompt = tokenizer.encode(tokenizer.render(asked, add_generation_prompt=True) + last.content)
        else:
            prompt = tokenizer.encode(tokenizer.render(messages, add_generation_prompt=True))
        if len(prompt) + more_tokens > self.n_ctx_tokens:
            raise ContextOverflow(
                f"the prompt ({len(prompt)} tokens) plus {more} ({more_tokens}) exceed the "
                f"{self.n_ctx_tokens}-token context of {self.spec}; lower max_tokens, shorten the "
                "messages or load the model with a larger n_ctx"
            )
        return prompt

    def _score(
        self, messages: list[ChatMessage], continuation: str | Sequence[int], cancelled: threading.Event
    ) -> Completion:
        with self._thread_lock:
            prompt, ids = self._score_request(messages, continuation)
            return self._scored(prompt, continuation, ids, self._score_tokens(prompt, ids, cancelled))

    def _score_request(
        self, messages: list[ChatMessage], continuation: str | Sequence[int]
    ) -> tuple[list[int], list[int]]:
        """The prompt's ids and the continuation's."""
        ids = self.chat_tokenizer.encode(continuation) if isinstance(continuation, str) else list(continuation)
        return self._prompt(messages, len(ids), "the continuation"), ids

    def _scored(
        self, prompt: list[int], continuation: str | Sequence[int], ids: list[int], values: list[float]
    ) -> Completion:
        text = {"text": continuation} if isinstance(continuation, str) else {}
        return token_completion(
            self.chat_tokenizer, ids, values, finish_reason="scored", prompt_tokens=len(prompt), **text
        )

    def _generate_all(
        self, messages: list[ChatMessage], params: SamplingParams, cancelled: threading.Event
    ) -> list[Completion]:
        with self._thread_lock:
            prompt = self._prompt(messages, params.max_tokens, "max_tokens")
            return self._generate(prompt, params, seeds(params), cancelled)
