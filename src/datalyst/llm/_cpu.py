"""Which of llama.cpp's CPU libraries runs models on this machine, chosen once by trying them.

A llama.cpp built with ``GGML_BACKEND_DL`` and ``GGML_CPU_ALL_VARIANTS`` (the README's install) carries one
CPU library per instruction set (``libggml-cpu-haswell.so``, ``-skylakex``, ``-zen4``, ``-sapphirerapids``...).
llama.cpp ranks them by the instructions the CPU advertises and loads the best. A CPU, a virtual one above
all, can advertise what it then refuses: on some cloud machines AMX is listed and its permission granted,
and the first tile instruction still kills the process with SIGILL.

So datalyst tries before it trusts. In a child process per candidate, best score first, a small model of
random weights (:func:`write_probe_model`: the quantization types of common GGUF files) loads with that one
library and decodes a batch and a token, which runs the kernels a chat model runs (``_cpu_probe.py``). The
first candidate whose child ends cleanly is loaded; one that crashed is named in :attr:`CpuPath.crashed`,
never used. When every library fails with llama.cpp's extra buffer types (weight repacking, AMX's tiles),
each is tried again without them. A build with its CPU code linked in has one candidate, ``built-in``, tried
the same two ways. When nothing runs, :class:`~datalyst.errors.ModelUnavailable` says so in one line.

The choice is kept in ``$DATALYST_CACHE/llama-cpu.json`` per machine (CPU model and flags, kernel) and
llama.cpp build (its libraries' names, sizes and times): the trials run once, in about two seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import json
import platform
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datalyst.errors import ModelUnavailable
from datalyst.files import locked, write_atomic
from datalyst.llm._cpu_probe import BATCH, BUILT_IN
from datalyst.paths import cache_dir

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BUILT_IN",
    "INSTALL_FIX",
    "PORTABLE_BUILD",
    "Candidate",
    "CpuPath",
    "candidates",
    "choose",
    "cpu_path",
    "llama_cpu",
    "load_cpu_library",
]

PORTABLE_BUILD = "-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
"""The ``CMAKE_ARGS`` of a llama.cpp that runs on any x86-64 CPU at its best (a library per instruction set),
without the vision library datalyst does not use."""
INSTALL_FIX = f"CMAKE_ARGS='{PORTABLE_BUILD}' pip install 'datalyst[llamacpp]'"
REINSTALL = f"CMAKE_ARGS='{PORTABLE_BUILD}' pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python"
TRIAL_TIMEOUT_S = 120.0
_PROBE = Path(__file__).with_name("_cpu_probe.py")
CACHE_FILE = "llama-cpu.json"


@dataclass(frozen=True)
class Candidate:
    """A way to run llama.cpp's CPU code: one of its libraries, with or without the extra buffer types."""

    library: str
    extra_buffers: bool = True

    def __str__(self) -> str:
        return self.library if self.extra_buffers else f"{self.library} without weight repacking"


@dataclass(frozen=True)
class CpuPath:
    """The CPU library llama.cpp runs here, and the better-ranked candidates whose trial crashed."""

    library: str
    """The library's instruction-set name (``zen4``, ``icelake``, ``haswell``...), or ``built-in``."""
    extra_buffers: bool = True
    """llama.cpp may repack weights into its extra buffer types (faster; AMX's tiles are one of them)."""
    crashed: dict[str, str] = field(default_factory=dict)
    """Each candidate tried before this one, and how its trial ended."""
    folder: str | None = None
    """The folder of the CPU libraries (None: built in)."""

    def describe(self) -> str:
        """One line for footers and listings."""
        text = f"llama.cpp CPU library {self.library}"
        if not self.extra_buffers:
            text += ", weight repacking off (slower: reinstall llama-cpp-python, docs/models.md)"
        if self.crashed:
            text += " (not " + "; ".join(f"{name}: {how}" for name, how in self.crashed.items()) + ")"
        return text


def candidates(scores: Mapping[str, int]) -> list[Candidate]:
    """The libraries this CPU supports (score above 0), best first, with extra buffer types; then without."""
    ranked = sorted((name for name, score in scores.items() if score > 0), key=lambda name: (-scores[name], name))
    return [Candidate(name) for name in ranked] + [Candidate(name, extra_buffers=False) for name in ranked]


