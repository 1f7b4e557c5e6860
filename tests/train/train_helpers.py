"""Training examples written by hand for the training tests (imported by the test modules of this folder)."""

from __future__ import annotations

import random
from pathlib import Path

from datalyst.agent import TrainingExample


def write_examples(path: Path, count: int = 6, *, vocab: int = 250, seed: int = 0) -> Path:
    """``count`` examples of 20-40 tokens: a prompt the loss skips, then an answer it trains on."""
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        prompt, answer = rng.randint(10, 25), rng.randint(5, 15)
        ids = [rng.randrange(3, vocab) for _ in range(prompt + answer)]
        mask = [0] * prompt + [1] * answer
        lines.append(TrainingExample(trajectory_id=f"t{index}", input_ids=ids, loss_mask=mask).model_dump_json())
    path.write_text("\n".join(lines) + "\n")
    return path
