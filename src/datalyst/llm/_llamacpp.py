"""Chat models from a local GGUF file, run in this process by llama.cpp (``llama-cpp-python``).

The prompt is rendered with the chat template stored in the GGUF itself (``tokenizer.chat_template``,
through :class:`GGUFTokenizer`), so the model sees the format it was trained on. Calls from any number
of trajectories go to one :class:`~datalyst.llm._batching.BatchEngine`, which decodes their sequences
together (continuous batching over llama.cpp's batch API) and reuses cached prompt prefixes: the
earlier turns of a trajectory, and what the samples and trials of one task share.

Sampling is plain temperature and top-p (no top-k, min-p or repeat penalty); temperature 0 is greedy
decoding. The completion's ids are exactly the sampled ones and its text their decoding; generation
ends at the token that completes a stop string, which the text keeps whole. Log-probabilities are
those of the model's raw distribution at each step; scoring a given continuation reads it in one pass
and reports the same values.

``adapter`` applies a LoRA adapter (a GGUF adapter file, or a peft adapter folder holding its conversion,
see :func:`~datalyst.llm._gguf.find_adapter`) to the quantized weights as llama.cpp runs them: the base
model's file, the trained model's outputs, a little slower for every adapted layer. llama.cpp refuses an
adapter made for another base (its architecture or a tensor's shape differs).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable
from datalyst.llm._base import ChatMessage, Completion, SamplingParams
from datalyst.llm._batching import BatchEngine, Job
from datalyst.llm._cores import FreeCores, available_cores
from datalyst.llm._cpu import CpuPath, load_cpu_library
from datalyst.llm._gguf import GGUFTokenizer, check_gguf, find_adapter, import_llama_cpp
from datalyst.llm._local import LocalModel, seeds
from datalyst.llm._spec import ModelKind, ModelSpec
from datalyst.llm._streaming import text_sink

__all__ = ["LlamaCppModel"]

DEFAULT_N_CTX_TOKENS = 8192
"""Context size when none is given, lowered to the model's trained context when that is shorter."""
DEFAULT_N_BATCH_TOKENS = 512
DEFAULT_PARALLEL = 4
"""Sequences decoded together; the KV cache holds ``n_ctx`` tokens for each."""


