"""write_atomic: whole files only, for readers and for concurrent writers."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from datalyst.files import write_atomic


def test_writes_text_and_bytes_and_makes_parent_folders(tmp_path):
    target = tmp_path / "a" / "b" / "report.md"
    write_atomic(target, "héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    write_atomic(target, b"\x89PNG")
    assert target.read_bytes() == b"\x89PNG"
    assert os.listdir(target.parent) == ["report.md"]  # no temporary left behind


def test_the_file_gets_the_permissions_open_would_give_it(tmp_path):
    target, plain = tmp_path / "adapter.json", tmp_path / "plain.json"
    write_atomic(target, "{}")
    plain.write_text("{}")
    assert target.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 != 0o600


def test_a_failed_write_keeps_the_old_file_and_cleans_up(tmp_path, monkeypatch):
    target = tmp_path / "outcomes.jsonl"
    target.write_text("old\n")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["outcomes.jsonl"]


def test_concurrent_writers_each_leave_a_whole_file(tmp_path):
    target = tmp_path / "report.json"
    payloads = [str(i) * 200_000 for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: write_atomic(target, p), payloads * 3))
    assert target.read_text() in payloads
    assert os.listdir(tmp_path) == ["report.json"]
