"""Reading a file of the work folder on the host: no link is ever followed, nothing outside is reached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datalyst.sandbox import _paths, open_in_workdir


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the kernel's ``openat2`` (where it exists) and with the component walk."""
    if request.param == "walk":
        monkeypatch.setattr(_paths, "_openat2_works", False)
    elif not _paths.openat2_available():
        pytest.skip("this kernel has no openat2")
    return request.param


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(work folder, a secret file beside it) with a plain file and a sub-folder inside the work folder."""
    work = tmp_path / "work"
    (work / "plots").mkdir(parents=True)
    (work / "a.png").write_bytes(b"mine")
    (work / "plots" / "b.png").write_bytes(b"also mine")
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"SECRET")
    return work, secret


def read(work: Path, relpath: str) -> bytes:
    with open_in_workdir(str(work), relpath) as f:
        return f.read()


def test_plain_files_and_sub_folders_are_read(resolver, layout):
    work, _ = layout
    assert read(work, "a.png") == b"mine"
    assert read(work, "plots/b.png") == b"also mine"
    assert read(work, "./plots//b.png") == b"also mine"


@pytest.mark.parametrize(
    "plant",
    [
        pytest.param(lambda work, secret: os.symlink(secret, work / "x.png"), id="file-link"),
        pytest.param(lambda work, secret: os.symlink(secret.parent, work / "x.png"), id="folder-link-as-name"),
        pytest.param(lambda work, secret: os.symlink("/", work / "root"), id="link-to-root"),
        pytest.param(lambda work, secret: os.symlink(secret.parent, work / "up"), id="folder-link"),
        pytest.param(lambda work, secret: os.symlink("../..", work / "plots" / "up"), id="relative-folder-link"),
    ],
)
def test_no_link_is_followed(resolver, layout, plant):
    work, secret = layout
    plant(work, secret)
    attempts = ["x.png", f"root{secret}", "up/secret.png", "plots/up/secret.png"]
    for relpath in attempts:
        with pytest.raises(OSError):
            read(work, relpath)


@pytest.mark.parametrize("relpath", ["../secret.png", "plots/../../secret.png", "", ".", "plots"])
def test_paths_that_leave_the_folder_or_name_no_file_are_refused(resolver, layout, relpath):
    work, _ = layout
    with pytest.raises(OSError):
        read(work, relpath)


def test_absolute_paths_are_refused(resolver, layout):
    work, secret = layout
    with pytest.raises(OSError):
        read(work, str(secret))
    with pytest.raises(OSError):
        read(work, str(work / "a.png"))


@pytest.mark.timeout(30)
def test_a_fifo_is_refused_without_waiting_for_a_writer(resolver, layout):
    work, _ = layout
    os.mkfifo(work / "pipe.png")
    with pytest.raises(OSError):
        read(work, "pipe.png")


def test_a_folder_without_read_permission_can_still_be_crossed(resolver, layout):
    work, _ = layout
    (work / "plots").chmod(0o100)  # search only, as a cell may leave it
    try:
        assert read(work, "plots/b.png") == b"also mine"
    finally:
        (work / "plots").chmod(0o700)
