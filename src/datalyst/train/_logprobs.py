"""Log-probabilities of a conversation's trained tokens, with logits computed only where they are needed."""

from __future__ import annotations

from typing import Any

from datalyst.train._data import IGNORE


def token_logprobs(model: Any, input_ids: Any, attention_mask: Any, labels: Any) -> Any:
    """The log-probability of every labelled token after the first (row by row, flattened), from one forward pass.

    Only the positions that predict a labelled token go through the vocabulary projection: in an agent's
    trajectory most positions are prompt and observations, and the projection is a large share of a small
    model's work. ``log p = logit - logsumexp(logits)``, in float32, without a second vocabulary-wide tensor.
    """
    import torch

    predicts = torch.zeros_like(labels, dtype=torch.bool)
    predicts[:, :-1] = labels[:, 1:] != IGNORE  # position i predicts token i + 1
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=predicts).logits.float()
    targets = labels[:, 1:][predicts[:, :-1]]
    return logits.gather(-1, targets[:, None]).squeeze(-1) - logits.logsumexp(-1)
