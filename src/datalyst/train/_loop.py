"""The optimizer-step loop SFT and the scorers share: resume, step, clip, log, checkpoint, progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datalyst.train._checkpoints import resume, save_checkpoint
from datalyst.train._log import StepLog, append_log
from datalyst.train._runtime import Runtime

StepFn = Callable[[int], tuple[float, int]]
"""Accumulates the gradients of optimizer step ``k`` (from 0); returns its mean loss and input tokens."""


def train_steps(
    out: Path,
    step_fn: StepFn,
    *,
    total: int,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    parameters: dict[str, Any],
    runtime: Runtime,
    max_grad_norm: float,
    save_every: int,
    progress: bool,
) -> None:
    """Take optimizer steps up to ``total`` in run folder ``out``, from its newest checkpoint if it has one."""
    start = resume(out, parameters, optimizer, scheduler, runtime)
    with runtime.progress(total, start, enabled=progress) as advance:
        for step in range(start, total):
            began = time.perf_counter()
            loss, tokens = step_fn(step)
            lr = scheduler.get_last_lr()[0]  # the rate this step's update uses
            runtime.clip_and_step(model, optimizer, max_grad_norm)
            scheduler.step()
            seconds = time.perf_counter() - began
            if runtime.is_main:
                append_log(out / "log.jsonl", StepLog(step=step + 1, loss=loss, lr=lr, tokens=tokens, seconds=seconds))
            if (step + 1) % save_every == 0 or step + 1 == total:
                save_checkpoint(out, step + 1, parameters, optimizer, scheduler, runtime)
            advance(loss=loss, tokens_per_s=tokens / seconds)