class LlamaCppModel(LocalModel):
    """A GGUF chat model loaded in process; ``await model.agenerate(messages, params)`` like any ChatModel.

    ``n_ctx_tokens`` (per sequence) None means 8192, or the trained context if shorter. ``n_threads`` None
    means every core this process may use that other processes do not keep busy, read again as they
    change. ``parallel`` sequences are decoded together: calls from that many trajectories at once share
    each forward pass (more wait for a free sequence); the KV cache holds ``n_ctx_tokens`` for each.
    ``adapter`` names a LoRA adapter to apply (a GGUF adapter or a converted peft folder).
    Loading happens in the constructor (under a second for small models; the first model a machine loads also
    waits for the trial runs that choose the CPU library, about a second).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx_tokens: int | None = None,
        n_threads: int | None = None,
        n_batch_tokens: int = DEFAULT_N_BATCH_TOKENS,
        parallel: int = DEFAULT_PARALLEL,
        adapter: str | os.PathLike[str] | None = None,
        spec: str | None = None,
    ) -> None:
        super().__init__(n_ctx_tokens)
        self.path = Path(path).expanduser()
        self.spec = spec or str(ModelSpec(kind=ModelKind.GGUF, target=str(self.path)))
        if n_threads is not None and n_threads < 1:
            raise ConfigError(f"n_threads={n_threads} must be at least 1; leave it unset for every core")
        if n_batch_tokens < 1:
            raise ConfigError(f"n_batch={n_batch_tokens} must be at least 1; leave it unset ({DEFAULT_N_BATCH_TOKENS})")
        if parallel < 1:
            raise ConfigError(f"parallel={parallel} must be at least 1; leave it unset ({DEFAULT_PARALLEL})")
        check_gguf(self.path)
        self.adapter: Path | None = find_adapter(Path(adapter).expanduser()) if adapter is not None else None
        """The GGUF LoRA adapter applied to the weights, if any."""
        lib = import_llama_cpp()
        self.cpu: CpuPath = load_cpu_library(lib.llama_cpp._lib, Path(lib.__file__).parent)
        """The CPU library llama.cpp runs here (chosen once per machine by trial runs; ModelUnavailable if none)."""
        self.chat_tokenizer: GGUFTokenizer = GGUFTokenizer(self.path)
        """The GGUF's chat template and vocabulary (loaded apart from the weights, so it outlives ``close``)."""
        self._lib = lib
        model_params = lib.llama_model_default_params()
        model_params.use_extra_bufts = self.cpu.extra_buffers
        self._model = lib.llama_model_load_from_file(str(self.path).encode(), model_params)
        if not self._model:
            raise ModelUnavailable(
                f"llama.cpp cannot load {self.path}; the file may be truncated or use an architecture "
                "this llama-cpp-python does not know: re-download it or upgrade llama-cpp-python"
            )
        lora = self._load_adapter() if self.adapter is not None else None
        trained = lib.llama_model_n_ctx_train(self._model)
        self.n_ctx_tokens: int = n_ctx_tokens or min(DEFAULT_N_CTX_TOKENS, trained or DEFAULT_N_CTX_TOKENS)
        """Prompt plus completion tokens that fit in one sequence; more raises :class:`ContextOverflow`."""
        self.n_threads: int = n_threads or available_cores()
        """Threads at most; without ``n_threads`` fewer while other processes (sandboxed cells) keep cores busy."""
        self.parallel = parallel
        params = lib.llama_context_default_params()
        params.n_ctx = self.n_ctx_tokens * parallel
        params.n_batch = params.n_ubatch = n_batch_tokens
        params.n_seq_max = parallel
        params.n_threads = params.n_threads_batch = self.n_threads
        params.kv_unified = False  # a stream per slot: attention reads only its own cells, not every slot's
        params.no_perf = True
        context = lib.llama_init_from_model(self._model, params)
        if not context:
            lib.llama_model_free(self._model)
            raise ModelUnavailable(
                f"llama.cpp could not make a context of {params.n_ctx} tokens for {self.path.name} "
                "(out of memory?); lower n_ctx or parallel"
            )
        self._context = context
        if lora is not None:
            self._apply_adapter(lora)
        n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self._model))
        self.engine = BatchEngine(
            lib,
            context,
            self.chat_tokenizer,
            n_slots=parallel,
            n_batch=n_batch_tokens,
            n_vocab=n_vocab,
            threads=FreeCores(self.n_threads) if n_threads is None else None,
        )
        """The batching engine; ``engine.stats`` counts what it evaluated, reused and batched."""

    def _load_adapter(self) -> Any:
        """The loaded adapter (freed with the model), or ConfigError when llama.cpp finds it does not fit."""
        lora = self._lib.llama_adapter_lora_init(self._model, str(self.adapter).encode())
        if not lora:
            self._lib.llama_model_free(self._model)
            raise ConfigError(
                f"llama.cpp cannot apply the adapter {self.adapter} to {self.path.name}: it is not a LoRA adapter "
                "made for this base model (the architecture or a tensor's shape differs); convert the adapter that "
                "was trained on this model"
            )
        return lora

    def _apply_adapter(self, lora: Any) -> None:
        lib = self._lib
        adapters, scales = (lib.llama_adapter_lora_p_ctypes * 1)(lora), (ctypes.c_float * 1)(1.0)
        if lib.llama_set_adapters_lora(self._context, adapters, 1, scales) != 0:
            lib.llama_free(self._context)
            lib.llama_model_free(self._model)
            raise ModelUnavailable(f"llama.cpp could not apply the adapter {self.adapter} to {self.path.name}")

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> LlamaCppModel:
        """Build from ``gguf:PATH``; options: n_ctx, n_threads, n_batch, parallel, adapter (a path)."""
        accepted = {"n_ctx": int, "n_threads": int, "n_batch": int, "parallel": int, "adapter": str}
        options = spec.check_options(accepted)
        return cls(
            spec.target,
            n_ctx_tokens=options.get("n_ctx"),
            n_threads=options.get("n_threads"),
            n_batch_tokens=options.get("n_batch", DEFAULT_N_BATCH_TOKENS),
            parallel=options.get("parallel", DEFAULT_PARALLEL),
            adapter=options.get("adapter"),
            spec=str(spec),
        )

    def _is_loaded(self) -> bool:
        return self._context is not None

    def _release(self) -> None:
        self.engine.close()
        self._lib.llama_free(self._context)
        self._lib.llama_model_free(self._model)
        self._context = self._model = None

    async def _agenerate(
        self, messages: list[ChatMessage], params: SamplingParams, cancelled: threading.Event
    ) -> list[Completion]:
        prompt = self._prompt(messages, params.max_tokens, "max_tokens")
        drawn = seeds(params)
        sink = text_sink(len(drawn))
        return await self._run([Job(prompt, params, seed, cancelled, on_text=sink) for seed in drawn])

    async def _ascore(
        self, messages: list[ChatMessage], continuation: str | Sequence[int], cancelled: threading.Event
    ) -> Completion:
        prompt, ids = self._score_request(messages, continuation)
        if not ids:
            return self._scored(prompt, continuation, ids, [])
        (values,) = await self._run([Job(prompt, SamplingParams(max_tokens=1), None, cancelled, score=ids)])
        return self._scored(prompt, continuation, ids, values)

    async def _run(self, jobs: list[Job]) -> list[Any]:
        try:
            return await asyncio.gather(*(asyncio.wrap_future(self.engine.submit(job)) for job in jobs))
        except RuntimeError as exc:  # llama_decode failed, or the model was closed meanwhile
            raise ModelResponseError(
                f"llama.cpp failed while running {self.path.name} ({exc}); retry, or lower n_ctx, max_tokens "
                "or parallel"
            ) from exc
