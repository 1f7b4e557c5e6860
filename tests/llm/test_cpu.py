"""Choosing llama.cpp's CPU library: ranking, trial runs that may crash, the cache, and the one-line failure.

The kinds of x86-64 CPU are simulated by their /proc/cpuinfo flags, scored the way llama.cpp scores its
libraries (checked against the real scores on this machine); a faulting library is simulated by a trial
that reports a SIGILL, and, for real, by a library built here whose start executes an illegal instruction.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from datalyst.errors import ModelUnavailable
from datalyst.llm import _cpu
from datalyst.llm._cpu import BUILT_IN, Candidate, CpuPath, candidates, choose, cpu_path

AVX512 = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")
HASWELL = ("sse4_2", "avx", "f16c", "fma", "avx2", "bmi2")
ICELAKE = (*HASWELL, *AVX512, "avx512vbmi", "avx512_vnni")
VARIANTS = {
    "x64": (),
    "sse42": ("sse4_2",),
    "sandybridge": ("sse4_2", "avx"),
    "ivybridge": ("sse4_2", "avx", "f16c"),
    "piledriver": ("sse4_2", "avx", "f16c", "fma"),
    "haswell": HASWELL,
    "skylakex": (*HASWELL, *AVX512),
    "cannonlake": (*HASWELL, *AVX512, "avx512vbmi"),
    "cascadelake": (*HASWELL, *AVX512, "avx512_vnni"),
    "icelake": ICELAKE,
    "cooperlake": (*HASWELL, *AVX512, "avx512_vnni", "avx512_bf16"),
    "zen4": (*ICELAKE, "avx512_bf16"),
    "alderlake": (*HASWELL, "avx_vnni"),
    "sapphirerapids": (*ICELAKE, "avx512_bf16", "amx_tile", "amx_int8"),
}
"""Each library's instruction sets (llama.cpp's CMake list of variants), as /proc/cpuinfo names them."""
WEIGHTS = {"fma": 1, "f16c": 2, "sse4_2": 4, "bmi2": 8, "avx": 16, "avx2": 32, "avx_vnni": 64, "avx512f": 128}
WEIGHTS |= {"avx512vbmi": 256, "avx512_bf16": 512, "avx512_vnni": 1024, "amx_int8": 2048}
CPUS = {
    "AVX2 only": HASWELL,
    "AVX-512 without AMX": (*ICELAKE, "avx512_bf16"),
    "AMX advertised": (*ICELAKE, "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"),
}
SIGILL = f"its trial run was killed by SIGILL ({signal.strsignal(signal.SIGILL)})"


def simulated_scores(flags: tuple[str, ...]) -> dict[str, int]:
    """llama.cpp's score of each library on a CPU with ``flags``: 0 when one of its instruction sets is missing."""
    return {
        name: 1 + sum(WEIGHTS.get(f, 0) for f in needs) if set(needs) <= set(flags) else 0
        for name, needs in VARIANTS.items()
    }


def trials_where(faulting: set[str]):
    """A trial run that crashes with SIGILL for the ``faulting`` candidates (by their text) and runs the others."""
    tried: list[str] = []

    def trial(candidate: Candidate) -> str | None:
        tried.append(str(candidate))
        return SIGILL if str(candidate) in faulting else None

    return trial, tried


@pytest.mark.parametrize(
    ("cpu", "faulting", "library", "tried"),
    [
        ("AVX2 only", set(), "haswell", ["haswell"]),
        ("AVX-512 without AMX", set(), "zen4", ["zen4"]),
        ("AMX advertised", set(), "sapphirerapids", ["sapphirerapids"]),
        ("AMX advertised", {"sapphirerapids"}, "zen4", ["sapphirerapids", "zen4"]),
    ],
    ids=["avx2", "avx512", "amx-working", "amx-faulting"],
)
def test_the_best_library_that_survives_its_trial_is_chosen(cpu, faulting, library, tried):
    trial, seen = trials_where(faulting)
    path = choose(candidates(simulated_scores(CPUS[cpu])), trial, "/libs")
    assert (path.library, path.extra_buffers, seen) == (library, True, tried)
    assert path.crashed == dict.fromkeys(faulting, SIGILL)
    assert path.describe().startswith(f"llama.cpp CPU library {library}")
    if faulting:  # never a silent fall back: what crashed is in the line footers print
        assert f"(not sapphirerapids: {SIGILL})" in path.describe()


