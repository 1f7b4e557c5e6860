"""An on-disk completion cache in front of any chat model.

Only reproducible requests are cached: ``temperature == 0`` (greedy) or a ``seed`` set. A request that
samples at ``temperature > 0`` without a seed asks for fresh randomness, so it always goes to the model.

Each entry is one JSON file, ``CACHE_DIR/ab/abcdef....json``, named by the sha256 of the model spec, the
messages and every sampling field. One file per entry, rather than a sqlite database, because a file
written to a temporary name and moved into place with ``os.replace`` is atomic on every OS: processes
sharing a cache need no lock, a crash never leaves a half-written entry, and there is no "database is
locked" under many writers or on network file systems. Two processes that miss the same key at once
both ask the model and the last write wins; both entries are valid.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, ValidationError

from datalyst.files import write_atomic
from datalyst.llm._base import ChatMessage, ChatModel, Completion, SamplingParams

__all__ = ["CachedModel", "cache_key", "is_cacheable"]

CACHE_FORMAT = "datalyst-completion-cache-1"
"""Part of every key: changing it (when the entry layout changes) starts a fresh cache."""

logger = logging.getLogger(__name__)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cache_format: str
    spec: str
    params: SamplingParams
    completions: list[Completion]


def is_cacheable(params: SamplingParams) -> bool:
    """Whether the same request should give the same completions: greedy, or seeded."""
    return params.temperature == 0 or params.seed is not None


class CachedModel:
    """``inner`` with completions of reproducible requests stored under ``cache_dir``.

    Concurrent identical requests in one event loop ask ``inner`` once; the others wait and read the entry.
    """

    def __init__(self, inner: ChatModel, cache_dir: Path) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.cache_dir = Path(cache_dir)
        self.hits = 0  # cacheable requests answered from disk
        self.misses = 0  # cacheable requests that had to ask inner
        self._key_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        """The cached completions for this request, or ``inner``'s (stored when the request is reproducible)."""
        if not is_cacheable(params):
            return await self.inner.agenerate(messages, params)
        key = cache_key(self.spec, messages, params)
        lock = self._key_locks.setdefault(key, asyncio.Lock())
        async with lock:
            if (cached := self._read(key, params)) is not None:
                self.hits += 1
                return cached
            self.misses += 1
            completions = await self.inner.agenerate(messages, params)
            entry = _Entry(cache_format=CACHE_FORMAT, spec=self.spec, params=params, completions=completions)
            try:
                self._write(key, entry)
            except OSError as exc:  # the answer is good; a cache that cannot be written only costs speed
                logger.warning("cannot write cache entry under %s (%s); continuing without it", self.cache_dir, exc)
            return completions

    async def aclose(self) -> None:
        """Close ``inner``."""
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def path_for(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _read(self, key: str, params: SamplingParams) -> list[Completion] | None:
        path = self.path_for(key)
        try:
            entry = _Entry.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            logger.warning("ignoring unreadable cache entry %s (%s); it will be rewritten", path, exc)
            return None
        if entry.cache_format != CACHE_FORMAT or len(entry.completions) != params.n:
            return None
        return entry.completions

    def _write(self, key: str, entry: _Entry) -> None:
        # Readers in any process see either no entry or a whole one. No fsync: a lost entry is only a miss.
        write_atomic(self.path_for(key), entry.model_dump_json())


def cache_key(spec: str, messages: Sequence[ChatMessage], params: SamplingParams) -> str:
    """The sha256 (hex) of everything that decides the completions: spec, messages and all of ``params``."""
    request = {
        "cache_format": CACHE_FORMAT,
        "spec": spec,
        "messages": [message.model_dump(mode="json") for message in messages],
        "params": params.model_dump(mode="json"),
    }
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
