"""How long after submitting a question does the web app show the first step, against ``datalyst ask``?

One question about ``examples/sales.csv``, answered by a recorded model (``replay:``, with ``--latency`` seconds
per turn to stand in for a model writing), in one run, alternating:

    (a) ask       what ``datalyst ask`` does, in process: load the model, ``Agent.arun`` with ``on_turn`` (ask prints
                  each turn from there, once its cell has run); the time to the first turn. The file is a new copy
                  each time, as an upload is (a description of a file is remembered by path)
    (b) web       a running ``datalyst serve`` (uvicorn in a thread, over loopback HTTP): upload the file, ask, read
                  the server-sent events; the time to the first ``turn`` event (the first cell has run: the same
                  point as (a)) and to the first ``step`` event (the page shows the cell before it runs)
    (c) ask CLI   ``datalyst ask`` as a user runs it, a new process each time: the time to the first cell on its
                  output (Python's start-up and imports included), for reference

Ratios are to (a); the issue's target is (b) first ``turn`` at most 1.2x (a). Medians over ``--repeats``.

    . .venv/bin/activate
    python benchmarks/web_bench.py                  # 7 repeats, 0.5 s per model turn
    python benchmarks/web_bench.py --latency 0 --repeats 9 --json web.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "web"))
from web_helpers import SCRIPT, TOKEN, live_server, script_spec, serve_config  # noqa: E402

from datalyst.agent import Agent, AgentConfig, Turn  # noqa: E402
from datalyst.llm import load_model  # noqa: E402
from datalyst.tasks import Task  # noqa: E402

FILE = REPO / "examples" / "sales.csv"
QUESTION = "How many rows does the file have?"


async def ask_in_process(spec: str, folder: Path) -> float:
    """Seconds from the start of ``ask``'s work to its first turn. The file is a new copy each time, as an upload
    is, so that both ways describe it for the prompt (a new ``datalyst ask`` process always does)."""
    copy = Path(tempfile.mkdtemp(dir=folder)) / FILE.name
    shutil.copyfile(FILE, copy)
    began = time.perf_counter()
    first: list[float] = []
    model = load_model(spec)

    def on_turn(turn: Turn) -> None:
        if not first:
            first.append(time.perf_counter() - began)

    try:
        task = Task(id="bench", question=QUESTION, files=[str(copy)])
        await Agent(model, AgentConfig(max_turns=3)).arun(task, on_turn=on_turn)
    finally:
        await model.aclose()
    return first[0]


def web(base: str) -> tuple[float, float]:
    """Seconds from submitting (the upload, then the question) to the first ``step`` and the first ``turn`` event."""
    seen: dict[str, float] = {}
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": base}
    with httpx2.Client(base_url=base, headers=headers, timeout=60) as client:
        began = time.perf_counter()
        opened = client.post("/api/conversations", files=[("upload", (FILE.name, FILE.read_bytes()))]).json()
        with client.stream("POST", f"/api/conversations/{opened['id']}/ask", json={"question": QUESTION}) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: ") and line[7:] not in seen:
                    seen[line[7:]] = time.perf_counter() - began
        client.delete(f"/api/conversations/{opened['id']}")
    return seen["step"], seen["turn"]


def ask_cli(spec: str) -> float:
    """Seconds from starting ``datalyst ask`` to the first cell on its output."""
    began = time.perf_counter()
    command = [sys.executable, "-m", "datalyst", "ask", str(FILE), QUESTION, "--model", spec]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if "cell 1" in line:
                elapsed = time.perf_counter() - began
                break
        else:
            raise RuntimeError("datalyst ask printed no cell")
        process.stdout.read()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.5, help="Seconds the recorded model takes per turn.")
    parser.add_argument("--json", type=Path, help="Also write the measurements here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        spec = script_spec(Path(folder) / "script.jsonl", SCRIPT, latency_s=args.latency)
        times: dict[str, list[float]] = {"ask": [], "web step": [], "web turn": [], "ask CLI": []}
        with live_server(serve_config(Path(folder), models=[spec])) as (base, _):
            asyncio.run(ask_in_process(spec, Path(folder))), web(base)  # warm both: imports, the fork server
            for _ in range(args.repeats):
                times["ask"].append(asyncio.run(ask_in_process(spec, Path(folder))))
                step, turn = web(base)
                times["web step"].append(step)
                times["web turn"].append(turn)
                times["ask CLI"].append(ask_cli(spec))
    baseline = statistics.median(times["ask"])
    print(f"first step of one question, recorded model with {args.latency} s per turn, median of {args.repeats}")
    print(f"{'way':<10} {'seconds':>8} {'ratio':>6}")
    for name, values in times.items():
        print(f"{name:<10} {statistics.median(values):>8.3f} {statistics.median(values) / baseline:>6.2f}")
    if args.json:
        args.json.write_text(json.dumps({"latency_s": args.latency, "repeats": args.repeats, "seconds": times}))


if __name__ == "__main__":
    main()
