"""The supervised loop SFT and the scorers share: the optimizer and its schedule, then resume, step, clip, log,
checkpoint, progress."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from datalyst.train._checkpoints import resume, save_checkpoint
from datalyst.train._data import step_batch, steps_per_epoch
from datalyst.train._log import StepLog, append_log
from datalyst.train._policy import trainable_parameters
from datalyst.train._runtime import Runtime
from datalyst.train._schedules import rate_scale

T = TypeVar("T")


class Supervised(Protocol):
    """The settings of a supervised run (SFT's and the scorers' configs have them)."""

    lr: float
    warmup_ratio: float
    weight_decay: float
    max_grad_norm: float
    epochs: int
    batch_size: int
    seed: int


Step = Callable[[Any, list[T]], tuple[float, int]]
"""Accumulates the gradients of one batch with the prepared model; returns its mean loss and input tokens."""


def train_epochs(
    out: Path, config: Supervised, module: Any, rows: Sequence[T], step: Step[T], runtime: Runtime, *,
    save_every: int, progress: bool,
) -> Any:  # fmt: skip
    """Train ``module``'s trainable parameters on ``rows`` for ``config.epochs`` in run folder ``out`` (AdamW, a
    linear warm-up then a cosine decay, clipped gradients), from its newest checkpoint if it has one, and return
    the model as ``runtime`` prepared it. Each optimizer step takes a seeded batch of ``config.batch_size`` rows."""
    total = steps_per_epoch(len(rows), config.batch_size) * config.epochs
    parameters = trainable_parameters(module)
    optimizer = runtime.torch.optim.AdamW(parameters.values(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = cosine_with_warmup(optimizer, warmup_ratio=config.warmup_ratio, total=total)
    model, optimizer = runtime.prepare(module, optimizer)
    start = resume(out, parameters, optimizer, scheduler, runtime)
    with runtime.progress(total, start, enabled=progress) as advance:
        for index in range(start, total):
            began = time.perf_counter()
            loss, tokens = step(model, step_batch(rows, index, batch_size=config.batch_size, seed=config.seed))
            lr = scheduler.get_last_lr()[0]  # the rate this step's update uses
            runtime.clip_and_step(model, optimizer, config.max_grad_norm)
            scheduler.step()
            seconds = time.perf_counter() - began
            if runtime.is_main:
                append_log(out / "log.jsonl", StepLog(step=index + 1, loss=loss, lr=lr, tokens=tokens, seconds=seconds))
            if (index + 1) % save_every == 0 or index + 1 == total:
                save_checkpoint(out, index + 1, parameters, optimizer, scheduler, runtime)
            advance(loss=loss, tokens_per_s=tokens / seconds)
    return model


def cosine_with_warmup(optimizer: Any, *, warmup_ratio: float, total: int) -> Any:
    """:func:`rate_scale` as a torch scheduler, warming up over the first ``warmup_ratio`` of ``total`` steps
    (rounded up)."""
    from torch.optim.lr_scheduler import LambdaLR

    warmup = math.ceil(warmup_ratio * total)
    return LambdaLR(optimizer, lambda step: rate_scale(step, total, warmup))