def choose(trials: Sequence[Candidate], trial: Callable[[Candidate], str | None], folder: str | None) -> CpuPath:
    """The first candidate whose ``trial`` reports no problem; ModelUnavailable when none runs."""
    crashed: dict[str, str] = {}
    for candidate in trials:
        if (problem := trial(candidate)) is None:
            return CpuPath(candidate.library, candidate.extra_buffers, crashed, folder)
        crashed[str(candidate)] = problem
    tried = "; ".join(f"{name}: {how}" for name, how in crashed.items()) or "none of its CPU libraries supports it"
    raise ModelUnavailable(
        f"llama.cpp cannot run on this CPU ({cpu_name()}): {tried}. Reinstall llama-cpp-python with a library per "
        f"instruction set: {REINSTALL}"
    )


def library_folder(package: Path) -> Path | None:
    """Where the ``llama_cpp`` package in ``package`` keeps its CPU libraries (None: linked into libggml)."""
    for where in (package / "lib", package.parent / "bin"):  # the wheel puts them beside the package
        if any(where.glob("libggml-cpu-*.so")):
            return where
    return None


def llama_cpu(*, again: bool = False) -> CpuPath:
    """The CPU library the installed llama-cpp-python runs here (ModelUnavailable without llama-cpp-python, or
    when none runs); ``again`` forgets the remembered choice and runs the trials anew."""
    found = importlib.util.find_spec("llama_cpp")
    if found is None or not found.submodule_search_locations:
        raise ModelUnavailable(f"llama.cpp is not installed (the Python package llama_cpp); {INSTALL_FIX}")
    return cpu_path(Path(next(iter(found.submodule_search_locations))), again=again)


def cpu_path(package: Path, *, again: bool = False) -> CpuPath:
    """The CPU library for the ``llama_cpp`` package in ``package``: remembered, or chosen now by trial runs."""
    folder = library_folder(package)
    key = _key([package / "lib", *([folder] if folder else [])])
    cache = cache_dir() / CACHE_FILE
    with locked(cache.with_name(f".{CACHE_FILE}.lock")):  # processes starting together run the trials once
        known = _read(cache)
        if not again and isinstance(entry := known.get(key), dict):
            with contextlib.suppress(TypeError):  # an entry of another shape is chosen again
                return CpuPath(**entry)
        with tempfile.TemporaryDirectory(prefix="datalyst-cpu-") as tmp:
            model = Path(tmp) / "probe.gguf"
            write_probe_model(model)
            scores = _scores(folder) if folder is not None else {BUILT_IN: 1}
            chosen = choose(candidates(scores), lambda c: _trial(folder, c, model), str(folder) if folder else None)
        with contextlib.suppress(OSError):  # a cache that cannot be written costs the trials next time
            write_atomic(cache, json.dumps({**known, key: asdict(chosen)}, indent=1))
    return chosen


@functools.cache
def load_cpu_library(libllama: Any, package: Path) -> CpuPath:
    """Choose (or recall) the CPU library and register it with the libggml ``libllama`` uses; once a process.

    The library is loaded by name, never by llama.cpp's own ranking, which could pick a crashing one again;
    other backends beside it (``libggml-cuda.so``...) are loaded too. Looking the loader up through
    ``libllama`` matters: a wheel holds copies of libggml under several names, and a copy opened by another
    name would be another library."""
    path = cpu_path(package)
    if path.folder is not None:
        load = libllama.ggml_backend_load
        load.argtypes, load.restype = [ctypes.c_char_p], ctypes.c_void_p
        others = [p for p in Path(path.folder).glob("libggml-*.so") if not p.name.startswith("libggml-cpu-")]
        for library in [Path(path.folder) / f"libggml-cpu-{path.library}.so", *others]:
            if not load(str(library).encode()):
                raise ModelUnavailable(
                    f"llama.cpp could not load {library.name} from {path.folder}; reinstall llama-cpp-python: "
                    f"{REINSTALL}"
                )
    return path


def cpu_name() -> str:
    """The CPU's model name, as the kernel reports it."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def ending(done: subprocess.CompletedProcess[str]) -> str | None:
    """How a trial's child ended: None when cleanly, else in a few words (a signal by its name)."""
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        number = -done.returncode
        return f"its trial run was killed by {signal.Signals(number).name} ({signal.strsignal(number)})"
    lines = done.stderr.strip().splitlines()
    return f"its trial run failed ({lines[-1] if lines else f'exit status {done.returncode}'})"


