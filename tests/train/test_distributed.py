"""Data-parallel SFT for real: two processes over gloo (``accelerate launch`` with the repository's multi-GPU
config, which runs CPU processes on a machine without a GPU) end where one process does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from train_helpers import write_examples

from datalyst.train import LoraOptions, SFTConfig, train_sft
from datalyst.train._log import read_log

torch = pytest.importorskip("torch")
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "multi_gpu.yaml"


@pytest.mark.skipif(shutil.which("accelerate") is None, reason="the accelerate command is not installed")
def test_two_processes_train_like_one(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    data = write_examples(tmp_path / "e.jsonl", 8)
    options = ["--model", f"hf:{tiny_model}", "--batch-size", "4", "--lora-r", "4", "--lora-alpha", "8",
               "--lora-dropout", "0", "--lr", "1e-2", "--warmup-ratio", "0", "--precision", "fp32"]  # fmt: skip
    command = ["accelerate", "launch", "--config_file", str(CONFIG), "-m", "datalyst", "train", "sft", str(data),
               "--out", str(tmp_path / "two"), *options]  # fmt: skip
    environment = os.environ | {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    one = SFTConfig(data=str(data.resolve()), model=f"hf:{tiny_model}", batch_size=4, lr=1e-2, warmup_ratio=0.0,
                    precision="fp32", lora=LoraOptions(r=4, alpha=8, dropout=0.0))  # fmt: skip
    train_sft(one, tmp_path / "one", progress=False)
    assert '"processes": 2' in next((tmp_path / "two" / "checkpoints").glob("*/state.json")).read_text()
    losses = [[entry.loss for entry in read_log(tmp_path / name / "log.jsonl")] for name in ("one", "two")]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    a = load_file(tmp_path / "one" / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "two" / "adapter" / "adapter_model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-3) for k in a)  # Adam divides tiny all-reduce rounding differences
