"""Continuous batching over llama.cpp's batch API: many sequences decoded together in one context.

One thread owns the llama.cpp context. Jobs (a prompt's token ids and how to sample) queue for it;
at every step it puts into one batch the last sampled token of every sequence that is generating and
then the next chunk of every prompt still being read, decodes that batch in one forward pass, and
samples each sequence's next token from its own row of logits with its own sampler. On a CPU most of
a step is reading the weights, so sequences that share a step cost little more than one.

Every slot (a sequence id) has a KV cache stream of its own and keeps the tokens it last held. A new
job takes the slot whose tokens share the longest prefix with its prompt, so turn k of a trajectory
reads only what turn k-1 did not. A prefix held by another slot, or about to be (the n samples of one
prompt, the trials of one task started together), is copied instead of read again
(``llama_memory_seq_cp`` copies a whole stream, which is then cut to the prefix). Separate streams
cost a copy where a unified cache would share cells, but in a unified cache every sequence attends
over every slot's cells: with four ~3,000-token contexts that halved generation speed.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from datalyst.llm._base import Completion, SamplingParams, TokenLogprob, find_stop
from datalyst.llm._gguf import GGUFTokenizer, Spelling
from datalyst.llm._tokenizer import common_prefix

WAIT_FOR_PREFIX_TOKENS = 32
"""A job waits for a slot that is reading a prompt it shares more than this many more tokens with."""


@dataclass
class Job:
    """A prompt to complete (``score`` None) or to score ``score`` after; its result goes to ``future``."""

    prompt: list[int]
    params: SamplingParams
    seed: int | None
    cancelled: threading.Event
    score: list[int] | None = None
    on_text: Callable[[str], None] | None = None
    """Called, in the engine's thread, with each new piece of the text as it is sampled."""
    future: Future = field(default_factory=Future)
    submitted: float = field(default_factory=time.monotonic)

    @property
    def sequence(self) -> list[int]:
        """The tokens that go into the cache: the prompt, and for scoring all but the last scored token."""
        return self.prompt + (self.score[:-1] if self.score else [])

    @property
    def first_output(self) -> int:
        """Position of the first token whose logits the job needs (the prompt's last); every token after it
        needs them too (a sampled one, or one to score)."""
        return len(self.prompt) - 1


@dataclass
class Stats:
    """What the engine did, for tests and benchmarks."""

    prompt_tokens: int = 0
    """Prompt tokens the jobs brought."""
    evaluated_tokens: int = 0
    """Prompt tokens actually read (the rest came from a slot's cache or a copied prefix)."""
    copied_tokens: int = 0
    """Prompt tokens that came from another slot's cache."""
    decodes: int = 0
    most_sequences_in_one_decode: int = 0


@dataclass
class _Slot:
    seq: int
    tokens: list[int] = field(default_factory=list)
    """What the cache holds for this sequence, in order."""
    job: Job | None = None
    pending: list[int] = field(default_factory=list)
    """Tokens of the job to put in the cache before the next sampling."""
    sampler: Any = None
    ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    scores: list[float] = field(default_factory=list)
    spelling: Spelling | None = None
    first_token_s: float | None = None
    last_used: int = 0