def test_libraries_rank_by_score_and_come_again_without_repacking():
    ranked = candidates({"haswell": 64, "x64": 1, "zen4": 1984, "alderlake": 0})
    assert [str(c) for c in ranked] == [
        "zen4",
        "haswell",
        "x64",
        "zen4 without weight repacking",
        "haswell without weight repacking",
        "x64 without weight repacking",
    ]


def test_a_built_in_library_that_faults_with_repacking_runs_without_it():
    """A native build on an AMX machine that faults: only its extra buffer types (AMX's tiles) can be dropped."""
    trial, seen = trials_where({BUILT_IN})
    path = choose(candidates({BUILT_IN: 1}), trial, None)
    assert (path.library, path.extra_buffers, path.folder) == (BUILT_IN, False, None)
    assert seen == [BUILT_IN, f"{BUILT_IN} without weight repacking"]
    assert "weight repacking off (slower: reinstall llama-cpp-python" in path.describe()


def test_when_nothing_runs_the_error_is_one_line_with_the_fix():
    trial, _ = trials_where({"haswell", "x64", "haswell without weight repacking", "x64 without weight repacking"})
    with pytest.raises(ModelUnavailable) as caught:
        choose(candidates({"haswell": 64, "x64": 1}), trial, "/libs")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("llama.cpp cannot run on this CPU (")
    assert f"haswell: {SIGILL}" in message and _cpu.REINSTALL in message


def test_a_cpu_no_library_supports_is_told_so():
    with pytest.raises(ModelUnavailable, match="none of its CPU libraries supports it"):
        choose(candidates({"haswell": 0}), lambda _: None, "/libs")


# ---------------------------------------------------------------- with the real llama.cpp


@pytest.fixture
def real_libraries() -> Path:
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs pip install 'datalyst[llamacpp]'")
    folder = _cpu.library_folder(Path(llama_cpp.__file__).parent)
    if folder is None:
        pytest.skip("this llama-cpp-python has its CPU code linked in (no libraries to choose from)")
    return folder


def test_the_simulated_scores_are_llama_cpps_on_this_cpu(real_libraries):
    flags = tuple(_cpu._cpuinfo()["flags"].split())
    assert _cpu._scores(real_libraries) == simulated_scores(flags)


def test_a_library_that_dies_on_an_illegal_instruction_is_passed_over(real_libraries, tmp_path, monkeypatch):
    """A library that advertises the best score and crashes when it starts, beside the real ones: the trial
    runs in a child, the crash is named, the next best is chosen and remembered."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    bin_dir, package = tmp_path / "site" / "bin", tmp_path / "site" / "llama_cpp"
    (package / "lib").mkdir(parents=True)
    bin_dir.mkdir()
    for library in real_libraries.glob("libggml-cpu-*.so"):
        (bin_dir / library.name).symlink_to(library)
    source = tmp_path / "faulty.c"
    source.write_text(
        "int ggml_backend_score(void) { return 1 << 20; }\nvoid *ggml_backend_init(void) { __builtin_trap(); }\n"
    )
    subprocess.run(["cc", "-shared", "-fPIC", "-o", bin_dir / "libggml-cpu-faulty.so", source], check=True)
    monkeypatch.setenv("DATALYST_CACHE", str(tmp_path / "cache"))
    best = max((s, name) for name, s in _cpu._scores(real_libraries).items())[1]

    path = cpu_path(package)
    assert path == CpuPath(best, True, {"faulty": SIGILL}, str(bin_dir))
    monkeypatch.setattr(_cpu, "_trial", lambda *_: pytest.fail("the choice was not remembered"))
    assert cpu_path(package) == path


def test_a_crash_is_told_by_the_signals_name():
    done = subprocess.run(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"], capture_output=True, text=True
    )
    assert _cpu.ending(done) == SIGILL
    failed = subprocess.CompletedProcess([], 1, "", "loading...\nllama.cpp could not load the probe model\n")
    assert _cpu.ending(failed) == "its trial run failed (llama.cpp could not load the probe model)"


def test_the_models_command_says_which_library_runs(real_libraries, tmp_path):
    env = {**os.environ, "DATALYST_CACHE": str(tmp_path)}
    run = [sys.executable, "-m", "datalyst", "models"]
    shown = subprocess.run([*run, "cpu", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    chosen = CpuPath(**json.loads(shown.stdout))
    assert _cpu._scores(real_libraries)[chosen.library] > 0 and chosen.folder == str(real_libraries)
    listed = subprocess.run([*run, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert chosen.describe() in listed.stdout
