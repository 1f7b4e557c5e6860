"""Where training runs: one process or several (``accelerate launch``), CPU or GPU, bfloat16 or float32.

A thin layer over ``accelerate.Accelerator`` giving the trainers what they need by name: the
device, this process's rank, gradient accumulation without needless synchronisation, sums across
processes, and random states to checkpoint. ``auto`` precision is bfloat16 autocast where the
hardware computes it natively (a CPU with AVX512-BF16 or AMX, a GPU that reports bf16), float32 elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.progress import progress_bar

INSTALL_FIX = "pip install 'datalyst[hf,train]'"


class Runtime:
    """The accelerator of this process and the few operations the trainers take from it."""

    def __init__(self, accelerator: Any, torch: Any, precision: str) -> None:
        self.accelerator = accelerator
        self.torch = torch
        self.precision = precision
        """``bf16`` or ``fp32``: what ``auto`` resolved to."""
        self.device = str(accelerator.device)
        self.rank: int = accelerator.process_index
        self.world_size: int = accelerator.num_processes
        self.is_main: bool = accelerator.is_main_process

    def prepare(self, model: Any, optimizer: Any) -> tuple[Any, Any]:
        """The model and optimizer wrapped for this set-up (DDP across processes)."""
        return self.accelerator.prepare(model, optimizer)

    def unwrap(self, model: Any) -> Any:
        return self.accelerator.unwrap_model(model)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """bfloat16 autocast when the precision is ``bf16`` (done here, not by accelerate, whose precision is
        fixed once per process: one process can then train at both precisions, as the benchmark does)."""
        device_type = "cuda" if self.device.startswith("cuda") else "cpu"
        return self.torch.autocast(device_type, dtype=self.torch.bfloat16, enabled=self.precision == "bf16")

    @property
    def sharded_optimizer(self) -> bool:
        """Under DeepSpeed ZeRO each process holds only its part of the optimizer state."""
        return self.accelerator.distributed_type == "DEEPSPEED"

    def accumulating(self, model: Any, *, last: bool) -> contextlib.AbstractContextManager[None]:
        """Skip the gradient all-reduce on every micro-batch but the last of a step."""
        if self.sharded_optimizer:
            # DeepSpeed reduces and steps inside backward at an accumulation boundary: mark the step's last one.
            self.accelerator.gradient_state._set_sync_gradients(last)
            return contextlib.nullcontext()
        return contextlib.nullcontext() if last or self.world_size == 1 else self.accelerator.no_sync(model)

    def backward(self, loss: Any) -> None:
        self.accelerator.backward(loss)

    def clip_and_step(self, model: Any, optimizer: Any, max_norm: float) -> float:
        """Clip the gradient norm, take the optimizer step and clear the gradients; the norm before clipping."""
        norm = self.accelerator.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def sum(self, value: float) -> float:
        """``value`` summed over every process."""
        if self.world_size == 1:
            return value
        tensor = self.torch.tensor([value], dtype=self.torch.float64, device=self.accelerator.device)
        return float(self.accelerator.reduce(tensor, reduction="sum").item())

    def random_state(self) -> dict[str, Any]:
        """This process's random generators (Python, torch and, on a GPU, CUDA), for a checkpoint."""
        state = {"python": random.getstate(), "torch": self.torch.get_rng_state()}
        if self.torch.cuda.is_available():
            state["cuda"] = self.torch.cuda.get_rng_state_all()
        return state

    def set_random_state(self, state: dict[str, Any]) -> None:
        random.setstate(state["python"])
        self.torch.set_rng_state(state["torch"])
        if "cuda" in state and self.torch.cuda.is_available():
            self.torch.cuda.set_rng_state_all(state["cuda"])

    @contextlib.contextmanager
    def progress(self, total: int, done: int, *, enabled: bool) -> Iterator[Callable[..., None]]:
        """A progress bar over optimizer steps (main process only); yields ``advance(**figures)``."""
        with progress_bar("{task.fields[figures]}", eta=True, enabled=enabled and self.is_main) as bar:
            task = bar.add_task("step", total=total, completed=done, figures="")

            def advance(**figures: float) -> None:
                bar.update(task, advance=1, figures=" ".join(f"{k} {v:.4g}" for k, v in figures.items()))

            yield advance


_LIBC_PATH = ctypes.util.find_library("c") if sys.platform == "linux" else None
_MALLOC_TRIM = getattr(ctypes.CDLL(_LIBC_PATH), "malloc_trim", None) if _LIBC_PATH else None
"""glibc's ``malloc_trim`` (None on other C libraries and systems)."""


def release_memory() -> None:
    """Give the pages of freed blocks back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    Activations of ever-different lengths leave holes in glibc's heaps: an SFT run of the small model whose
    longest example needs about 14 GB grew to this machine's 24 GB and was killed in its tenth step. Trimming
    once per optimizer step still let one step's eight passes grow to 23 GB; the trainers trim after every
    forward and backward pass, which held that run under 17 GB with steps no slower."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def start_runtime(precision: str, *, seed: int) -> Runtime:
    """The runtime of this process, with every random generator seeded from ``seed`` (plus the rank)."""
    try:
        import accelerate
        import torch
    except ModuleNotFoundError as exc:
        raise ModelUnavailable(f"training needs {exc.name}; {INSTALL_FIX}") from None
    resolved = resolve_precision(precision, torch)
    accelerator = accelerate.Accelerator(cpu=not torch.cuda.is_available())
    accelerate.utils.set_seed(seed + accelerator.process_index)
    return Runtime(accelerator, torch, resolved)


def resolve_precision(precision: str, torch: Any) -> str:
    """``bf16`` or ``fp32`` for ``precision`` (``auto``, ``bf16`` or ``fp32``) on this hardware."""
    if precision not in ("auto", "bf16", "fp32"):
        raise ConfigError(f"precision {precision!r} is not one of auto, bf16, fp32")
    if precision != "auto":
        return precision
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"
