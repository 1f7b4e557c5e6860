"""The source revision that manifests and reports record."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from datalyst.provenance import git_revision, read_manifest, short_revision, write_manifest

ROOT = Path(__file__).resolve().parents[1]


def git(*arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_the_revision_is_the_checkout_and_says_when_tracked_files_changed():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    assert git_revision() == git("rev-parse", "HEAD") + ("-dirty" if dirty else "")


def test_the_short_form_keeps_the_dirty_mark():
    assert short_revision("0123456789abcdef-dirty") == "0123456789-dirty"
    assert short_revision("0123456789abcdef") == "0123456789"


def test_a_manifest_reads_back_beside_its_output(tmp_path):
    out = tmp_path / "tasks.jsonl"
    assert read_manifest(out) == {}
    assert write_manifest(out, seed=3) == tmp_path / "tasks.jsonl.manifest.json"
    assert read_manifest(out)["seed"] == 3


def test_a_resumed_manifest_keeps_its_start_and_lists_its_resumes(tmp_path):
    out = tmp_path / "samples.jsonl"
    write_manifest(out, resumed=True, seed=1)  # nothing to resume yet: a plain manifest
    first = read_manifest(out)
    assert "resumes" not in first
    write_manifest(out, resumed=True, seed=1)
    write_manifest(out, resumed=True, seed=1)
    manifest = read_manifest(out)
    assert manifest["started_at"] == first["started_at"] and manifest["git_revision"] == first["git_revision"]
    assert [r["at"] > first["started_at"] for r in manifest["resumes"]] == [True, True]
    write_manifest(out, seed=2)  # a fresh run starts a fresh manifest
    assert "resumes" not in read_manifest(out) and read_manifest(out)["seed"] == 2


def test_a_finished_run_started_again_keeps_its_result_until_it_is_written_again(tmp_path):
    out = tmp_path / "train"
    write_manifest(out, seed=1)
    path = write_manifest(out, resumed=True, seed=1, result={"loss": 0.5})
    write_manifest(out, resumed=True, seed=1)
    manifest = read_manifest(out)
    assert manifest["result"] == {"loss": 0.5} and len(manifest["resumes"]) == 2
    assert path == tmp_path / "train.manifest.json"
