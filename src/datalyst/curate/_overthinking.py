"""Datarus's overthinking score, and sampling by it with the 90/10 split.

The score reads what the agent wrote in its own words: each turn's thought and its final answer,
cut into segments at blank lines (a ReAct thought is usually one segment, a long chain of thought
several). Three signals, each a share in [0, 1):

- ``repeat_share``: of the sentences of at least :data:`MIN_HYPOTHESIS_WORDS` words, the share that
  nearly repeat a sentence of an earlier segment (Jaccard of their word trigrams at least
  :data:`REPEAT_JACCARD`): a hypothesis stated again instead of tested.
- ``filler_part``: filler phrases ("hmm", "wait,", "let me check again", ...) per 100 words,
  squashed as ``rate / (rate + FILLER_HALF_RATE)``, so it is 0.5 at two fillers per 100 words.
- ``stale_share``: of all word trigrams, the share inside runs of at least :data:`MIN_STALE_RUN`
  trigrams in a row that the agent had already written: long spans that say nothing new.

``total`` weighs them 0.4, 0.2 and 0.4, so it lies in [0, 1): 0 is concise, higher loops more.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, computed_field

from datalyst.agent import ActionKind, Trajectory
from datalyst.errors import ConfigError

OVERTHINKING_VERSION = 1
"""Stored with every score, so that a score names the scorer that made it."""

SHINGLE = 3
"""Words per shingle, for both repeated hypotheses and stale spans."""
MIN_HYPOTHESIS_WORDS = 4
REPEAT_JACCARD = 0.5
MIN_STALE_RUN = 8
FILLER_HALF_RATE = 2.0
REPEAT_WEIGHT, FILLER_WEIGHT, STALE_WEIGHT = 0.4, 0.2, 0.4

FILLERS = (
    r"hm+",
    r"wait[,.!]",
    r"let me (?:check|look|think|verify|go over this) again",
    r"let me (?:double|re)[- ]?(?:check|verify)",
    r"let me re-?(?:examine|consider|think)",
    r"let me make sure",
    r"(?:just )?to be (?:sure|safe)",
    r"on second thought",
    r"once more",
)
"""Patterns (for lower-cased text) of phrases that fill a thought without moving it on."""

_Item = TypeVar("_Item")

_FILLER = re.compile(r"\b(?:" + "|".join(FILLERS) + r")(?!\w)")
_WORD = re.compile(r"\w+")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class Overthinking(BaseModel):
    """One trajectory's overthinking signals and their weighted ``total`` (0 = concise, below 1)."""

    model_config = ConfigDict(frozen=True)

    version: int = OVERTHINKING_VERSION
    words: int
    hypotheses: int
    """Sentences long enough to count as a hypothesis."""
    repeats: int
    """Of those, the ones that nearly repeat a sentence of an earlier segment."""
    fillers: int
    stale_shingles: int
    shingles: int

    @property
    def repeat_share(self) -> float:
        return self.repeats / self.hypotheses if self.hypotheses else 0.0

    @property
    def filler_rate(self) -> float:
        """Filler phrases per 100 words."""
        return 100 * self.fillers / self.words if self.words else 0.0

    @property
    def filler_part(self) -> float:
        return self.filler_rate / (self.filler_rate + FILLER_HALF_RATE)

    @property
    def stale_share(self) -> float:
        return self.stale_shingles / self.shingles if self.shingles else 0.0

    @computed_field
    @property
    def total(self) -> float:
        return REPEAT_WEIGHT * self.repeat_share + FILLER_WEIGHT * self.filler_part + STALE_WEIGHT * self.stale_share


def overthinking_score(trajectory: Trajectory) -> Overthinking:
    """Score the thoughts and the answer text of ``trajectory`` (see the module docstring)."""
    segments = [
        segment
        for turn in trajectory.turns
        for text in (turn.thought, turn.answer if turn.kind == ActionKind.ANSWER else None)
        if text
        for segment in _PARAGRAPH.split(text)
        if segment.strip()
    ]
    return score_segments(segments)


def score_segments(segments: Sequence[str]) -> Overthinking:
    """Score free text cut into reasoning segments (chains of thought from other datasets, too)."""
    earlier: list[set[tuple[str, ...]]] = []
    seen: set[tuple[str, ...]] = set()
    words = hypotheses = repeats = fillers = stale = shingles = 0
    for segment in segments:
        lowered = segment.lower()
        fillers += len(_FILLER.findall(lowered))
        tokens = _WORD.findall(lowered)
        words += len(tokens)
        sentences = [
            set(_shingle_list(sentence))
            for sentence in (_WORD.findall(part) for part in _SENTENCE.split(lowered))
            if len(sentence) >= MIN_HYPOTHESIS_WORDS
        ]
        hypotheses += len(sentences)
        repeats += sum(any(len(s & old) / len(s | old) >= REPEAT_JACCARD for old in earlier) for s in sentences)
        earlier.extend(sentences)
        run = 0
        for shingle in _shingle_list(tokens):
            shingles += 1
            if shingle in seen:
                run += 1
                continue
            stale += run if run >= MIN_STALE_RUN else 0
            run = 0
            seen.add(shingle)
        stale += run if run >= MIN_STALE_RUN else 0
    return Overthinking(
        words=words, hypotheses=hypotheses, repeats=repeats, fillers=fillers, stale_shingles=stale, shingles=shingles
    )


def _shingle_list(tokens: Sequence[str]) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)]


def sample_by_overthinking(
    items: Sequence[_Item],
    scores: Sequence[float],
    k: int,
    *,
    rng: random.Random,
    concise_share: float = 0.9,
    max_score: float | None = None,
) -> list[_Item]:
    """``k`` items: the ``concise_share`` of them with the lowest scores, the rest drawn from the others.

    Items scoring above ``max_score`` are dropped first. The concise part is ``concise_share * k``
    rounded half up; ties in score are broken at random, and the rest is drawn at random from the
    higher-scoring items (Datarus's deeper explorations). With ``k`` at least the pool, the whole pool
    is returned. The selection keeps the order of ``items``.
    """
    if len(items) != len(scores):
        raise ValueError(f"{len(items)} items but {len(scores)} scores")
    if not 0.0 <= concise_share <= 1.0:
        raise ConfigError(f"concise share {concise_share} is not between 0 and 1; use e.g. 0.9")
    if k < 0:
        raise ConfigError(f"cannot sample {k} trajectories; give a count of 0 or more")
    pool = [i for i, score in enumerate(scores) if max_score is None or score <= max_score]
    if k < len(pool):
        rng.shuffle(pool)
        pool.sort(key=lambda i: scores[i])
        n_concise = math.floor(concise_share * k + 0.5)
        pool = pool[:n_concise] + rng.sample(pool[n_concise:], k - n_concise)
    return [items[i] for i in sorted(pool)]
