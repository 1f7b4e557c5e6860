"""Checkpoints that resume a run exactly: trainable weights, optimizer, scheduler and random states.

``checkpoints/step-NNNNNN/`` holds ``trainable.safetensors`` (only what the optimizer updates: the
LoRA layers, or every weight in full fine-tuning), ``optimizer.pt`` (one per process under DeepSpeed
ZeRO, whose processes each hold a shard), ``scheduler.pt``, one
``random-RANK.pt`` per process and, written last, ``state.json``: a folder without it is an interrupted
save and is ignored. The data order needs nothing saved: it is a function of the seed and the step.
Only the newest ``KEEP`` checkpoints are kept.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from datalyst.errors import ConfigError, DataFileError
from datalyst.files import write_atomic
from datalyst.provenance import git_revision, manifest_path, new_manifest, read_manifest, write_manifest
from datalyst.train._log import trim_log

KEEP = 2
STATE = "state.json"


def start_run(out: Path, config: BaseModel) -> None:
    """Write ``config.json`` and ``train.manifest.json`` (the revision and time the run starts under) in a new
    run folder; in an existing one, refuse a config that differs from it and add this start to the manifest's
    ``resumes``."""
    path = out / "config.json"
    if path.exists():
        saved = type(config).model_validate_json(path.read_text(encoding="utf-8"))
        if saved != config:
            changed = sorted(k for k in type(config).model_fields if getattr(saved, k) != getattr(config, k))
            raise ConfigError(
                f"{out} holds a run with other settings ({', '.join(changed)}); resume it with the same settings "
                "or choose a new --out folder"
            )
        write_manifest(out / "train", resumed=True, config=config.model_dump())
        return
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, config.model_dump_json(indent=2))
    write_manifest(out / "train", config=config.model_dump())


def finish_run(out: Path, config: BaseModel, result: BaseModel, **fields: Any) -> None:
    """Complete the run's manifest with ``result``, ``fields`` and the revision and time it finished under;
    the revision and time it started under stay as ``start_run`` wrote them."""
    # a run folder from before manifests were written at the start has none yet
    manifest = read_manifest(out / "train") or new_manifest(config=config.model_dump())
    manifest |= {
        "finished_at": datetime.now(UTC).isoformat(),
        "finished_git_revision": git_revision(),
        "result": json.loads(result.model_dump_json()),
        **fields,
    }
    write_atomic(manifest_path(out / "train"), json.dumps(manifest, indent=2))


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint in run folder ``out``, or None."""
    complete = sorted(path.parent for path in (out / "checkpoints").glob(f"step-*/{STATE}"))
    return complete[-1] if complete else None


def save_checkpoint(
    out: Path, step: int, parameters: dict[str, Any], optimizer: Any, scheduler: Any, runtime: Any
) -> Path:
    """Save the state after ``step`` optimizer steps and drop all but the newest ``KEEP`` checkpoints."""
    from safetensors.torch import save_file

    folder = out / "checkpoints" / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    runtime.torch.save(runtime.random_state(), folder / f"random-{runtime.rank}.pt")
    if runtime.sharded_optimizer:
        runtime.torch.save(optimizer.state_dict(), folder / _optimizer_file(runtime))
    runtime.accelerator.wait_for_everyone()
    if runtime.is_main:
        save_file(
            {name: p.detach().contiguous().cpu() for name, p in parameters.items()}, folder / "trainable.safetensors"
        )
        if not runtime.sharded_optimizer:
            runtime.torch.save(optimizer.state_dict(), folder / _optimizer_file(runtime))
        runtime.torch.save(scheduler.state_dict(), folder / "scheduler.pt")
        write_atomic(folder / STATE, json.dumps({"step": step, "processes": runtime.world_size}))
        for old in sorted(path.parent for path in (out / "checkpoints").glob(f"step-*/{STATE}"))[:-KEEP]:
            shutil.rmtree(old)
    runtime.accelerator.wait_for_everyone()
    return folder


def load_checkpoint(folder: Path, parameters: dict[str, Any], optimizer: Any, scheduler: Any, runtime: Any) -> int:
    """Restore the state saved in ``folder`` into the live objects; the number of steps already taken."""
    from safetensors.torch import load_file

    state = json.loads((folder / STATE).read_text(encoding="utf-8"))
    if state["processes"] != runtime.world_size:
        raise DataFileError(
            f"{folder} was saved by {state['processes']} processes, and this run has {runtime.world_size}; "
            "resume with the same number of processes"
        )
    saved = load_file(folder / "trainable.safetensors")
    if saved.keys() != parameters.keys():
        raise DataFileError(f"{folder} holds other trainable weights than this model has; start a new --out folder")
    with runtime.torch.no_grad():
        for name, parameter in parameters.items():
            parameter.copy_(saved[name])
    optimizer.load_state_dict(
        runtime.torch.load(folder / _optimizer_file(runtime), weights_only=not runtime.sharded_optimizer)
    )
    scheduler.load_state_dict(runtime.torch.load(folder / "scheduler.pt", weights_only=True))
    runtime.set_random_state(runtime.torch.load(folder / f"random-{runtime.rank}.pt", weights_only=False))
    return int(state["step"])


def _optimizer_file(runtime: Any) -> str:
    """One optimizer file, or one per process when each holds only its shard of the state (ZeRO)."""
    return f"optimizer-{runtime.rank}.pt" if runtime.sharded_optimizer else "optimizer.pt"


def resume(out: Path, parameters: dict[str, Any], optimizer: Any, scheduler: Any, runtime: Any) -> int:
    """Restore run folder ``out``'s newest checkpoint, if any, and cut its log back to it; the steps already done."""
    checkpoint = latest_checkpoint(out)
    if checkpoint is None:
        return 0
    done = load_checkpoint(checkpoint, parameters, optimizer, scheduler, runtime)
    trim_log(out / "log.jsonl", done)
    return done
