"""Datarus's trajectory strata, and a selection that follows a target mix of them."""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TypeVar

from datalyst.agent import ActionKind, Trajectory
from datalyst.curate._records import Stratum
from datalyst.errors import ConfigError

DATARUS_MIX: Mapping[Stratum, float] = {
    Stratum.SUCCESS: 0.40,
    Stratum.ERROR_CORRECTION: 0.35,
    Stratum.SELF_CORRECTION: 0.15,
    Stratum.PERSISTENT_FAILURE: 0.10,
}
"""The split of Datarus's 144,000 trajectories."""

CORRECTIONS = (
    r"\b(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not right|off)\b",
    r"\b(?:that|this) (?:can't|cannot|doesn't|does not) (?:be|look|seem) right\b",
    r"\bI (?:made|have made) (?:a|an) (?:mistake|error)\b",
    r"\bmy (?:mistake|error)\b",
    r"\bI (?:used|took|picked|chose|computed|filtered|grouped|read|summed|counted) the wrong\b",
    r"\b(?:wrong|incorrect) (?:column|result|value|filter|number|total|count|calculation|approach|answer)\b",
    r"\bI should have\b",
    r"\bshould (?:be|have been) [^.!?\n]*\binstead\b",
    r"\bI (?:forgot|missed|overlooked|misread|misunderstood)\b",
    r"\blet me (?:fix|correct) (?:that|this|it)\b",
    r"\b(?:recompute|recalculate|redo)\b",
)
"""Patterns (case-insensitive) of a thought saying that an earlier result was wrong."""

_CORRECTION = re.compile("|".join(CORRECTIONS), re.IGNORECASE)
_Item = TypeVar("_Item")


def stratum(trajectory: Trajectory, correct: bool) -> Stratum:
    """The stratum of ``trajectory``, whose final answer is ``correct`` or not.

    - persistent failure: the answer is not correct (or there is none);
    - error correction: it is correct, and some code cell failed on the way (its result is not ok);
    - self-correction: it is correct, no cell failed, and a thought that follows a cell which ran
      fine says that a result was wrong (one of :data:`CORRECTIONS`);
    - success: correct at once.
    """
    if not correct:
        return Stratum.PERSISTENT_FAILURE
    turns = trajectory.turns
    if any(turn.cell_failed for turn in turns):
        return Stratum.ERROR_CORRECTION
    for before, turn in itertools.pairwise(turns):
        if before.kind == ActionKind.CODE and before.result is not None and _CORRECTION.search(turn.thought):
            return Stratum.SELF_CORRECTION
    return Stratum.SUCCESS


def mix_strata(
    items: Sequence[_Item], strata: Sequence[Stratum], target: Mapping[Stratum, float], *, rng: random.Random
) -> list[_Item]:
    """The largest selection of ``items`` whose strata follow the ``target`` shares, drawn at random.

    Strata with no share, and strata with no items (no selection can hold any), are left out, and
    the other shares are normalised to sum to 1. A total ``n`` is split among them by largest
    remainders (ties go to the stratum listed first in :class:`Stratum`), and the selection has the
    largest ``n`` whose split asks no stratum for more items than it has: so the scarcest stratum,
    for its share, sets the size. The selection keeps the order of ``items``.
    """
    if len(items) != len(strata):
        raise ValueError(f"{len(items)} items but {len(strata)} strata")
    if any(share < 0 for share in target.values()) or not any(share > 0 for share in target.values()):
        raise ConfigError(f"target mix {dict(target)} needs shares of 0 or more, one of them above 0")
    members: dict[Stratum, list[int]] = {}
    for index, s in enumerate(strata):
        if target.get(s, 0) > 0:
            members.setdefault(s, []).append(index)
    if not members:
        return []
    total = sum(Fraction(str(target[s])) for s in members)
    shares = {s: Fraction(str(target[s])) / total for s in Stratum if s in members}
    # No split of n fits once a stratum's floor(share * n) exceeds its count.
    n = min(sum(len(m) for m in members.values()), *(math.floor((len(members[s]) + 1) / shares[s]) for s in shares))
    while any(count > len(members[s]) for s, count in _split(n, shares).items()):
        n -= 1
    chosen = [index for s, count in _split(n, shares).items() for index in rng.sample(members[s], count)]
    return [items[index] for index in sorted(chosen)]


def _split(n: int, shares: Mapping[Stratum, Fraction]) -> dict[Stratum, int]:
    """``n`` apportioned by ``shares`` with largest remainders."""
    quotas = {s: n * share for s, share in shares.items()}
    counts = {s: math.floor(quota) for s, quota in quotas.items()}
    order = list(shares)
    for s in sorted(order, key=lambda s: (counts[s] - quotas[s], order.index(s)))[: n - sum(counts.values())]:
        counts[s] += 1
    return counts
