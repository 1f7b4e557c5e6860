"""A tiny randomly initialised chat model saved as a Hugging Face folder, for training tests without weights.

The tokenizer is a byte-level BPE trained here on a few sentences, with ChatML's special tokens and
template, so every part loads offline through ``hf:PATH`` like a real model folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="training needs torch (pip install 'datalyst[hf,train]')")
pytest.importorskip("transformers", reason="training needs transformers (pip install 'datalyst[hf,train]')")
pytest.importorskip("peft", reason="LoRA training needs peft (pip install 'datalyst[hf,train]')")

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = ["Thought: load the file and count the rows.", "Observation: 3 rows", "Formatted answer: @rows[3]"] * 20


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a 2-layer Qwen2 model (random weights, seed 0) and its tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("tiny-model")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
        initializer_range=0.3,  # wide enough that LoRA can move the logits of a tied 32-wide head
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder
