"""An on-disk completion cache in front of any chat model.

Only reproducible requests are cached: ``temperature == 0`` (greedy) or a ``seed`` set. A request that
samples at ``temperature > 0`` without a seed asks for fresh randomness, so it always goes to the model.

Each entry is one JSON file, ``CACHE_DIR/ab/abcdef....json``, named by the sha256 of the model's identity,
the messages and every sampling field. The identity is the spec without the options that do not change
what the model answers (:data:`NEUTRAL_OPTIONS`), plus, for a model read from local files (``gguf:``,
``hf:``, ``replay:``), the size and modification time (ns) of each file, and of the files of an ``adapter``
option, so weights or an adapter replaced at the same path give fresh answers. An ``embedded:`` model is named
by the pinned sha256 of its weights and that of the adapter it ships, so its cache serves any machine. One file per
entry, rather than a sqlite database, because a file written to a temporary name and moved into place with
``os.replace`` is atomic on every OS: processes sharing a cache need no lock, a crash never leaves a
half-written entry, and there is no "database is locked" under many writers or on network file systems.
Two processes that miss the same key at once both ask the model and the last write wins; both entries are valid.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.files import write_atomic
from datalyst.llm._base import AsyncClosing, ChatMessage, ChatModel, Completion, SamplingParams
from datalyst.llm._embedded import EmbeddedModel, adapter_path, get_model
from datalyst.llm._spec import ModelKind, ModelSpec

__all__ = ["NEUTRAL_OPTIONS", "CachedModel", "cache_key", "is_cacheable", "model_identity"]

CACHE_FORMAT = "datalyst-completion-cache-2"
"""Part of every key: changing it (when the entry layout or the key changes) starts a fresh cache."""
NEUTRAL_OPTIONS = frozenset({"max_concurrency", "timeout_s", "max_retries", "n_threads", "n_batch", "parallel"})
"""Spec options that change how a model runs, not what it answers; they are left out of the key."""

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


class CachedModel(AsyncClosing):
    """``inner`` with completions of reproducible requests stored under ``cache_dir``.

    Concurrent identical requests in one event loop ask ``inner`` once; the others wait and read the entry.
    The model's files are looked at once, here: replacing them later needs a new ``CachedModel`` (and a
    newly loaded model).
    """

    def __init__(self, inner: ChatModel, cache_dir: Path) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.cache_dir = Path(cache_dir)
        self.identity = model_identity(inner.spec)
        self.hits = 0  # cacheable requests answered from disk
        self.misses = 0  # cacheable requests that had to ask inner
        self._key_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        """The cached completions for this request, or ``inner``'s (stored when the request is reproducible)."""
        if not is_cacheable(params):
            return await self.inner.agenerate(messages, params)
        key = cache_key(self.identity, messages, params)
        lock = self._key_locks.setdefault(key, asyncio.Lock())
        async with lock:
            if (cached := self._read(key, params)) is not None:
                self.hits += 1
                return cached
            self.misses += 1
            completions = await self.inner.agenerate(messages, params)
            try:
                self.store(messages, params, completions)
            except OSError as exc:  # the answer is good; a cache that cannot be written only costs speed
                logger.warning("cannot write cache entry under %s (%s); continuing without it", self.cache_dir, exc)
            return completions

    def store(
        self,
        messages: Sequence[ChatMessage],
        params: SamplingParams,
        completions: list[Completion],
        *,
        replace: bool = True,
    ) -> bool:
        """Keep ``completions`` as the answer to this request (the model's own: one it gave, or a recorded turn);
        False, keeping nothing, when the request is not reproducible, or (``replace=False``) has an entry here."""
        path = self.path_for(cache_key(self.identity, messages, params))
        if not is_cacheable(params) or (not replace and path.exists()):
            return False
        entry = _Entry(cache_format=CACHE_FORMAT, spec=self.spec, params=params, completions=completions)
        # Readers in any process see either no entry or a whole one. No fsync: a lost entry is only a miss.
        write_atomic(path, entry.model_dump_json())
        return True

    async def aclose(self) -> None:
        """Close ``inner``."""
        await self.inner.aclose()

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


def cache_key(identity: dict[str, Any], messages: Sequence[ChatMessage], params: SamplingParams) -> str:
    """The sha256 (hex) of everything that decides the completions: the model's identity, messages and params."""
    request = {
        "cache_format": CACHE_FORMAT,
        "model": identity,
        "messages": [message.model_dump(mode="json") for message in messages],
        "params": params.model_dump(mode="json"),
    }
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def model_identity(spec: str) -> dict[str, Any]:
    """What decides a model's answers: its spec less :data:`NEUTRAL_OPTIONS`, and its local files' signatures."""
    try:
        parsed = ModelSpec.parse(spec)
    except ConfigError:  # a free-form name (a test double's): only the name itself is known
        return {"spec": spec, "files": []}
    options = {key: value for key, value in parsed.options.items() if key not in NEUTRAL_OPTIONS}
    kept = parsed.model_copy(update={"options": dict(sorted(options.items()))})
    embedded = _embedded(parsed)
    files = [("", embedded.size_bytes, embedded.sha256)] if embedded else _file_signatures(_local_path(parsed))
    identity: dict[str, Any] = {"spec": str(kept), "files": files}
    if "adapter" in options:  # retrained at the same path, an adapter answers differently
        identity["adapter_files"] = _file_signatures(Path(str(options["adapter"])).expanduser())
    elif embedded and (shipped := adapter_path(embedded)) is not None:
        identity["adapter_files"] = [("", shipped.stat().st_size, hashlib.sha256(shipped.read_bytes()).hexdigest())]
    return identity


def _embedded(spec: ModelSpec) -> EmbeddedModel | None:
    """The registered embedded model ``spec`` names, whose weights are named by their pinned sha256 (checked when
    fetched), and whose shipped adapter by its own: the same everywhere, so a cache carries over to other machines."""
    if spec.kind != ModelKind.EMBEDDED:
        return None
    try:
        return get_model(spec.target)
    except ModelUnavailable:  # not a registered name: loading it fails anyway
        return None


def _local_path(spec: ModelSpec) -> Path | None:
    """The file or folder a spec reads its model from, if any."""
    if spec.kind in (ModelKind.OPENAI, ModelKind.EMBEDDED):
        return None
    return Path(spec.target).expanduser()  # an hf repo id that is not a path has no files here


def _file_signatures(path: Path | None) -> list[tuple[str, int, int]]:
    """(name relative to ``path``, size, mtime in ns) of ``path`` or of every file under it."""
    if path is None or not path.exists():
        return []
    files = sorted(item for item in path.rglob("*") if item.is_file()) if path.is_dir() else [path]
    signatures = []
    for file in files:
        info = file.stat()
        signatures.append((file.relative_to(path).as_posix() if file != path else "", info.st_size, info.st_mtime_ns))
    return signatures
