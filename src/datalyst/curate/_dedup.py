"""Exact and near-duplicate trajectories, found through the code and thoughts they teach.

A trajectory's compared text is its question, then the thought of every turn and the code of every code
cell, in turn order. Answers and observations are left out: two trials of a question that reasoned and
wrote cells alike teach the same thing whatever their outputs. The question is in, because the same cells
written for two different questions are two lessons, not one. Before comparing, text is case-folded and its
whitespace collapsed.
Equal texts are exact duplicates. Otherwise two texts are near duplicates when the Jaccard similarity of
their sets of shingles (runs of ``SHINGLE`` tokens, a token being a word or a run of punctuation), as
MinHash estimates it, reaches the threshold; MinHashLSH proposes the candidates, so the work grows with the
number of trajectories rather than its square. A trajectory with no thought and no code is never a duplicate.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from datasketch import MinHash, MinHashLSH
from pydantic import BaseModel, ConfigDict

from datalyst.agent import Trajectory
from datalyst.curate._records import Decision
from datalyst.errors import ConfigError

EXACT_DUPLICATE = "exact_duplicate"
NEAR_DUPLICATE = "near_duplicate"
REASONS = (EXACT_DUPLICATE, NEAR_DUPLICATE)
SHINGLE = 5
"""Tokens per shingle of a trajectory's text."""

_TOKEN = re.compile(r"\w+|[^\w\s]+")


def normalise(text: str) -> str:
    """``text`` case-folded, with every run of whitespace made one space."""
    return " ".join(text.casefold().split())


def shingles(text: str, size: int) -> set[str]:
    """The runs of ``size`` consecutive tokens of ``text`` (the whole text when it is shorter)."""
    tokens = _TOKEN.findall(text.casefold())
    if not tokens:
        return set()
    return {" ".join(tokens[start : start + size]) for start in range(max(len(tokens) - size, 0) + 1)}


def compared_text(trajectory: Trajectory) -> str:
    """What deduplication compares: the question, then every turn's thought and every cell's code, normalised,
    in turn order ("" when the agent wrote no thought and no code)."""
    parts = [part for turn in trajectory.turns for part in (turn.thought, turn.code or "")]
    written = [normalised for part in parts if (normalised := normalise(part))]
    task = trajectory.task
    return "\n".join([normalise(f"{task.question} {task.constraints}"), *written]) if written else ""


class ShingleIndex:
    """Shingle sets under integer keys, searched for the one most like a new set (MinHash with LSH)."""

    def __init__(self, *, threshold: float, num_perm: int, seed: int) -> None:
        if not 0 < threshold < 1:
            raise ConfigError(f"similarity threshold {threshold} is outside (0, 1); give a share such as 0.8")
        try:
            self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        except ValueError as exc:
            raise ConfigError(
                f"MinHash LSH cannot work with {num_perm} permutations at threshold {threshold} ({exc}); "
                "give more permutations or a lower threshold"
            ) from exc
        self.threshold = threshold
        self._num_perm, self._seed = num_perm, seed
        self._hashes: dict[int, MinHash] = {}

    def signature(self, items: set[str]) -> MinHash:
        signature = MinHash(num_perm=self._num_perm, seed=self._seed)
        signature.update_batch(item.encode() for item in sorted(items))
        return signature

    def add(self, key: int, signature: MinHash) -> None:
        self._lsh.insert(key, signature)
        self._hashes[key] = signature

    def closest(self, signature: MinHash) -> tuple[int, float] | None:
        """The key whose estimated Jaccard similarity is highest and at least the threshold (ties: the lowest key)."""
        scored = [(key, signature.jaccard(self._hashes[key])) for key in self._lsh.query(signature)]
        scored = [(key, score) for key, score in scored if score >= self.threshold]
        return min(scored, key=lambda pair: (-pair[1], pair[0]), default=None)


class Duplicate(BaseModel):
    """Why a trajectory was dropped as a duplicate, and of which kept one."""

    model_config = ConfigDict(frozen=True)

    of: str
    """The id of the kept trajectory it repeats."""
    reason: str
    """``exact_duplicate`` or ``near_duplicate``."""
    similarity: float
    """The estimated Jaccard similarity of their shingles (1.0 for an exact duplicate)."""

    @property
    def verdict(self) -> Decision:
        if self.reason == EXACT_DUPLICATE:
            return Decision(reason=self.reason, detail=f"the same code and thoughts as {self.of}")
        return Decision(reason=self.reason, detail=f"code and thoughts {self.similarity:.0%} alike with {self.of}")


def deduplicate(
    trajectories: Iterable[Trajectory], *, threshold: float = 0.8, num_perm: int = 128, seed: int = 0
) -> dict[str, Duplicate]:
    """The dropped trajectories by id, each with the kept one it duplicates; the first of a group is kept.

    A near duplicate is one whose estimated Jaccard similarity to a kept trajectory is at least
    ``threshold``; ``num_perm`` and ``seed`` set the MinHash permutations, so a run is repeatable.
    """
    index = ShingleIndex(threshold=threshold, num_perm=num_perm, seed=seed)
    kept_ids: list[str] = []
    exact: dict[str, str] = {}
    seen: set[str] = set()
    dropped: dict[str, Duplicate] = {}
    for trajectory in trajectories:
        if trajectory.id in seen:
            raise ConfigError(f"trajectory id {trajectory.id} appears twice; give each trajectory once")
        seen.add(trajectory.id)
        text = compared_text(trajectory)
        if not text:
            continue
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in exact:
            dropped[trajectory.id] = Duplicate(of=exact[key], reason=EXACT_DUPLICATE, similarity=1.0)
            continue
        signature = index.signature(shingles(text, SHINGLE))
        if (match := index.closest(signature)) is not None:
            dropped[trajectory.id] = Duplicate(of=kept_ids[match[0]], reason=NEAR_DUPLICATE, similarity=match[1])
            continue
        exact[key] = trajectory.id
        index.add(len(kept_ids), signature)
        kept_ids.append(trajectory.id)
    return dropped
