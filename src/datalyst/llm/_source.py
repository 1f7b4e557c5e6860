"""The llama.cpp source tree of the installed ``llama-cpp-python``, for its Python converters and tools.

``llama-cpp-python`` builds the llama.cpp it carries in its source distribution, but its wheel keeps
none of llama.cpp's scripts (``convert_lora_to_gguf.py``, ``gguf-py``) or tools (``llama-bench``).
:func:`llama_cpp_source` downloads that source distribution of the installed release with pip (pip's
own index settings and cache apply), extracts its ``vendor/llama.cpp`` once into
``cache_dir()/llama.cpp/RELEASE``, and gives that folder: the same llama.cpp our backend runs.
"""

from __future__ import annotations

import tarfile
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from datalyst.errors import ModelUnavailable
from datalyst.llm._cpu import INSTALL_FIX
from datalyst.llm._embedded import pip_download
from datalyst.paths import cache_dir

__all__ = ["llama_cpp_source"]

PACKAGE = "llama-cpp-python"
VENDORED = "vendor/llama.cpp"


def llama_cpp_source() -> Path:
    """The llama.cpp folder of the installed ``llama-cpp-python`` release, downloaded and extracted on first use.

    ModelUnavailable when llama-cpp-python is not installed or its source distribution cannot be downloaded.
    """
    try:
        release = version(PACKAGE)
    except PackageNotFoundError:
        raise ModelUnavailable(
            f"llama.cpp's source is taken from the installed {PACKAGE}, which is missing; {INSTALL_FIX}"
        ) from None
    target = cache_dir() / "llama.cpp" / release
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{release}-", dir=target.parent) as work:
        extracted = _extract(_download(release, Path(work)), Path(work) / "tree")
        try:
            extracted.rename(target)
        except OSError:
            if not target.is_dir():  # another process extracting the same release won the race: use its copy
                raise
    return target


def _download(release: str, into: Path) -> Path:
    """The source distribution of ``llama-cpp-python==release``, downloaded by pip into ``into``."""
    where = f"{PACKAGE}=={release}"
    archives = [path for path in pip_download(where, into, "--no-binary", ":all:") if path.name.endswith(".tar.gz")]
    if len(archives) != 1:
        raise ModelUnavailable(f"Cannot download the source of {where}: pip saved no source archive; try again.")
    return archives[0]


def _extract(archive: Path, into: Path) -> Path:
    """Extract only the archive's ``vendor/llama.cpp`` tree under ``into``; that folder."""
    with tarfile.open(archive) as tar:
        members = [member for member in tar.getmembers() if f"/{VENDORED}/" in f"{member.name}/"]
        if not members:
            raise ModelUnavailable(f"{archive.name} holds no {VENDORED}; this {PACKAGE} release cannot be used here")
        tar.extractall(into, members=members, filter="data")
    return next(into.glob(f"*/{VENDORED}"))
