"""Where results come from: run manifests and the source revision they and reports record."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datalyst import __version__
from datalyst.files import write_atomic

DIRTY = "-dirty"
_command: dict[str, Any] = {}
"""How the running command was called (:func:`record_command`), for the manifests it writes."""


def write_manifest(out_path: Path, *, resumed: bool = False, **fields: Any) -> Path:
    """Record beside ``out_path`` how it is being made (:func:`new_manifest`); returns the manifest's path
    (``<out>.manifest.json``). A ``resumed`` output keeps what its earlier manifest holds (a finished run's
    result too, until it is written again), with the time and revision it started under, and adds this start to
    its ``resumes``."""
    path = manifest_path(out_path)
    earlier = read_manifest(out_path) if resumed else {}
    manifest = earlier | new_manifest(**fields)
    if "started_at" in earlier:
        resume = {"at": manifest["started_at"], "git_revision": manifest["git_revision"]}
        manifest |= {
            "started_at": earlier["started_at"],
            "git_revision": earlier.get("git_revision"),
            "resumes": [*earlier.get("resumes", []), resume],
        }
    write_atomic(path, json.dumps(manifest, indent=2))
    return path


def new_manifest(**fields: Any) -> dict[str, Any]:
    """``fields`` (config, seed, counts) with the datalyst version, the git revision, the time and, from the
    command line, the command."""
    return {
        "datalyst_version": __version__,
        "git_revision": git_revision(),
        "started_at": datetime.now(UTC).isoformat(),
        **({"command": _command} if _command else {}),
        **fields,
    }


def record_command(arguments: list[str], config_file: Path | None, options: dict[str, Any]) -> None:
    """Remember the command being run (its ``arguments``, and the ``config_file`` it read with the ``options`` it
    held), so that the manifests it writes say how their run was asked for."""
    _command.clear()
    _command.update(arguments=arguments)
    if config_file is not None:
        _command.update(config_file=str(config_file), config_options=options)


def manifest_path(out_path: Path) -> Path:
    """Where the manifest of ``out_path`` lives: ``<out>.manifest.json`` beside it."""
    return out_path.with_name(out_path.name + ".manifest.json")


def read_manifest(out_path: Path) -> dict[str, Any]:
    """The manifest of ``out_path`` ({} when there is none; ValueError when it is not JSON)."""
    path = manifest_path(out_path)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def git_revision() -> str | None:
    """The git commit of the datalyst source in use, ending in ``-dirty`` when tracked files differ from it
    (None for an installed copy outside a checkout)."""
    revision = _git("rev-parse", "HEAD")
    if not revision:
        return None
    return revision + (DIRTY if _git("status", "--porcelain", "--untracked-files=no") else "")


def short_revision(revision: str) -> str:
    """The first ten characters of the commit, keeping the ``-dirty`` mark."""
    return revision[:10] + (DIRTY if revision.endswith(DIRTY) else "")


def _git(*arguments: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *arguments],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()
