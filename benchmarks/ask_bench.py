"""How long does ``datalyst ask`` take on the README's question with each model, and is it right?

Each repeat runs the README's command as a user does, a new process each time (start-up, the model's load, the
agent's turns), once per model, the models in turn so that a busy moment costs them alike. The answer is
right when it names the region with the highest total revenue of ``examples/sales.csv`` (worked out here with
pandas). Ratios are of median wall times to the first model's, measured in the same run.

    . .venv/bin/activate
    python benchmarks/ask_bench.py                                   # small-sft and medium, 3 repeats
    python benchmarks/ask_bench.py --models embedded:small-sft embedded:small embedded:medium --repeats 5
    python benchmarks/ask_bench.py --dialect jupiter                 # every model in one turn format
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
FILE = REPO / "examples" / "sales.csv"
QUESTION = "Which region has the highest total revenue?"


def expected_region() -> str:
    return str(pd.read_csv(FILE).groupby("region")["revenue"].sum().idxmax())


def ask_once(model: str, dialect: str | None, timeout_s: float) -> dict:
    """One ``datalyst ask`` process: its wall time, answer and turns (``--json`` prints the trajectory)."""
    command = [sys.executable, "-m", "datalyst", "ask", str(FILE), QUESTION, "--model", model, "--json"]
    command += ["--dialect", dialect] if dialect else []
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"{model}: datalyst ask failed: {last}")
    trajectory = json.loads(done.stdout)
    return {"wall_s": wall, "answer": trajectory.get("answer"), "turns": len(trajectory["turns"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["embedded:small-sft", "embedded:medium"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dialect", help="The turn format for every model (default: ask's choice per model).")
    parser.add_argument("--timeout", type=float, default=600.0, help="Seconds one ask may take.")
    parser.add_argument("--json", type=Path, help="Also write the measurements here.")
    args = parser.parse_args()
    region = expected_region()
    runs: dict[str, list[dict]] = {model: [] for model in args.models}
    for repeat in range(args.repeats):
        for model in args.models:
            run = ask_once(model, args.dialect, args.timeout)
            run["right"] = bool(run["answer"]) and region.lower() in run["answer"].lower()
            runs[model].append(run)
            print(f"repeat {repeat + 1}/{args.repeats} {model}: {run['wall_s']:.1f} s, {run['turns']} turns, "
                  f"{'right' if run['right'] else 'wrong'}: {run['answer']!r}", flush=True)  # fmt: skip
    baseline = statistics.median(run["wall_s"] for run in runs[args.models[0]])
    print(f"\n| model | median s | min s | max s | median turns | right | ratio to {args.models[0]} |")
    print("|---|---|---|---|---|---|---|")
    for model, measured in runs.items():
        walls = [run["wall_s"] for run in measured]
        median = statistics.median(walls)
        turns = statistics.median(run["turns"] for run in measured)
        right = sum(run["right"] for run in measured)
        print(f"| {model} | {median:.1f} | {min(walls):.1f} | {max(walls):.1f} | {turns:g} | "
              f"{right}/{len(measured)} | {median / baseline:.2f} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"question": QUESTION, "expected": region, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
