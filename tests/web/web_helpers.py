"""Shared by the web tests: a real server in a thread, recorded model scripts, eval runs and event parsing."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from datalyst.agent import AgentConfig
from datalyst.data import _reader
from datalyst.eval import EVAL_SAMPLING, EvalConfig, run_eval
from datalyst.llm import ReplayModel
from datalyst.tasks import load_dabench, write_tasks
from datalyst.web import ServeConfig, create_app, listen

TOKEN = "test-token"
HOST = "127.0.0.1"
ORIGIN = f"http://{HOST}"


def code(source: str, thought: str = "Next step.") -> str:
    return f"<think>{thought}</think>\n<code>\n```python\n{source}\n```\n</code>"


def answer(text: str) -> str:
    return f"<think>I have it.</think>\n<answer>{text}</answer>"


PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')"
SCRIPT = [
    code("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))", "I load the file."),
    code(PLOT, "A picture helps."),
    answer("@rows[20]"),
    code("print(df['revenue'].max())", "df is still defined."),  # a follow-up question
    answer("the largest sale"),
]


def script_spec(path: Path, outputs: list[str], **options: object) -> str:
    path.write_text("".join(json.dumps(text) + "\n" for text in outputs))
    query = "&".join(f"{key}={str(value).lower()}" for key, value in options.items())
    return f"replay:{path}?per_turn=true{'&' + query if query else ''}"


def serve_config(tmp_path: Path, **changes: Any) -> ServeConfig:
    settings: dict[str, Any] = {"token": TOKEN, "models": [script_spec(tmp_path / "script.jsonl", SCRIPT)]}
    return ServeConfig(**{**settings, **changes})


def headers(origin: str | None = ORIGIN) -> dict[str, str]:
    found = {"Authorization": f"Bearer {TOKEN}"}
    return found | ({"Origin": origin} if origin else {})


def events(text: str, *, written: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a finished stream, in order; with ``written``, the model's text as it wrote it
    too (``text`` events, piece by piece)."""
    found = []
    for message in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in message.splitlines())
        if written or fields["event"] != "text":
            found.append((fields["event"], json.loads(fields["data"])))
    return found


@contextlib.contextmanager
def live_server(config: ServeConfig) -> Iterator[tuple[str, Any]]:
    """The app served by uvicorn on a free loopback port, in a thread: its base address and the app."""
    app = create_app(config)
    listener = listen(HOST, 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://{HOST}:{listener.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


def eval_run(out: Path, outputs: list[str], *, trials: int = 2) -> Path:
    """A finished run of the first three DABench questions (0, 5, 6) by a recorded model."""
    out.mkdir(parents=True)
    tasks = out.parent / f"{out.name}-tasks.jsonl"
    write_tasks(load_dabench()[:3], tasks)
    config = EvalConfig(bench="tasks", bench_path=str(tasks), model="replay", dialects=["datamind"], trials=trials,
                        agent=AgentConfig(sampling=EVAL_SAMPLING, max_turns=3), concurrency=2)  # fmt: skip
    run_eval(config, out, ReplayModel(outputs, per_turn=True), progress=False)
    return out


RIGHT_FOR_Q0 = [code("print(1 + 1)"), answer("@mean_fare[34.65]")]
"""Right for DABench question 0 only."""
NO_ANSWER = [code("print(1 + 1)"), code("print(2)"), code("print(3)")]


def wide_csv(columns: int = 300_000) -> bytes:
    """A CSV that takes seconds to describe: a header and a row of ``columns`` fields."""
    return (",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("1" * columns) + "\n").encode()


def readers() -> list[str]:
    """The reader processes now forked by this process's reader server."""
    if _reader._server is None:
        return []
    server = _reader._server[0].pid
    return Path(f"/proc/{server}/task/{server}/children").read_text().split()
