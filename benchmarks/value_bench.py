"""What a value-model call costs in search: scoring a state whole against running only what a cached state lacks.

Search values every new leaf, and a leaf is its parent's conversation plus one turn: ``LoadedScorer`` keeps
the backbone's key/value cache of the last conversations it scored and runs only the tokens a new one does not
share with them. On real trajectories (an evaluation's ``trajectories/*.jsonl``), the states are scored in
the order a search makes them: for each task, each trial's states one after another (a trial's states extend
each other; the trials of a task share the opening prompt, as sibling branches share their parent), in one
run:

    (a) whole   ``cached=0``: every state is one forward pass over all its tokens
    (b) cached  ``cached=8`` (the default): the last 8 conversations are kept

The value model is the backbone with a LoRA adapter and a head drawn at random (seeded): the cost does not
depend on what was learned. Printed: states per second and tokens run per state of each, the ratio (b)/(a)
of the time, and the largest difference between their scores (float rounding only).

    . .venv/bin/activate
    python benchmarks/value_bench.py --trajectories runs/eval/sft3-small-jupiter/trajectories/jupiter.jsonl
    python benchmarks/value_bench.py --trajectories FILE --model embedded:tiny --tasks 2   # quicker
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


def search_order(path: Path, tasks: int) -> list[list]:
    """The states of the first ``tasks`` tasks' trajectories, each task's trials one after another."""
    trajectories = sorted(read_trajectories(path), key=lambda t: (t.task.id, t.trial))
    by_task = itertools.groupby(trajectories, key=lambda t: t.task.id)
    chosen = [list(group) for _, group in itertools.islice(by_task, tasks)]
    return [state_messages(t, k) for group in chosen for t in group for k in range(len(t.turns) + 1)]


def measure(scorer: LoadedScorer, states: list[list]) -> tuple[float, int, list[float]]:
    """Seconds to score ``states`` in order, tokens the backbone ran, and the scores."""
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
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    states = search_order(args.trajectories, args.tasks)
    with tempfile.TemporaryDirectory() as folder:
        random_value_model(args.model, Path(folder))
        scorer = LoadedScorer(folder, name="value", cached=0)
        tokens = sum(len(encode(messages, scorer.tokenizer)) for messages in states)
        figures = {"whole": measure(scorer, states)}
        scorer.cached = 8  # with cached=0 it kept nothing, so (b) starts empty
        figures["cached"] = measure(scorer, states)
    (whole_s, _, whole), (cached_s, _, cached) = figures["whole"], figures["cached"]
    gap = max(abs(a - b) for a, b in zip(whole, cached, strict=True))
    print(f"{len(states)} states of {args.tasks} tasks in {args.trajectories}, {tokens / len(states):.0f} tokens each")
    print("             states/s  tokens run/state")
    for name, (seconds, run, _) in figures.items():
        print(f"  {name:<9} {len(states) / seconds:9.2f} {run / len(states):17.0f}")
    print(f"time (b)/(a): {cached_s / whole_s:.2f}; largest score difference {gap:.1e}")
    if args.json:
        result = {name: {"seconds": s, "tokens_run": r} for name, (s, r, _) in figures.items()}
        args.json.write_text(json.dumps(result | {"states": len(states), "tokens": tokens, "gap": gap}, indent=2))


if __name__ == "__main__":
    main()
