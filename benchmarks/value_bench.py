"""What a value-model call costs in search: scoring a state whole against running only what a cached state lacks.

Search values every new leaf, and a leaf is its parent's conversation plus one turn: ``LoadedScorer`` keeps
the backbone's key/value cache of the last conversations it scored and runs only the tokens a new one does not
share with them. On real trajectories (an evaluation's ``trajectories/*.jsonl``), the states are scored in
the order a search makes them: for each task, each trial's states one after another (a trial's states extend
each other; the trials of a task share the opening prompt, as sibling branches share their parent), in one
run:

    (a) whole   ``cache_mb=0``: every state is one forward pass over all its tokens
    (b) cached  the default budget (``cache_mb=2048``): the conversations scored last are kept

``--interleave K`` takes the tasks' states in turn, K tasks at a time, as K concurrent searches make them,
and adds (c): (b)'s order-free budget against the cache of the last 8 conversations (the budget such
states take), which concurrent searches outrun.

The value model is the backbone with a LoRA adapter and a head drawn at random (seeded): the cost does not
depend on what was learned. Printed: states per second and tokens run per state of each, the ratio (b)/(a)
of the time, and the largest difference between their scores (float rounding only).

    . .venv/bin/activate
    python benchmarks/value_bench.py --trajectories runs/eval/sft3-small-jupiter/trajectories/jupiter.jsonl
    python benchmarks/value_bench.py --trajectories FILE --model embedded:tiny --tasks 2   # quicker
    python benchmarks/value_bench.py --trajectories FILE --model embedded:tiny --tasks 12 --interleave 12
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

import torch

from datalyst.agent import read_trajectories
from datalyst.train import LoraOptions, load_policy, state_messages
from datalyst.train._scorer import LoadedScorer, Scorer, ScoringCard, encode, save_scorer


def random_value_model(model: str, folder: Path) -> None:
    """Save a value model of ``model`` whose LoRA layers and head are drawn at random (seed 0)."""
    torch.manual_seed(0)
    policy = load_policy(model, lora=LoraOptions(r=16, alpha=32))
    scorer = Scorer(policy.model, outputs=1, dropout=0.0)
    with torch.no_grad():
        for name, parameter in scorer.named_parameters():
            if "lora_B" in name or name.startswith("head"):
                parameter.normal_(0, 0.02)
    save_scorer(scorer.eval(), folder, ScoringCard(model=model, outputs=["value"], dropout=0.0), name="value")


def search_order(path: Path, tasks: int, interleave: int = 1) -> list[list]:
    """The states of the first ``tasks`` tasks' trajectories, each task's trials one after another, and the
    tasks taken ``interleave`` at a time, one state of each in turn."""
    trajectories = sorted(read_trajectories(path), key=lambda t: (t.task.id, t.trial))
    by_task = itertools.groupby(trajectories, key=lambda t: t.task.id)
    chosen = [list(group) for _, group in itertools.islice(by_task, tasks)]
    streams = [[state_messages(t, k) for t in group for k in range(len(t.turns) + 1)] for group in chosen]
    return [state for start in range(0, len(streams), interleave)
            for turn in itertools.zip_longest(*streams[start : start + interleave])
            for state in turn if state is not None]  # fmt: skip


def measure(scorer: LoadedScorer, states: list[list]) -> tuple[float, int, list[float]]:
    """Seconds to score ``states`` in order from an empty cache, tokens the backbone ran, and the scores."""
    scorer._prefixes.clear()
    ran: list[int] = []
    hook = scorer.scorer.backbone.register_forward_pre_hook(
        lambda _, args, kwargs: ran.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    began = time.perf_counter()
    scores = [scorer.predict(messages)["value"] for messages in states]
    seconds = time.perf_counter() - began
    hook.remove()
    return seconds, sum(ran), scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=Path, required=True, help="an evaluation's trajectories file")
    parser.add_argument("--model", default="embedded:small")
    parser.add_argument("--tasks", type=int, default=4, help="tasks whose trajectories are scored")
    parser.add_argument("--interleave", type=int, default=1, help="tasks whose states are taken in turn")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    states = search_order(args.trajectories, args.tasks, args.interleave)
    with tempfile.TemporaryDirectory() as folder:
        random_value_model(args.model, Path(folder))
        scorer = LoadedScorer(folder, name="value")
        tokens = sum(len(encode(messages, scorer.tokenizer)) for messages in states)
        budget = scorer.cache_bytes
        figures = {"cached": measure(scorer, states)}
        if args.interleave > 1:
            scorer.cache_bytes = 8 * tokens / len(states) * scorer.token_bytes
            figures["last 8"] = measure(scorer, states)
        scorer.cache_bytes = 0
        figures["whole"] = measure(scorer, states)
    (whole_s, _, whole), cached = figures["whole"], figures["cached"][2]
    gap = max(abs(a - b) for a, b in zip(whole, cached, strict=True))
    print(
        f"{len(states)} states of {args.tasks} tasks ({args.interleave} at a time) in {args.trajectories}, "
        f"{tokens / len(states):.0f} tokens each; budget {budget / 2**20:.0f} MiB, {scorer.token_bytes} B a token"
    )
    print("             states/s  tokens run/state  time / whole")
    for name, (seconds, run, _) in figures.items():
        print(f"  {name:<9} {len(states) / seconds:9.2f} {run / len(states):17.0f} {seconds / whole_s:13.2f}")
    print(f"largest score difference, cached against whole: {gap:.1e}")
    if args.json:
        result = {name: {"seconds": s, "tokens_run": r} for name, (s, r, _) in figures.items()}
        args.json.write_text(json.dumps(result | {"states": len(states), "tokens": tokens, "gap": gap}, indent=2))


if __name__ == "__main__":
    main()
