"""Training examples as the trainer reads them: labels, a seeded order, and length-grouped micro-batches.

An example is a ``TrainingExample`` (``datalyst curate export --format examples``): token ids and a
loss mask that is 1 on the agent's own tokens. Labels are the ids where the mask is 1 and -100
elsewhere, built once here and never changed inside a loss. The order of step ``k`` is a function of
the seed and the epoch alone, so a resumed run sees exactly the batches it would have seen.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from datalyst.agent import TrainingExample
from datalyst.errors import ConfigError, DataFileError
from datalyst.jsonl import read_appended

IGNORE = -100
"""The label of a token the loss skips (PyTorch's ``cross_entropy`` default ``ignore_index``)."""
EXPORT = "datalyst curate export RUN --format examples"


class Example(BaseModel):
    """One conversation ready for a causal LM: ``labels`` is ``input_ids`` with -100 on environment tokens."""

    id: str
    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        """Tokens the loss predicts: labelled positions after the first (the first has nothing before it)."""
        return sum(label != IGNORE for label in self.labels[1:])


class Selection(BaseModel):
    """What ``read_examples`` kept and why it left the others out."""

    examples: list[Example]
    too_long: int = 0
    untrained: int = 0


def to_example(record: TrainingExample) -> Example:
    """``record``'s ids with its loss mask folded into labels."""
    labels = [token if keep else IGNORE for token, keep in zip(record.input_ids, record.loss_mask, strict=True)]
    return Example(id=record.trajectory_id, input_ids=record.input_ids, labels=labels)


def read_examples(
    paths: str | Path | Sequence[str | Path],
    *,
    max_length: int,
    limit: int | None = None,
    caps: Mapping[str, int] | None = None,
    seed: int = 0,
    vocab_size: int | None = None,
) -> Selection:
    """The examples of ``paths`` (each an ``examples.jsonl`` or a folder holding one: a mix of several exports)
    that fit in ``max_length`` tokens.

    Longer ones are left out, not cut, so no answer is trained without its ending; so are those with no
    trained token. ``caps`` keeps at most so many of a path's examples (a seeded sample; keys as in ``paths``):
    the share of one source in a mix. ``limit`` then keeps a seeded random sample of that many in all. Ids outside
    ``vocab_size`` mean the examples were made with another tokenizer: DataFileError.
    """
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    caps = caps or {}
    if unknown := set(caps) - {str(path) for path in paths}:
        raise ConfigError(f"a cap names {', '.join(sorted(unknown))}, which is not among the data paths")
    files = [data_file(Path(path), "examples.jsonl", f"write it with: {EXPORT}") for path in paths]
    fix = f"rewrite it with: {EXPORT}"
    named = ", ".join(map(str, files))
    selection = Selection(examples=[])
    for path, file in zip(paths, files, strict=True):
        fitting = []
        for record in read_appended(file, TrainingExample, what="a training example", fix=fix):
            example = to_example(record)
            if len(example.input_ids) > max_length:
                selection.too_long += 1
            elif example.trained_tokens == 0:
                selection.untrained += 1
            else:
                fitting.append(example)
        selection.examples += _at_most(fitting, caps.get(str(path)), seed)
    if (
        vocab_size is not None
        and (ids := [t for e in selection.examples for t in e.input_ids])
        and max(ids) >= vocab_size
    ):
        raise DataFileError(
            f"{named} hold token id {max(ids)} but the model's vocabulary has {vocab_size}; export the examples "
            "with the tokenizer of the model you train (--tokenizer)"
        )
    selection.examples = _at_most(selection.examples, limit, seed)
    if not selection.examples:
        raise DataFileError(f"{named}: no example of at most {max_length} tokens with a trained token")
    return selection


def _at_most(examples: list[Example], count: int | None, seed: int) -> list[Example]:
    """``examples`` whole, or a seeded sample of ``count`` of them when there are more."""
    return examples if count is None or count >= len(examples) else random.Random(seed).sample(examples, count)


def data_file(path: Path, name: str, fix: str) -> Path:
    """``path``, or the file ``name`` in it when it is a folder; DataFileError, saying ``fix``, when that is no file."""
    file = path / name if path.is_dir() else path
    if not file.is_file():
        raise DataFileError(f"{file} does not exist; {fix}")
    return file


def steps_per_epoch(count: int, batch_size: int) -> int:
    """Optimizer steps in one pass over ``count`` examples (the last batch may be smaller)."""
    return -(-count // batch_size)


def step_batch(examples: Sequence[Example], step: int, *, batch_size: int, seed: int) -> list[Example]:
    """The examples of optimizer step ``step`` (from 0): epoch ``e`` walks a permutation seeded by (seed, e)."""
    epoch, index = divmod(step, steps_per_epoch(len(examples), batch_size))
    order = list(range(len(examples)))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return [examples[i] for i in order[index * batch_size : (index + 1) * batch_size]]


def micro_batches(batch: Sequence[Example], *, max_tokens: int) -> list[list[Example]]:
    """``batch`` grouped by length into micro-batches whose padded size (rows x longest) stays within
    ``max_tokens``; an example longer than that is a micro-batch of its own."""
    groups: list[list[Example]] = []
    for example in sorted(batch, key=lambda e: len(e.input_ids), reverse=True):
        if groups and len(groups[-1][0].input_ids) * (len(groups[-1]) + 1) <= max_tokens:
            groups[-1].append(example)  # sorted longest first, so the group's first row is its longest
        else:
            groups.append([example])
    return groups
