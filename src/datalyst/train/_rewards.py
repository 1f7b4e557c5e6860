"""Rewards of one trajectory, as plain functions of what it did (no model, no tensors).

- :func:`datamind_reward` (with :func:`length_reward`): DataMind's Eq. 8, the answer reward shaped by length.
- :func:`tag_reward`: Datarus's structural reward, on the tags our ``datarus`` dialect writes.
- :func:`curriculum_reward`: the two blended by the curriculum weight of ``_schedules.structure_weight``.
"""

from __future__ import annotations

from collections.abc import Mapping

from datalyst.errors import ConfigError

L_MIN = 256
L_MAX = 1024
"""DataMind's length bounds, in tokens: full reward up to ``L_MIN``, half from ``L_MAX`` on."""
MALFORMED = -0.1
"""Eq. 8's reward for a wrong trajectory that also broke the format."""

STEP = "<step>"
TAG_BONUSES: Mapping[str, float] = {
    "<thought>": 0.8,
    "<action>": 0.6,
    "<action_input>": 0.4,
    "</step>": 0.2,
    "<stop_analysis>": 0.6,
}
"""Datarus's presence bonuses: reasoning weighs most, then the tool call, the code, the closing, the conclusion."""
CONCLUSION = ("<thought>", "<answer>")
CONCLUSION_BONUS = 0.2
"""Per tag of ``CONCLUSION`` found after ``<stop_analysis>`` (Datarus rewards these sequences but gives no
number; 0.2 is our choice)."""
TAG_MAX = 1.0 + sum(TAG_BONUSES.values()) + CONCLUSION_BONUS * len(CONCLUSION)
"""The raw score of a text that opens with ``<step>`` and has every tag: 4.0."""


def length_reward(length: int, *, l_min: int = L_MIN, l_max: int = L_MAX) -> float:
    """Eq. 8's ``r_length``: 1 up to ``l_min`` tokens, linearly down to 0.5 at ``l_max``, and 0.5 beyond."""
    if not 0 <= l_min < l_max:
        raise ConfigError(f"length bounds {l_min} and {l_max} must satisfy 0 <= l_min < l_max")
    if length <= l_min:
        return 1.0
    if length <= l_max:
        return 0.5 + 0.5 * (l_max - length) / (l_max - l_min)
    return 0.5


def datamind_reward(*, correct: bool, well_formed: bool, length: int, l_min: int = L_MIN, l_max: int = L_MAX) -> float:
    """DataMind's Eq. 8: ``length_reward`` when the answer is right (whatever the format), 0 when wrong but
    well formed, -0.1 when wrong and malformed.

    ``length`` is Eq. 8's ``l``: the tokens the agent itself wrote (environment output excluded).
    """
    if correct:
        return length_reward(length, l_min=l_min, l_max=l_max)
    return 0.0 if well_formed else MALFORMED


def tag_reward(text: str) -> float:
    """Datarus's structural score of the agent's own text (its turns joined, observations left out), in [0, 1].

    ``<step>`` earns ``1 - position / len(text)`` (0 when absent), so it pays to open with it; every other tag of
    ``TAG_BONUSES`` earns its bonus once when present, anywhere; and each tag of ``CONCLUSION`` earns
    ``CONCLUSION_BONUS`` when it follows the first ``<stop_analysis>``. The sum is divided by ``TAG_MAX``.
    """
    score = 1.0 - text.index(STEP) / len(text) if STEP in text else 0.0
    score += sum(bonus for tag, bonus in TAG_BONUSES.items() if tag in text)
    conclusion = text.find("<stop_analysis>")
    if conclusion >= 0:
        score += sum(CONCLUSION_BONUS for tag in CONCLUSION if tag in text[conclusion:])
    return score / TAG_MAX


def curriculum_reward(structural: float, semantic: float, structure_weight: float) -> float:
    """``structure_weight * structural + (1 - structure_weight) * semantic`` (Datarus's curriculum)."""
    if not 0.0 <= structure_weight <= 1.0:
        raise ConfigError(f"structure weight {structure_weight} must lie in [0, 1]")
    return structure_weight * structural + (1.0 - structure_weight) * semantic
