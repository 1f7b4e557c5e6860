"""A finished run's LoRA adapter packed to ship: one GGUF file for llama.cpp and, beside it, how it was made.

The manifest (``NAME.json`` beside ``NAME.gguf``) holds the file's sha256 and tensor type, the run's own
manifest (config, seed, result, git revision), the ids of the examples it trained on, its loss per step,
and the manifests its data points back to: the export that wrote the examples and the curation run it
read, where they are still on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from datalyst.errors import ConfigError
from datalyst.files import write_atomic
from datalyst.provenance import read_manifest
from datalyst.train._convert import OutType, adapter_to_gguf
from datalyst.train._log import read_log


def package_adapter(run: str | os.PathLike[str], out: str | os.PathLike[str], *, outtype: OutType = "f16") -> Path:
    """Convert the adapter of the finished run ``run`` to ``out`` (a ``.gguf`` path) and write its manifest
    as ``out`` with the suffix ``.json``; returns the manifest's path."""
    folder, target = Path(run), Path(out)
    trained = read_manifest(folder / "train")
    if "result" not in trained or not (folder / "adapter").is_dir():
        raise ConfigError(f"{folder} holds no finished LoRA run (train.manifest.json and adapter/); finish it first")
    base = trained["config"]["model"]
    adapter_to_gguf(folder / "adapter", target, base=base, outtype=outtype)
    manifest = {
        "adapter": {
            "file": target.name,
            "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
            "bytes": target.stat().st_size,
            "outtype": outtype,
            "base": base,
        },
        "train": trained,
        "examples": (folder / "examples.txt").read_text("utf-8").split() if (folder / "examples.txt").exists() else [],
        "log": [entry.model_dump() for entry in read_log(folder / "log.jsonl")],
        **_data_manifests(trained["config"].get("data")),
    }
    path = target.with_suffix(".json")
    write_atomic(path, json.dumps(manifest, indent=2) + "\n")
    return path


def _data_manifests(data: str | None) -> dict[str, Any]:
    """The export manifest of the run's examples and the manifests of the curation run they came from."""
    if data is None or not (export := read_manifest(Path(data) / "export")):
        return {}
    manifests = sorted(Path(export["run"]).glob("*.manifest.json")) if export.get("run") else []
    upstream = {path.name.removesuffix(".manifest.json"): json.loads(path.read_text("utf-8")) for path in manifests}
    return {"export": export, "curation": upstream}
