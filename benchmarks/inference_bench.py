"""Local inference speed: our llama.cpp backend against llama.cpp's own tools, on the same GGUF and threads.

    python benchmarks/inference_bench.py [--models small,tiny] [--threads N] [--json out.json]
    python benchmarks/inference_bench.py --adapter small=runs/train/sft/adapter   # what a LoRA adapter costs

Set-up (once, cached under ``$DATALYST_CACHE/bench``): the llama.cpp carried by the source distribution of
the installed llama-cpp-python (``datalyst.llm.llama_cpp_source``) is built with CMake into ``llama-bench`` and
``llama-batched-bench`` in llama.cpp's two fast ways: for this machine's CPU (``GGML_NATIVE=ON``), and with a
library per instruction set, the tools seeing only the library our backend runs (``llama_cpu()``). The
reference is the better of the two on each figure, among those that run here (a native build may crash on a
CPU that advertises instructions it refuses). ``--llama-tools DIR`` uses tools built elsewhere.

For each model, in one run:

1. single stream: prompt-processing and generation tokens/s, ours (a cold prompt of ``--prompt-tokens``;
   then ``--gen-tokens`` generated after a short prompt) and ``llama-bench``'s, each the mean of 3 runs;
2. prefix reuse: time to first token of turn 1 and turn 3 of a 3-turn DABench trajectory recorded in
   this run (our agent and sandbox, scripted answers), turn 3 warm (after turns 1-2 and their
   completions) and cold;
3. shared prefix: the prompt time of ``n = 4`` samples of one prompt against ``n = 1``;
4. batching: aggregate generation tokens/s with 1, 2, 4 and 8 trajectories at once after short
   prompts, and with 1 and 4 after 2,500-token prompts (a DABench trajectory's later turns), ours and
   ``llama-batched-bench``'s;
5. while a cell runs: our generation tokens/s with one core kept busy by another process: with the
   default thread count (the free cores), every core's threads and one fewer.

``--adapter MODEL=FOLDER`` measures instead what a trained LoRA adapter (``MODEL?adapter=FOLDER``) costs:
single-stream prompt and generation tokens/s and 4-at-once generation tokens/s, the base and the adapter
alternated ``REPEATS`` times in one run, and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

from datalyst.agent import Agent, AgentConfig
from datalyst.llm import ChatMessage, Completion, ReplayModel, SamplingParams, llama_cpp_source, llama_cpu
from datalyst.llm._cores import available_cores
from datalyst.llm._cpu import BUILT_IN, cpu_name
from datalyst.llm._embedded import model_path
from datalyst.llm._llamacpp import LlamaCppModel
from datalyst.paths import cache_dir
from datalyst.tasks import load_dabench

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = (1, 2, 4, 8)
REPEATS = 3  # single-stream runs averaged, ours and llama-bench's alike
SHORT_PROMPT_TOKENS = 128
LONG_CONTEXT = (2000, (1, 4))
"""``filler_prompt`` size (about 2,500 tokens in these models' tokenizers) and counts at once for batching at
the length of a DABench trajectory's later turns."""


# ---------------------------------------------------------------- llama.cpp's own tools

TOOL_BUILDS = {
    "native": ["-DGGML_NATIVE=ON"],
    "variants": ["-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_NATIVE=OFF"],
}
"""llama.cpp's two ways to be fast on a CPU: built for it, or a library per instruction set chosen at start."""


def build_tools(where: Path, build: str) -> Path:
    """Build llama-bench and llama-batched-bench from the installed binding's source; their folder."""
    build_dir = where / f"llama.cpp-{version('llama-cpp-python')}-{build}"
    bin_dir = build_dir / "bin"
    if (bin_dir / "llama-bench").exists() and (bin_dir / "llama-batched-bench").exists():
        return bin_dir
    print(f"set-up: building llama-bench and llama-batched-bench ({build}) ...", flush=True)
    source = llama_cpp_source()
    options = [*TOOL_BUILDS[build], "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run(["cmake", "-S", str(source), "-B", str(build_dir), *options], check=True, capture_output=True)
    jobs = str(available_cores())
    build = ["cmake", "--build", str(build_dir), "-j", jobs, "--target", "llama-bench", "llama-batched-bench"]
    subprocess.run(build, check=True, capture_output=True)
    return bin_dir


def pin_library(bin_dir: Path, library: str) -> Path:
    """A folder where llama.cpp's tools see one CPU library only (llama.cpp looks beside its executable)."""
    pinned = bin_dir.with_name(f"bin-{library}")
    pinned.mkdir(exist_ok=True)
    for path in bin_dir.iterdir():
        target = pinned / path.name
        if target.exists() or (path.name.startswith("libggml-cpu-") and path.name != f"libggml-cpu-{library}.so"):
            continue
        if path.name.startswith("llama-"):
            shutil.copy2(path, target)  # a copy: a link would be followed back to the folder of every library
        else:
            target.symlink_to(path)
    return pinned


def reference_tools(where: Path) -> dict[str, Path]:
    """llama.cpp's tools in both fast ways, the library-per-instruction-set build pinned to our backend's library."""
    cpu = llama_cpu()
    variants = build_tools(where, "variants")
    pinned = variants if cpu.library == BUILT_IN else pin_library(variants, cpu.library)
    return {"native": build_tools(where, "native"), f"variants ({cpu.library})": pinned}


def llama_bench(tools: Path, gguf: Path, prompt: int, gen: int, threads: int) -> tuple[float, float]:
    """llama-bench's prompt and generation tokens/s."""
    command = [str(tools / "llama-bench"), "-m", str(gguf), "-p", str(prompt), "-n", str(gen)]
    command += ["-t", str(threads), "-r", str(REPEATS), "-o", "json"]
    done = subprocess.run(command, check=True, capture_output=True)
    rows = json.loads(done.stdout)
    pp = next(row["avg_ts"] for row in rows if row["n_prompt"] and not row["n_gen"])
    tg = next(row["avg_ts"] for row in rows if row["n_gen"] and not row["n_prompt"])
    return pp, tg


def batched_bench(
    tools: Path, gguf: Path, gen: int, threads: int, prompt: int, counts: tuple[int, ...]
) -> dict[int, float]:
    """llama-batched-bench's aggregate generation tokens/s for each count of sequences at once, each after a
    ``prompt``-token prompt of its own (short prompts share one stream, ``-kvu``, as its README runs it)."""
    command = [str(tools / "llama-batched-bench"), "-m", str(gguf), "-c", str(max(counts) * (prompt + gen + 64))]
    command += ["-b", "512", "-ub", "512", "-npp", str(prompt), "-ntg", str(gen), "-t", str(threads)]
    command += ["-npl", ",".join(str(k) for k in counts), "--output-format", "jsonl"]
    if prompt <= SHORT_PROMPT_TOKENS:
        command.append("-kvu")
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row["pl"]: row["speed_tg"] for row in rows}


# ---------------------------------------------------------------- our backend


class Recorder:
    """A chat model that passes calls through and keeps each call's messages and completion."""

    def __init__(self, model: Any) -> None:
        self.model, self.spec, self.calls = model, model.spec, []

    async def agenerate(self, messages: list[ChatMessage], params: SamplingParams) -> list[Completion]:
        completions = await self.model.agenerate(messages, params)
        self.calls.append((list(messages), completions[0]))
        return completions

    async def aclose(self) -> None:
        pass


def filler_prompt(tokens: int, variant: int = 0) -> list[ChatMessage]:
    """A user message of about ``tokens`` tokens that asks for a long answer; each ``variant`` differs from
    its first token, so none reuses another's cache."""
    lines = " ".join(f"Column c{i} holds values such as {i * 37 % 101} and {i * 53 % 89}." for i in range(tokens // 13))
    ask = "Now count from 1 to 1000, separated by commas."
    return [ChatMessage(role="user", content=f"Table {variant}. {lines}\n{ask}")]


async def timed(model: Any, messages: list[ChatMessage], **params: Any) -> tuple[float, list[Completion]]:
    started = time.perf_counter()
    completions = await model.agenerate(messages, SamplingParams(temperature=0, **params))
    return time.perf_counter() - started, completions


async def single_stream(
    gguf: Path,
    threads: int | None,
    prompt_tokens: int,
    gen_tokens: int,
    repeats: int = REPEATS,
    adapter: Path | None = None,
) -> tuple[float, float]:
    """Prompt tokens/s of a cold prompt of ``prompt_tokens``; generation tokens/s after a short prompt, as
    llama-bench measures it (generation slows as the context grows). Each is the mean over ``repeats``
    runs, as llama-bench's ``avg_ts``."""
    model = LlamaCppModel(gguf, n_threads=threads, parallel=1, adapter=adapter)
    try:
        short = filler_prompt(0)
        await timed(model, short, max_tokens=1)  # the weights are read in once (llama-bench warms up too)
        prompt_speeds, gen_speeds = [], []
        for variant in range(1, repeats + 1):
            read = model.engine.stats.evaluated_tokens
            seconds, _ = await timed(model, filler_prompt(prompt_tokens, variant), max_tokens=1)
            prompt_speeds.append((model.engine.stats.evaluated_tokens - read) / seconds)  # less the cached opening
        await timed(model, short, max_tokens=1)
        for _ in range(repeats):
            seconds, [long] = await timed(model, short, max_tokens=gen_tokens)  # the prompt is cached now
            gen_speeds.append(long.completion_tokens / seconds)
        return statistics.mean(prompt_speeds), statistics.mean(gen_speeds)
    finally:
        model.close()


async def record_trajectory() -> list[tuple[list[ChatMessage], Completion]]:
    """Three turns of our agent (DataMind dialect, real sandbox) on the first DABench task, as a model saw and
    answered them. The answers are scripted first steps of an analysis (the rows, the shape and columns,
    missing values), so every run measures the same prompts; the small models often answer sooner."""
    task = load_dabench()[0]
    name = Path(task.files[0]).name
    code = [
        f"df = pd.read_csv({name!r})\nprint(df.head())",
        "print(df.shape)\nprint(df.columns.tolist())",
        "print(df.isna().sum().sum())",
    ]
    script = [f"<think>Look.</think>\n<code>\n```python\nimport pandas as pd\n{cell}\n```\n</code>" for cell in code]
    model = Recorder(ReplayModel(script, per_turn=True))
    await Agent(model, AgentConfig(max_turns=3)).arun(task)
    return model.calls


async def prefix_reuse(gguf: Path, threads: int, calls: list[tuple[list[ChatMessage], Completion]]) -> dict:
    warm = LlamaCppModel(gguf, n_threads=threads, parallel=1)
    try:
        turn1, [first] = await timed(warm, calls[0][0], max_tokens=1)
        for messages, completion in calls[:2]:
            await warm.ascore(messages, completion.token_ids or completion.text)  # leaves what generation left
        read = warm.engine.stats.evaluated_tokens
        turn3_warm, [third] = await timed(warm, calls[2][0], max_tokens=1)
        read = warm.engine.stats.evaluated_tokens - read
    finally:
        warm.close()
    cold = LlamaCppModel(gguf, n_threads=threads, parallel=1)
    try:
        turn3_cold, _ = await timed(cold, calls[2][0], max_tokens=1)
    finally:
        cold.close()
    return {
        "prompt_tokens": [first.prompt_tokens, third.prompt_tokens],
        "turn3_read_tokens": read,
        "ttft_turn1_s": turn1,
        "ttft_turn3_warm_s": turn3_warm,
        "ttft_turn3_cold_s": turn3_cold,
        "ratio": turn3_warm / turn3_cold,
    }


async def shared_prefix(gguf: Path, threads: int, messages: list[ChatMessage]) -> dict:
    times = {}
    for n in (1, 4):
        model = LlamaCppModel(gguf, n_threads=threads, parallel=4)
        try:
            started = time.perf_counter()
            await model.agenerate(messages, SamplingParams(temperature=0.8, n=n, max_tokens=1, seed=0))
            times[n] = time.perf_counter() - started
        finally:
            model.close()
    return {"n1_s": times[1], "n4_s": times[4], "ratio": times[4] / times[1]}


async def batching(
    gguf: Path, threads: int, gen_tokens: int, prompt_tokens: int, counts: tuple[int, ...], adapter: Path | None = None
) -> tuple[dict[int, float], int]:
    """Aggregate generation tokens/s with each count of different prompts of about ``prompt_tokens`` at
    once, and how many tokens a prompt had."""
    model = LlamaCppModel(gguf, n_threads=threads, parallel=max(counts), adapter=adapter)
    speeds = {}
    try:
        for k in counts:
            filler = filler_prompt(prompt_tokens)[0].content
            prompts = [[ChatMessage(role="user", content=f"Case {k}-{j}. {filler}")] for j in range(k)]
            await asyncio.gather(*(model.agenerate(p, SamplingParams(temperature=0, max_tokens=1)) for p in prompts))
            started = time.perf_counter()
            results = await asyncio.gather(
                *(model.agenerate(p, SamplingParams(temperature=0, max_tokens=gen_tokens)) for p in prompts)
            )
            seconds = time.perf_counter() - started
            speeds[k] = sum(r[0].completion_tokens for r in results) / seconds
    finally:
        model.close()
    return speeds, results[0][0].prompt_tokens


async def while_busy(gguf: Path, threads: int, gen_tokens: int) -> dict[int, float]:
    """Generation tokens/s while another process spins on one core: with the default thread count (which
    follows the free cores; key 0), ``threads`` and ``threads - 1``."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        counts = sorted({0, threads, max(1, threads - 1)})
        return {n: (await single_stream(gguf, n or None, 64, gen_tokens))[1] for n in counts}
    finally:
        spinner.kill()
        spinner.wait()


async def adapter_cost(name: str, adapter: Path, args: argparse.Namespace) -> dict:
    """The base model against ``name?adapter=FOLDER``, alternated, each figure the mean of ``REPEATS`` runs."""
    gguf = model_path(name)
    print(f"\n== {name} with the adapter {adapter}, {args.threads} threads", flush=True)
    runs: dict[str, list[tuple[float, float, float]]] = {"base": [], "adapter": []}
    for _ in range(REPEATS):
        for label, path in (("base", None), ("adapter", adapter)):
            pp, tg = await single_stream(gguf, args.threads, args.prompt_tokens, args.gen_tokens, 1, path)
            four, _ = await batching(gguf, args.threads, args.gen_tokens, 0, (4,), path)
            runs[label].append((pp, tg, four[4]))
    means = {label: [statistics.mean(run[i] for run in values) for i in range(3)] for label, values in runs.items()}
    for i, what in enumerate(("prompt tokens/s", "generation tokens/s", "4 at once tokens/s")):
        base, adapted = means["base"][i], means["adapter"][i]
        print(f"{what:22} base {base:7.1f}   adapter {adapted:7.1f}   ratio {adapted / base:.2f}")
    return {"adapter": str(adapter), "base": means["base"], "with_adapter": means["adapter"]}


# ---------------------------------------------------------------- the run


def best_reference(
    builds: dict[str, Path], gguf: Path, args: argparse.Namespace
) -> tuple[dict[str, tuple[float, float]], Path]:
    """llama-bench's prompt and generation tokens/s in each build that runs here, and the faster build's tools."""
    speeds = {}
    for build, tools in builds.items():
        try:
            speeds[build] = llama_bench(tools, gguf, args.prompt_tokens, args.gen_tokens, args.threads)
        except subprocess.CalledProcessError as exc:
            crash = f"killed by {signal.Signals(-exc.returncode).name}" if exc.returncode < 0 else "failed"
            print(f"llama-bench ({build}) {crash}: not a working configuration here")
            continue
        print(f"llama-bench ({build}): prompt {speeds[build][0]:.1f}, generation {speeds[build][1]:.1f} tokens/s")
    if not speeds:
        raise SystemExit("no build of llama-bench runs on this machine")
    return speeds, builds[max(speeds, key=lambda build: speeds[build][1])]


async def bench_model(name: str, builds: dict[str, Path], args: argparse.Namespace) -> dict:
    gguf = model_path(name)
    print(f"\n== {name}: {gguf.name}, {args.threads} threads", flush=True)
    references, tools = best_reference(builds, gguf, args)
    ref_pp, ref_tg = (max(speed[i] for speed in references.values()) for i in (0, 1))
    pp, tg = await single_stream(gguf, args.threads, args.prompt_tokens, args.gen_tokens)
    print(f"prompt tokens/s      ours {pp:7.1f}   llama-bench (best) {ref_pp:7.1f}   ratio {pp / ref_pp:.2f}")
    print(f"generation tokens/s  ours {tg:7.1f}   llama-bench (best) {ref_tg:7.1f}   ratio {tg / ref_tg:.2f}")
    calls = await record_trajectory()
    result: dict[str, Any] = {"pp": pp, "tg": tg, "llama_bench_pp": ref_pp, "llama_bench_tg": ref_tg}
    result["llama_bench"] = {build: {"pp": speed[0], "tg": speed[1]} for build, speed in references.items()}
    reuse = await prefix_reuse(gguf, args.threads, calls)
    (first, third), read = reuse["prompt_tokens"], reuse["turn3_read_tokens"]
    print(
        f"time to first token  turn 1 {reuse['ttft_turn1_s']:.2f} s ({first} tokens); turn 3 ({third} tokens, "
        f"{read} read) warm {reuse['ttft_turn3_warm_s']:.2f} s, cold {reuse['ttft_turn3_cold_s']:.2f} s: "
        f"ratio {reuse['ratio']:.2f}"
    )
    result["prefix_reuse"] = reuse
    shared = await shared_prefix(gguf, args.threads, calls[0][0])
    print(f"n = 4 samples        {shared['n4_s']:.2f} s against {shared['n1_s']:.2f} s for one: {shared['ratio']:.2f}x")
    for prompt, counts in ((0, CONCURRENCY), LONG_CONTEXT):
        ours, read = await batching(gguf, args.threads, args.gen_tokens, prompt, counts)
        reference = batched_bench(tools, gguf, args.gen_tokens, args.threads, max(read, SHORT_PROMPT_TOKENS), counts)
        print(f"batching after {read}-token prompts (llama-batched-bench: {max(read, SHORT_PROMPT_TOKENS)}):")
        for k in counts:
            print(
                f"{k} at once           ours {ours[k]:6.1f} t/s ({ours[k] / ours[1]:.2f}x one)   llama-batched-bench "
                f"{reference[k]:6.1f} t/s ({reference[k] / reference[1]:.2f}x one)   ratio {ours[k] / reference[k]:.2f}"
            )
        result[f"batching_{prompt}"] = {"prompt_tokens": read, "ours": ours, "llama_batched_bench": reference}
    busy = await while_busy(gguf, args.threads, args.gen_tokens)
    shown = ", ".join(f"{n or 'free-core'} threads {speed:.1f} t/s" for n, speed in busy.items())
    print(f"one core busy        {shown}")
    return result | {"shared_prefix": shared, "busy": busy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="small,tiny")
    parser.add_argument("--threads", type=int, default=available_cores())
    parser.add_argument("--prompt-tokens", type=int, default=1400)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--llama-tools", type=Path, help="a folder with llama-bench and llama-batched-bench")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--adapter", help="MODEL=FOLDER: measure only what this LoRA adapter costs the model")
    args = parser.parse_args()
    if args.adapter:
        name, folder = args.adapter.split("=", 1)
        results = {name: asyncio.run(adapter_cost(name, Path(folder), args))}
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    cpu = llama_cpu()
    print(f"CPU: {cpu_name()} ({available_cores()} cores); {cpu.describe()}", flush=True)
    builds = {"given": args.llama_tools} if args.llama_tools else reference_tools(cache_dir() / "bench")
    results: dict[str, Any] = {"cpu": cpu_name(), "library": asdict(cpu)}
    results |= {name: asyncio.run(bench_model(name, builds, args)) for name in args.models.split(",")}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
