"""LoRA adapters in specs (``embedded:small?adapter=PATH``), finding the GGUF a path names, and the llama.cpp
source tree the converter comes from, and the adapter datalyst ships; one test loads a model."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import pytest

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import ADAPTER_GGUF, ModelSpec, _embedded, _source, ensure_model, llama_cpp_source, load_model
from datalyst.llm._cache import model_identity
from datalyst.llm._embedded import adapter_path, get_model
from datalyst.llm._gguf import find_adapter

RELEASE = "0.3.36"


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


@pytest.fixture
def peft_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder


def test_the_adapter_option_parses_and_writes_back():
    spec = ModelSpec.parse("embedded:small?adapter=runs/sft/adapter&n_ctx=4096")
    assert spec.options == {"adapter": "runs/sft/adapter", "n_ctx": 4096}
    assert ModelSpec.parse(str(spec)) == spec


def test_a_gguf_file_is_its_own_adapter(fake_gguf):
    assert find_adapter(fake_gguf) == fake_gguf


def test_a_converted_peft_folder_gives_its_gguf(peft_folder, fake_gguf):
    converted = peft_folder / ADAPTER_GGUF
    converted.write_bytes(fake_gguf.read_bytes())
    assert find_adapter(peft_folder) == converted


def test_a_peft_folder_without_its_conversion_names_the_converter(peft_folder):
    with pytest.raises(ConfigError, match=rf"holds no {ADAPTER_GGUF} .*adapter_to_gguf"):
        find_adapter(peft_folder)


def test_a_conversion_older_than_the_weights_is_refused(peft_folder, fake_gguf):
    converted = peft_folder / ADAPTER_GGUF
    converted.write_bytes(fake_gguf.read_bytes())
    os.utime(converted, (1_000_000, 1_000_000))
    with pytest.raises(ConfigError, match=r"is older than adapter_model\.safetensors .* again"):
        find_adapter(peft_folder)


def test_a_missing_or_foreign_adapter_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        find_adapter(tmp_path / "nowhere.gguf")
    (tmp_path / "adapter.bin").write_bytes(b"PK\x03\x04")
    with pytest.raises(ConfigError, match="is not a GGUF file"):
        find_adapter(tmp_path / "adapter.bin")


def test_the_llamacpp_backend_checks_the_adapter_before_loading_anything(fake_gguf, tmp_path):
    with pytest.raises(ConfigError, match=f"adapter {tmp_path / 'none.gguf'} does not exist"):
        load_model(f"gguf:{fake_gguf}?adapter={tmp_path / 'none.gguf'}")


def test_an_unknown_option_lists_adapter_among_the_accepted(fake_gguf):
    with pytest.raises(ConfigError, match="accepts: n_ctx, n_threads, n_batch, parallel, adapter"):
        load_model(f"gguf:{fake_gguf}?adaptor=x.gguf")


# -- llama.cpp's source tree


@pytest.fixture
def cache(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_source, "version", lambda package: RELEASE)
    return tmp_path / "cache"


def sdist(where: Path) -> Path:
    """A source archive laid out like llama-cpp-python's: the binding's files and ``vendor/llama.cpp``."""
    archive = where / f"llama_cpp_python-{RELEASE}.tar.gz"
    top = f"llama_cpp_python-{RELEASE}"
    files = {
        f"{top}/llama_cpp/llama_cpp.py": b"binding",
        f"{top}/vendor/llama.cpp/convert_lora_to_gguf.py": b"script",
        f"{top}/vendor/llama.cpp/gguf-py/gguf/__init__.py": b"gguf",
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_the_source_is_downloaded_once_and_only_llama_cpp_is_kept(cache, monkeypatch):
    calls = []

    def download(release: str, into: Path) -> Path:
        calls.append(release)
        return sdist(into)

    monkeypatch.setattr(_source, "_download", download)
    tree = llama_cpp_source()
    assert tree == cache / "llama.cpp" / RELEASE
    assert (tree / "convert_lora_to_gguf.py").read_bytes() == b"script"
    assert (tree / "gguf-py" / "gguf" / "__init__.py").is_file()
    assert not list(cache.rglob("llama_cpp.py"))  # the binding's own files are not extracted
    assert llama_cpp_source() == tree
    assert calls == [RELEASE]
    assert [path.name for path in tree.parent.iterdir()] == [RELEASE]  # no temporary folder left


def test_pip_failures_read_as_one_line(cache, monkeypatch):
    seen = {}

    def fake_run(command, **kwargs):
        seen["command"] = command
        stderr = "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError'\nERROR: nope\n"
        return subprocess.CompletedProcess(command, 1, "", stderr)

    monkeypatch.setattr(_embedded.subprocess, "run", fake_run)
    with pytest.raises(ModelUnavailable) as info:
        llama_cpp_source()
    message = str(info.value)
    assert message.startswith(f"Cannot download llama-cpp-python=={RELEASE}: pip could not connect")
    assert "\n" not in message
    assert seen["command"][:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-binary" in seen["command"] and seen["command"][-1] == f"llama-cpp-python=={RELEASE}"
    assert not (cache / "llama.cpp" / RELEASE).exists()


def test_without_llama_cpp_python_the_source_names_the_install(cache, monkeypatch):
    def missing(package: str) -> str:
        raise PackageNotFoundError(package)

    monkeypatch.setattr(_source, "version", missing)
    with pytest.raises(ModelUnavailable, match=r"llama-cpp-python, which is missing; .*pip install"):
        llama_cpp_source()


def test_a_retrained_adapter_at_the_same_path_changes_the_cache_identity(fake_gguf, peft_folder):
    spec = f"gguf:{fake_gguf}?adapter={peft_folder}"
    before = model_identity(spec)
    (peft_folder / "adapter_model.safetensors").write_bytes(b"retrained weights")
    assert model_identity(spec) != before
    assert model_identity(f"gguf:{fake_gguf}") == {"spec": f"gguf:{fake_gguf}", "files": before["files"]}


# -- the trained model datalyst ships (embedded:small-sft)


def test_the_shipped_adapter_is_part_of_the_trained_model_s_cache_identity():
    shipped = adapter_path(get_model("small-sft"))
    assert shipped is not None
    digest = hashlib.sha256(shipped.read_bytes()).hexdigest()  # its content: a clone's mtimes differ
    assert model_identity("embedded:small-sft")["adapter_files"] == [("", shipped.stat().st_size, digest)]
    assert "adapter_files" not in model_identity("embedded:small")


def test_the_trained_model_takes_no_second_adapter():
    with pytest.raises(ConfigError, match="embedded:small-sft already applies its own adapter"):
        load_model("embedded:small-sft?adapter=runs/sft/adapter")


@pytest.mark.model
def test_the_trained_model_loads_small_s_weights_with_its_shipped_adapter():
    model = load_model("embedded:small-sft")
    try:
        assert model.spec == "embedded:small-sft" and model.adapter == adapter_path(get_model("small-sft"))
        assert model.path == ensure_model("small")
    finally:
        model.close()
