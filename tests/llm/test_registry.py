"""load_model: the backend for each kind, imported lazily, with clear errors when it cannot be."""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import pytest

from datalyst.errors import ConfigError, ModelUnavailable
from datalyst.llm import _registry
from datalyst.llm._base import ChatModel
from datalyst.llm._registry import load_model
from datalyst.llm._replay import ReplayModel
from datalyst.llm._spec import ModelKind, ModelSpec


class FakeLlamaCpp(ReplayModel):
    """Stands in for the llama.cpp backend: remembers the spec it was built from."""

    built_from: ClassVar[list[ModelSpec]] = []

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> FakeLlamaCpp:
        cls.built_from.append(spec)
        spec.check_options({"n_ctx": int, "adapter": str})
        return cls([], spec=str(spec))


@pytest.fixture
def fake_modules(monkeypatch, tmp_path):
    """Backends and the embedded-model registry replaced by modules of this test."""
    backend = types.ModuleType("fake_llamacpp_backend")
    backend.FakeLlamaCpp = FakeLlamaCpp
    embedded = types.ModuleType("fake_embedded")
    embedded.ensure_model = lambda name: tmp_path / f"{name}.gguf"
    embedded.get_model = lambda name: types.SimpleNamespace(
        name=name, context_tokens=4096, adapter="trained.gguf" if name == "trained" else None
    )
    embedded.adapter_path = lambda model: tmp_path / "adapters" / model.adapter
    monkeypatch.setitem(sys.modules, backend.__name__, backend)
    monkeypatch.setitem(sys.modules, embedded.__name__, embedded)
    for kind in (ModelKind.GGUF, ModelKind.EMBEDDED):
        monkeypatch.setitem(_registry.BACKENDS, kind, "fake_llamacpp_backend:FakeLlamaCpp")
    monkeypatch.setattr(_registry, "ENSURE_EMBEDDED", "fake_embedded:ensure_model")
    monkeypatch.setattr(_registry, "EMBEDDED_INFO", "fake_embedded:get_model")
    monkeypatch.setattr(_registry, "ADAPTER_PATH", "fake_embedded:adapter_path")
    FakeLlamaCpp.built_from = []
    return tmp_path


def test_options_join_the_spec_and_its_string(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('"x"\n')
    model = load_model(ModelSpec.parse(f"replay:{path}"), latency_s=0.25)
    assert isinstance(model, ChatModel)
    assert model.spec == f"replay:{path}?latency_s=0.25"


def test_embedded_resolves_the_file_and_records_the_name(fake_modules):
    model = load_model("embedded:small?n_ctx=512")
    assert model.spec == "embedded:small?n_ctx=512"
    [built] = FakeLlamaCpp.built_from
    assert (built.kind, built.target, built.options) == ("gguf", str(fake_modules / "small.gguf"), {"n_ctx": 512})


def test_embedded_models_get_their_recommended_context(fake_modules):
    load_model("embedded:tiny")
    [built] = FakeLlamaCpp.built_from
    assert built.options == {"n_ctx": 4096}


def test_an_embedded_model_with_a_shipped_adapter_hands_it_to_llama_cpp(fake_modules):
    assert load_model("embedded:trained").spec == "embedded:trained"
    [built] = FakeLlamaCpp.built_from
    assert built.options == {"n_ctx": 4096, "adapter": str(fake_modules / "adapters" / "trained.gguf")}
    with pytest.raises(ConfigError, match="embedded:trained already applies its own adapter"):
        load_model("embedded:trained?adapter=other.gguf")


def test_gguf_goes_straight_to_the_backend(fake_modules):
    assert load_model("gguf:/m/q4.gguf", n_ctx=1024).spec == "gguf:/m/q4.gguf?n_ctx=1024"
    with pytest.raises(ConfigError, match="unknown option 'threads'"):
        load_model("gguf:/m/q4.gguf?threads=4")


def test_a_backend_module_that_is_not_installed(monkeypatch):
    monkeypatch.setitem(_registry.BACKENDS, ModelKind.HF, "datalyst.llm._not_written_yet:TransformersModel")
    with pytest.raises(ModelUnavailable, match=r"hf: specs need datalyst\.llm\._not_written_yet"):
        load_model("hf:Qwen/Qwen2.5-0.5B-Instruct")


def test_a_missing_third_party_package_names_the_extra(monkeypatch, tmp_path):
    (tmp_path / "backend_needing_a_package.py").write_text("import llama_cpp_is_not_installed_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(_registry.BACKENDS, ModelKind.GGUF, "backend_needing_a_package:LlamaCppModel")
    with pytest.raises(
        ModelUnavailable, match=r"'llama_cpp_is_not_installed_here'.*pip install 'datalyst\[llamacpp\]'"
    ):
        load_model("gguf:/m/q4.gguf")


def test_openai_rejects_unknown_options_and_keys_in_specs():
    with pytest.raises(ConfigError, match="openai accepts: timeout_s, max_retries, max_concurrency"):
        load_model("openai:m@http://127.0.0.1:9/v1?api_key=sk-secret")
