"""The child side of choosing llama.cpp's CPU library (:mod:`datalyst.llm._cpu`), run as a script.

``python _cpu_probe.py scores FOLDER`` prints, as JSON, the score llama.cpp's own loader gives each CPU library
in FOLDER on this CPU (0: an instruction it needs is missing). ``python _cpu_probe.py run FOLDER LIBRARY
EXTRA_BUFFERS MODEL`` loads the probe model with that one library (``built-in`` for a build with its CPU code
linked in) and decodes a batch and then a single token; it exits 0 when nothing crashed and the logits are
finite numbers. A library that executes an instruction the CPU refuses kills this process, not the caller.

Only the standard library is imported at the top, so the script starts fast.
"""

from __future__ import annotations

import ctypes
import json
import math
import resource
import sys
from pathlib import Path

BUILT_IN = "built-in"
"""The library name of a build whose CPU code is linked into libggml (no libraries to choose from)."""
BATCH = 32
"""Tokens decoded at once: several rows, so matrix products take the tiled kernels (AMX's among them)."""
THREADS = 2


def scores(folder: Path) -> dict[str, int]:
    """llama.cpp's score of each CPU library in ``folder`` on this CPU (what its own loader ranks them by)."""
    import llama_cpp  # loads libggml-base, which the libraries link against

    assert llama_cpp.llama_cpp._lib
    found = {}
    for path in sorted(folder.glob("libggml-cpu-*.so")):
        score = ctypes.CDLL(str(path)).ggml_backend_score
        score.restype = ctypes.c_int
        found[path.name.removeprefix("libggml-cpu-").removesuffix(".so")] = int(score())
    return found


def run(folder: Path, library: str, extra_buffers: bool, model_path: Path) -> str | None:
    """Decode with one CPU library: None when it worked, else what went wrong (a crash ends the process)."""
    import llama_cpp

    if library != BUILT_IN:
        load = llama_cpp.llama_cpp._lib.ggml_backend_load
        load.argtypes, load.restype = [ctypes.c_char_p], ctypes.c_void_p
        if not load(str(folder / f"libggml-cpu-{library}.so").encode()):
            return f"llama.cpp could not load libggml-cpu-{library}.so"
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = extra_buffers
    model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), params)
    if not model:
        return "llama.cpp could not load the probe model"
    context_params = llama_cpp.llama_context_default_params()
    context_params.n_ctx = context_params.n_batch = context_params.n_ubatch = 2 * BATCH
    context_params.n_threads = context_params.n_threads_batch = THREADS
    context = llama_cpp.llama_init_from_model(model, context_params)
    if not context:
        return "llama.cpp could not make a context for the probe model"
    for first, count in ((0, BATCH), (BATCH, 1)):  # a batch (tiled products), then one token (vector products)
        tokens = (llama_cpp.llama_token * count)(*range(first, first + count))
        if llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(tokens, count)) != 0:
            return "llama_decode failed on the probe model"
    logits = llama_cpp.llama_get_logits_ith(context, -1)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    if not all(math.isfinite(logits[i]) for i in range(n_vocab)):
        return "the probe model's logits are not finite numbers"
    return None


def main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is an expected answer, not worth a core file
    if argv[0] == "scores":
        print(json.dumps(scores(Path(argv[1]))))
        return 0
    problem = run(Path(argv[1]), argv[2], argv[3] == "1", Path(argv[4]))
    if problem is not None:
        print(problem, file=sys.stderr)
    return 0 if problem is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