def write_probe_model(path: Path) -> None:
    """A two-layer llama model of small random weights and no vocabulary (tokens are plain ids): the layers'
    matrices in the types of a Q4_K_M file, then in Q8_0, Q5_0, Q4_0, Q4_1, Q5_K, F16 and BF16."""
    try:
        import gguf
    except ImportError as exc:
        raise ModelUnavailable(f"choosing the CPU library of llama.cpp needs gguf ({exc}); {INSTALL_FIX}") from None
    import numpy as np

    q = gguf.GGMLQuantizationType
    layers = [
        {"attn_q": q.Q4_K, "attn_k": q.Q4_K, "attn_v": q.Q6_K, "attn_output": q.Q4_K}
        | {"ffn_gate": q.Q4_K, "ffn_up": q.Q4_K, "ffn_down": q.Q6_K},
        {"attn_q": q.Q8_0, "attn_k": q.Q5_0, "attn_v": q.Q4_0, "attn_output": q.Q4_1}
        | {"ffn_gate": q.Q5_K, "ffn_up": q.F16, "ffn_down": q.BF16},
    ]
    embd, ff, vocab = 256, 512, 256  # multiples of 256, as k-quants and AMX's kernels need
    shapes = {name: (embd, embd) for name in ("attn_q", "attn_k", "attn_v", "attn_output")}
    shapes |= {"ffn_gate": (ff, embd), "ffn_up": (ff, embd), "ffn_down": (embd, ff)}
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(len(layers))
    writer.add_context_length(2 * BATCH)
    writer.add_embedding_length(embd)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("no_vocab")
    writer.add_vocab_size(vocab)
    writer.add_tensor("token_embd.weight", _weights(rng, q.Q4_K, (vocab, embd)), raw_dtype=q.Q4_K)
    writer.add_tensor("output_norm.weight", np.ones(embd, np.float32))
    writer.add_tensor("output.weight", _weights(rng, q.Q6_K, (vocab, embd)), raw_dtype=q.Q6_K)
    for index, types in enumerate(layers):
        for name in ("attn_norm", "ffn_norm"):
            writer.add_tensor(f"blk.{index}.{name}.weight", np.ones(embd, np.float32))
        for name, qtype in types.items():
            writer.add_tensor(f"blk.{index}.{name}.weight", _weights(rng, qtype, shapes[name]), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


_K_SCALES = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}
"""Byte offsets of the float16 scales in a block of each k-quant type. The ``gguf`` package cannot quantize
to these, so their blocks are random bytes with small, finite scales."""


def _weights(rng: np.random.Generator, qtype: Any, shape: tuple[int, int]) -> np.ndarray:
    """A matrix of small random weights in ``qtype``, as GGUF stores it (one row of bytes per row)."""
    import gguf
    import numpy as np

    if qtype.name in _K_SCALES:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        data = rng.integers(0, 256, (shape[0], shape[1] // block, size), dtype=np.uint8)
        for offset in _K_SCALES[qtype.name]:
            data[..., offset : offset + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
        return data.reshape(shape[0], -1)
    return gguf.quants.quantize((rng.standard_normal(shape) * 0.05).astype(np.float32), qtype)


def _scores(folder: Path) -> dict[str, int]:
    done = _child(["scores", str(folder)])
    if isinstance(done, str) or (problem := ending(done)) is not None:
        raise ModelUnavailable(
            f"llama.cpp's CPU libraries in {folder} could not be ranked on this CPU ({cpu_name()}): "
            f"{done if isinstance(done, str) else problem}; reinstall llama-cpp-python: {REINSTALL}"
        )
    return {str(name): int(score) for name, score in json.loads(done.stdout).items()}


def _trial(folder: Path | None, candidate: Candidate, model: Path) -> str | None:
    """None when ``candidate`` decodes the probe model in a child process, else how the child ended."""
    extra = "1" if candidate.extra_buffers else "0"
    done = _child(["run", str(folder or ""), candidate.library, extra, str(model)])
    return done if isinstance(done, str) else ending(done)


def _child(args: list[str]) -> subprocess.CompletedProcess[str] | str:
    """Run the probe script (``-P``: its own folder stays off ``sys.path``); a string when it hung."""
    try:
        command = [sys.executable, "-P", str(_PROBE), *args]
        return subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=TRIAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"its trial run did not end within {TRIAL_TIMEOUT_S:.0f} s"


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            name, _, value = line.partition(":")
            fields[name.strip()] = value.strip()
    return fields


def _key(folders: list[Path]) -> str:
    """What the choice depends on: the CPU, the kernel, and the llama.cpp build (the libraries in ``folders``)."""
    cpu = {name: value for name, value in _cpuinfo().items() if name in ("vendor_id", "model name", "flags")}
    files = [path for folder in folders for path in sorted(folder.glob("*.so*")) if path.is_file()]
    build = [(str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in files]
    facts = json.dumps({"cpu": cpu, "kernel": platform.release(), "build": build})
    return hashlib.sha256(facts.encode()).hexdigest()[:16]


def _read(cache: Path) -> dict[str, Any]:
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}
