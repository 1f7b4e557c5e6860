"""Figures read back from a work folder: only regular PNG files inside it, never through a link."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from datalyst.agent._figures import MAX_FIGURE_BYTES, collect_figures
from datalyst.sandbox import ExecResult

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "a.png").write_bytes(PNG)
    return folder


@pytest.fixture
def host_png(tmp_path: Path) -> Path:
    """A PNG on the host, outside the work folder."""
    path = tmp_path / "host" / "private.png"
    path.parent.mkdir()
    path.write_bytes(PNG + b"host only")
    return path


def figures(work: Path, *names: str) -> dict[str, str]:
    return collect_figures(str(work), ExecResult(files_created=list(names)))


def test_figures_inside_the_folder_are_read(work):
    assert figures(work, "plots/a.png") == {"plots/a.png": base64.b64encode(PNG).decode()}


def test_a_planted_folder_link_reads_no_host_file(work, host_png):
    os.symlink("/", work / "figs")
    os.symlink(host_png.parent, work / "plots" / "host")
    assert figures(work, f"figs{host_png}", "plots/host/private.png") == {}


def test_a_planted_file_link_reads_no_host_file(work, host_png):
    os.symlink(host_png, work / "b.png")
    assert figures(work, "b.png") == {}


@pytest.mark.timeout(30)
def test_odd_files_are_skipped(work):
    os.mkfifo(work / "pipe.png")
    (work / "big.png").write_bytes(PNG + b"\x00" * MAX_FIGURE_BYTES)
    (work / "text.png").write_bytes(b"not a picture")
    assert figures(work, "pipe.png", "big.png", "text.png", "plots", "../work/plots/a.png") == {}