class BatchEngine:
    """Runs jobs on one llama.cpp context (``ctx``, with ``n_slots`` sequences) in a thread of its own;
    ``threads``, when given, says before each step how many threads it may use."""

    def __init__(
        self,
        llama_cpp: Any,
        ctx: Any,
        tokenizer: GGUFTokenizer,
        *,
        n_slots: int,
        n_batch: int,
        n_vocab: int,
        threads: Callable[[], int] | None = None,
    ) -> None:
        self._lib, self._ctx, self._tokenizer = llama_cpp, ctx, tokenizer
        self._threads, self._n_threads = threads, 0
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._n_batch, self._n_vocab = n_batch, n_vocab
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._slots = [_Slot(seq) for seq in range(n_slots)]
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._waiting: list[Job] = []
        self._clock = 0
        self.stats = Stats()
        self._thread = threading.Thread(target=self._run, name="llama.cpp batching", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Future:
        self._queue.put(job)
        return job.future

    def close(self) -> None:
        """Stop the thread (jobs still queued or running fail) and free the batch and samplers."""
        self._queue.put(None)
        self._thread.join()
        self._lib.llama_batch_free(self._batch)

    # -- the engine thread

    def _run(self) -> None:
        stopping = False
        while not stopping:
            busy = any(slot.job for slot in self._slots)
            try:
                while True:
                    job = self._queue.get(block=not busy and not self._waiting)
                    if job is None:
                        stopping = True
                        break
                    if job.future.set_running_or_notify_cancel():  # from now on only ``cancelled`` stops it
                        self._waiting.append(job)
                        busy = True
            except queue.Empty:
                pass
            if stopping:
                break
            try:
                self._assign()
                if any(slot.job for slot in self._slots):
                    self._step()
            except Exception as exc:  # a bug here must fail the callers, not leave them waiting forever
                self._fail_all(exc)
        self._fail_all(RuntimeError("the model was closed"))

    def _fail_all(self, error: BaseException) -> None:
        for slot in self._slots:
            if slot.job is not None:
                self._finish(slot, error=error)
        for job in self._waiting:
            job.future.set_exception(error)
        self._waiting = []

    def _assign(self) -> None:
        """Give waiting jobs free slots, each with the longest cached prefix it can have."""
        still_waiting: list[Job] = []
        for job in self._waiting:
            if job.cancelled.is_set():
                job.future.set_result(_cancelled(job))
                continue
            free = [slot for slot in self._slots if slot.job is None]
            if not free:
                still_waiting.append(job)
                continue
            usable, sequence = job.first_output, job.sequence  # the prompt's last token is always read
            cached = {slot.seq: min(common_prefix(slot.tokens, sequence), usable) for slot in self._slots}
            coming = max(
                (min(common_prefix(slot.tokens + slot.pending, sequence), usable) for slot in self._slots if slot.job),
                default=0,
            )
            best = max(self._slots, key=lambda slot: (cached[slot.seq], slot.job is None))
            if coming > cached[best.seq] + WAIT_FOR_PREFIX_TOKENS:
                still_waiting.append(job)  # a slot is reading this prefix now: copy it once it is read
                continue
            target = best if best.job is None else min(free, key=lambda slot: (cached[slot.seq], slot.last_used))
            self._start(target, job, best, cached[best.seq])
        self._waiting = still_waiting

    def _start(self, slot: _Slot, job: Job, source: _Slot, common: int) -> None:
        lib = self._lib
        if source is slot:
            lib.llama_memory_seq_rm(self._memory, slot.seq, common, -1)
            slot.tokens = slot.tokens[:common]
        else:
            lib.llama_memory_seq_rm(self._memory, slot.seq, -1, -1)
            if common:  # slots are separate streams, which copy only whole: copy it all, then cut
                lib.llama_memory_seq_cp(self._memory, source.seq, slot.seq, -1, -1)
                lib.llama_memory_seq_rm(self._memory, slot.seq, common, -1)
            slot.tokens = source.tokens[:common]
            self.stats.copied_tokens += common
        self.stats.prompt_tokens += len(job.prompt)
        slot.job, slot.pending = job, job.sequence[common:]
        slot.ids, slot.scores, slot.spelling, slot.first_token_s = [], [], Spelling(), None
        slot.logprobs = [] if job.params.logprobs else None
        slot.sampler = None if job.score is not None else _sampler(lib, job.params, job.seed)

    def _step(self) -> None:
        """One decode: every generating sequence's last token, then prompt chunks while the batch has room."""
        batch = self._batch
        plan: list[tuple[_Slot, list[int]]] = []
        rows: list[tuple[_Slot, int]] = []  # the slots whose logits are needed, and their rows in the batch
        n = 0
        for slot in sorted((s for s in self._slots if s.job), key=_reading):
            job = slot.job
            assert job is not None
            if job.cancelled.is_set():
                self._finish(slot, cancelled=True)
                continue
            take = slot.pending[: self._n_batch - n]
            for offset, token in enumerate(take):
                position = len(slot.tokens) + offset
                wanted = position >= job.first_output
                batch.token[n], batch.pos[n], batch.n_seq_id[n] = token, position, 1
                batch.seq_id[n][0], batch.logits[n] = slot.seq, wanted
                if wanted:
                    rows.append((slot, n))
                n += 1
            if take:
                plan.append((slot, take))
        if n == 0:
            return
        batch.n_tokens = n
        if self._threads is not None and (threads := self._threads()) != self._n_threads:
            self._lib.llama_set_n_threads(self._ctx, threads, threads)
            self._n_threads = threads
        status = self._lib.llama_decode(self._ctx, batch)
        if status != 0:
            self._failed_decode(status, plan)
            return
        self.stats.decodes += 1
        self.stats.most_sequences_in_one_decode = max(self.stats.most_sequences_in_one_decode, len(plan))
        for slot, take in plan:
            if _reading(slot):
                self.stats.evaluated_tokens += len(take)
            slot.tokens += take
            slot.pending = slot.pending[len(take) :]
            slot.last_used = self._clock = self._clock + 1
        for slot, row in rows:
            if slot.job is not None:
                self._after(slot, row)

    def _after(self, slot: _Slot, row: int) -> None:
        """Use the logits of ``row``: score the next given token, or sample the next one."""
        job = slot.job
        assert job is not None
        if job.score is not None:
            slot.scores.append(self._logprob(row, job.score[len(slot.scores)]))
            if len(slot.scores) == len(job.score):
                self._finish(slot)
            return
        token = self._lib.llama_sampler_sample(slot.sampler, self._ctx, row)
        if slot.first_token_s is None:
            slot.first_token_s = time.monotonic() - job.submitted
        if self._tokenizer.ends_generation(token):
            self._finish(slot, reason="stop")
            return
        slot.ids.append(token)
        if slot.logprobs is not None:
            slot.logprobs.append(TokenLogprob(token=self._tokenizer.decode([token]), logprob=self._logprob(row, token)))
        assert slot.spelling is not None
        stops = job.params.stop
        searched_from = max(0, len(slot.spelling.text) - max((len(s) for s in stops), default=0) + 1)
        written = len(slot.spelling.text)
        slot.spelling.add(self._tokenizer.token_bytes(token))
        if job.on_text is not None and len(slot.spelling.text) > written:
            job.on_text(slot.spelling.text[written:])
        if (hit := find_stop(slot.spelling.text, stops, searched_from)) is not None:
            self._finish(slot, reason="stop", stop=hit[1])
        elif len(slot.ids) >= job.params.max_tokens:
            self._finish(slot, reason="length")
        else:
            slot.pending = [token]

    def _logprob(self, row: int, token: int) -> float:
        pointer = self._lib.llama_get_logits_ith(self._ctx, row)
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).astype(np.float64)
        peak = logits.max()
        return float(logits[token] - peak - np.log(np.exp(logits - peak).sum()))

    def _finish(
        self,
        slot: _Slot,
        *,
        reason: str = "length",
        stop: str | None = None,
        cancelled: bool = False,
        error: BaseException | None = None,
    ) -> None:
        job = slot.job
        assert job is not None
        if slot.sampler is not None:
            self._lib.llama_sampler_free(slot.sampler)
        slot.job, slot.sampler, slot.pending = None, None, []
        if error is not None:
            job.future.set_exception(error)
        elif job.score is not None:
            job.future.set_result(slot.scores)
        else:
            assert slot.spelling is not None
            text, offsets = slot.spelling.finish()
            job.future.set_result(
                Completion(
                    text=text,
                    finish_reason="cancelled" if cancelled else reason,
                    stop=stop,
                    prompt_tokens=len(job.prompt),
                    completion_tokens=len(slot.ids),
                    token_ids=slot.ids,
                    offsets=offsets,
                    logprobs=slot.logprobs,
                    first_token_s=slot.first_token_s,
                )
            )

    def _failed_decode(self, status: int, plan: list[tuple[_Slot, list[int]]]) -> None:
        """No room in the cache (status 1): drop idle slots' caches so the next step can retry; otherwise, or
        with nothing to drop, fail the jobs of the batch."""
        for slot, _ in plan:  # whatever part of the batch reached the cache
            self._lib.llama_memory_seq_rm(self._memory, slot.seq, len(slot.tokens), -1)
        idle = [slot for slot in self._slots if slot.job is None and slot.tokens]
        if status == 1 and idle:
            for slot in idle:
                self._lib.llama_memory_seq_rm(self._memory, slot.seq, -1, -1)
                slot.tokens = []
            return
        for slot, _ in plan:
            self._finish(slot, error=RuntimeError(f"llama_decode failed ({status}): the KV cache is full"))


def _reading(slot: _Slot) -> bool:
    """The slot's job is still putting its prompt (or the tokens it scores) in the cache."""
    return slot.job is not None and (slot.job.score is not None or not slot.ids)


def _cancelled(job: Job) -> Any:
    if job.score is not None:
        return []
    return Completion(text="", finish_reason="cancelled", prompt_tokens=len(job.prompt), completion_tokens=0)


def _sampler(lib: Any, params: SamplingParams, seed: int | None) -> Any:
    """Plain temperature and top-p sampling, seeded (greedy at temperature 0)."""
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    parts: list[Callable[[], Any]]
    if params.temperature == 0:
        parts = [lib.llama_sampler_init_greedy]
    else:
        parts = [
            lambda: lib.llama_sampler_init_top_p(ctypes.c_float(params.top_p), 1),
            lambda: lib.llama_sampler_init_temp(ctypes.c_float(params.temperature)),
            lambda: lib.llama_sampler_init_dist(0 if seed is None else seed),
        ]
    for part in parts:
        lib.llama_sampler_chain_add(chain, part())
    return chain
