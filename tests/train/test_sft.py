"""SFT on a tiny random model: the loss sees only trained tokens, micro-batching changes nothing, and a
resumed run ends with the very weights of an uninterrupted one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from train_helpers import write_examples

from datalyst.agent import TrainingExample
from datalyst.errors import ConfigError, DataFileError
from datalyst.train import LoraOptions, SFTConfig, train_sft
from datalyst.train._data import IGNORE, micro_batches, read_examples, step_batch, to_example
from datalyst.train._log import read_log
from datalyst.train._logprobs import token_logprobs
from datalyst.train._sft import collate

torch = pytest.importorskip("torch")


def config(tiny_model: Path, data: Path, **changes) -> SFTConfig:
    fields = dict(data=str(data), model=f"hf:{tiny_model}", batch_size=4, lr=1e-2, precision="fp32",
                  lora=LoraOptions(r=4, alpha=8, dropout=0.1))  # fmt: skip
    return SFTConfig(**(fields | changes))


def test_labels_hide_environment_tokens() -> None:
    example = to_example(TrainingExample(trajectory_id="t", input_ids=[5, 6, 7, 8], loss_mask=[0, 1, 1, 0]))
    assert example.labels == [IGNORE, 6, 7, IGNORE]
    assert example.trained_tokens == 2


def test_read_examples_leaves_out_long_and_untrained_ones(tmp_path: Path) -> None:
    records = [
        TrainingExample(trajectory_id="long", input_ids=list(range(10)), loss_mask=[1] * 10),
        TrainingExample(trajectory_id="none", input_ids=[1, 2, 3], loss_mask=[0, 0, 0]),
        TrainingExample(trajectory_id="ok", input_ids=[1, 2, 3], loss_mask=[0, 1, 1]),
    ]
    (tmp_path / "examples.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    selection = read_examples(tmp_path, max_length=5)
    assert [e.id for e in selection.examples] == ["ok"]
    assert (selection.too_long, selection.untrained) == (1, 1)
    with pytest.raises(DataFileError, match="vocabulary has 3"):
        read_examples(tmp_path, max_length=5, vocab_size=3)


def test_a_cap_keeps_a_seeded_share_of_one_source_in_a_mix(tmp_path: Path) -> None:
    expert = write_examples(tmp_path / "expert.jsonl", 8, seed=1)
    sampled = write_examples(tmp_path / "sampled.jsonl", 3, seed=2)
    paths = [str(expert), str(sampled)]
    capped = read_examples(paths, max_length=100, caps={str(expert): 2}, seed=0).examples
    assert len(capped) == 5 and all(e in read_examples(expert, max_length=100).examples for e in capped[:2])
    assert capped[2:] == read_examples(sampled, max_length=100).examples  # the other source whole, in order
    again = read_examples(paths, max_length=100, caps={str(expert): 2}, seed=0).examples
    other = read_examples(paths, max_length=100, caps={str(expert): 2}, seed=1).examples
    assert again == capped and other[:2] != capped[:2]
    assert len(read_examples(paths, max_length=100, caps={str(expert): 50}).examples) == 11  # a cap above the count
    with pytest.raises(ConfigError, match="not among the data paths"):
        read_examples(paths, max_length=100, caps={str(tmp_path / "elsewhere.jsonl"): 1})


def test_the_order_depends_on_seed_and_epoch_only(tmp_path: Path) -> None:
    examples = read_examples(write_examples(tmp_path / "e.jsonl", 6), max_length=100).examples
    epoch = [e.id for step in range(2) for e in step_batch(examples, step, batch_size=4, seed=0)]
    assert sorted(epoch) == sorted(e.id for e in examples)  # steps 0-1 cover the epoch once (4 + 2)
    again = [e.id for step in range(2) for e in step_batch(examples, step, batch_size=4, seed=0)]
    next_epoch = [e.id for step in range(2, 4) for e in step_batch(examples, step, batch_size=4, seed=0)]
    assert again == epoch and next_epoch != epoch and sorted(next_epoch) == sorted(epoch)


def test_micro_batches_stay_within_the_token_budget(tmp_path: Path) -> None:
    examples = read_examples(write_examples(tmp_path / "e.jsonl", 8), max_length=100).examples
    groups = micro_batches(examples, max_tokens=90)
    assert sorted(e.id for g in groups for e in g) == sorted(e.id for e in examples)
    assert all(len(g) == 1 or len(g) * max(len(e.input_ids) for e in g) <= 90 for g in groups)
    assert any(len(g) > 1 for g in groups)


def test_loss_on_kept_logits_equals_the_full_cross_entropy(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    examples = read_examples(write_examples(tmp_path / "e.jsonl", 3), max_length=100).examples
    input_ids, attention_mask, labels = collate(examples, pad_id=0, torch=torch)
    ours = -token_logprobs(model, input_ids, attention_mask, labels).sum()
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    full = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), reduction="sum"
    )
    assert ours.item() == pytest.approx(full.item(), rel=1e-5)
    assert ours.item() / sum(e.trained_tokens for e in examples) == pytest.approx(
        torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
        ).item(),
        rel=1e-5,
    )


def test_micro_batching_and_recomputing_do_not_change_the_update(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    data = write_examples(tmp_path / "e.jsonl", 4)
    lora = LoraOptions(r=4, alpha=8, dropout=0.0)
    # 4 forward passes, 1 padded batch of 4, or 4 passes whose activations the backward pass computes again
    runs = {"one-by-one": (1, False), "together": (4096, False), "recomputed": (1, True)}
    for name, (budget, recompute) in runs.items():
        settings = config(tiny_model, data, lora=lora, max_batch_tokens=budget, warmup_ratio=0.0, recompute=recompute)
        train_sft(settings, tmp_path / name, progress=False)
    a = load_file(tmp_path / "one-by-one" / "adapter" / "adapter_model.safetensors")
    assert any(k.endswith("lora_B.weight") and a[k].abs().sum() > 0 for k in a)  # the step did move the weights
    for name in ("together", "recomputed"):
        b = load_file(tmp_path / name / "adapter" / "adapter_model.safetensors")
        assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a), name
        assert read_log(tmp_path / "one-by-one" / "log.jsonl")[0].loss == pytest.approx(
            read_log(tmp_path / name / "log.jsonl")[0].loss, rel=1e-5
        )


def test_training_lowers_the_loss_and_writes_the_run_folder(tiny_model: Path, tmp_path: Path) -> None:
    data = write_examples(tmp_path / "e.jsonl", 4)
    result = train_sft(config(tiny_model, data, epochs=8, warmup_ratio=0.0), tmp_path / "run", progress=False)
    log = read_log(tmp_path / "run" / "log.jsonl")
    assert [entry.step for entry in log] == list(range(1, 9)) and result.steps == 8
    assert log[-1].loss < 0.8 * log[0].loss
    assert (result.weights / "adapter_config.json").is_file() and (tmp_path / "run" / "loss.png").is_file()
    manifest = json.loads((tmp_path / "run" / "train.manifest.json").read_text())
    assert manifest["result"]["examples"] == 4 and manifest["config"]["lora"]["r"] == 4
    assert sorted((tmp_path / "run" / "examples.txt").read_text().split()) == ["t0", "t1", "t2", "t3"]
    assert len(list((tmp_path / "run" / "checkpoints").iterdir())) == 2  # only the newest two are kept


def test_a_resumed_run_matches_an_uninterrupted_one(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    data = write_examples(tmp_path / "e.jsonl", 6)
    settings = config(tiny_model, data, epochs=2, max_batch_tokens=60)  # 4 steps, dropout on: the RNG must resume too
    train_sft(settings, tmp_path / "whole", progress=False)
    resumed = tmp_path / "resumed"
    train_sft(settings, resumed, save_every=2, progress=False)
    started = json.loads((resumed / "train.manifest.json").read_text())["started_at"]
    shutil.rmtree(resumed / "checkpoints" / "step-000004")  # as if it had stopped after step 3
    shutil.rmtree(resumed / "adapter")
    train_sft(settings, resumed, progress=False)  # resumes from step 2 and drops step 3 from the log
    a = load_file(tmp_path / "whole" / "adapter" / "adapter_model.safetensors")
    b = load_file(resumed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [e.loss for e in read_log(resumed / "log.jsonl")] == [
        e.loss for e in read_log(tmp_path / "whole" / "log.jsonl")
    ]
    # the manifest keeps when (and under which revision) the run started, lists the resume and adds when it finished
    manifest = json.loads((resumed / "train.manifest.json").read_text())
    assert manifest["started_at"] == started < manifest["finished_at"] and "finished_git_revision" in manifest
    assert [resume["at"] > started for resume in manifest["resumes"]] == [True]
    assert manifest["result"]["steps"] == 4 and manifest["config"]["epochs"] == 2


def test_a_run_folder_refuses_other_settings(tiny_model: Path, tmp_path: Path) -> None:
    data = write_examples(tmp_path / "e.jsonl", 4)
    train_sft(config(tiny_model, data), tmp_path / "run", progress=False)
    with pytest.raises(ConfigError, match="other settings \\(lr\\)"):
        train_sft(config(tiny_model, data, lr=1e-3), tmp_path / "run", progress=False)


def test_a_base_spec_with_options_is_refused() -> None:
    from datalyst.train._policy import hf_spec

    assert hf_spec("hf:/models/x") == "hf:/models/x"
    with pytest.raises(ConfigError, match="has options \\(adapter\\)"):
        hf_spec("gguf:/models/x.gguf?adapter=/runs/sft/adapter")


def test_full_fine_tuning_trains_every_weight_and_saves_a_model_folder(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    data = write_examples(tmp_path / "e.jsonl", 4)
    result = train_sft(
        config(tiny_model, data, lora=None, epochs=4, warmup_ratio=0.0), tmp_path / "run", progress=False
    )
    log = read_log(tmp_path / "run" / "log.jsonl")
    assert result.weights == tmp_path / "run" / "model" and log[-1].loss < log[0].loss
    trained = AutoModelForCausalLM.from_pretrained(result.weights)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert all(not torch.equal(a, b) for a, b in zip(trained.parameters(), base.parameters(), strict=True))
    assert (result.weights / "tokenizer.json").is_file()


def test_several_exports_are_read_as_one_mix(tmp_path: Path) -> None:
    first = write_examples(tmp_path / "a.jsonl", 3)
    (tmp_path / "b").mkdir()
    second = write_examples(tmp_path / "b" / "examples.jsonl", 2)
    mixed = read_examples([first, tmp_path / "b"], max_length=100).examples
    assert len(mixed) == 5 and [e.input_ids for e in mixed[3:]] == [
        e.input_ids for e in read_examples(second, max_length=100).examples]  # fmt: skip
    assert SFTConfig(data=str(first)).data == [str(first)]  # a run configured before mixes resumes
    with pytest.raises(DataFileError, match="does not exist"):
        read_examples([first, tmp_path / "c.jsonl"], max_length=100)
