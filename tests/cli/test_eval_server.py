"""``datalyst eval run`` against a local keep-alive server speaking the OpenAI chat-completions protocol."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _ChatHandler(BaseHTTPRequestHandler):
    """Answers every chat completion with the answer written in the requesting dialect's own form."""

    protocol_version = "HTTP/1.1"  # keeps connections alive, as vLLM, SGLang and llama.cpp's server do

    def reply(self, system: str) -> str:
        return "Formatted answer: 42" if "Formatted answer" in system else "<answer>42</answer>"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = self.reply(body["messages"][0]["content"])
        message = {"role": "assistant", "content": text}
        payload = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass


class _FailingHandler(_ChatHandler):
    """Answers every turn with a DataMind cell that raises, so every trajectory ends in execution_errors."""

    def reply(self, system: str) -> str:
        return "<think>Try.</think>\n<code>\n```python\nraise ValueError('always')\n```\n</code>"


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def server_url() -> Iterator[str]:
    yield from _serve(_ChatHandler)


@pytest.fixture
def failing_server_url() -> Iterator[str]:
    yield from _serve(_FailingHandler)


@pytest.mark.parametrize("dialects", [["datamind"], ["datamind", "jupiter"]])
def test_eval_run_against_a_keep_alive_server(datalyst, tmp_path, server_url, dialects):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": str(i), "question": "Six times seven?", "answer": 42}) + "\n"
                             for i in range(3)))  # fmt: skip
    out = tmp_path / "run"
    args = ["--bench", "tasks", "--bench-path", str(tasks), "--out", str(out), "--trials", "2"]
    args += ["--model", f"openai:m@{server_url}", "--concurrency", "2"]
    for dialect in dialects:
        args += ["--dialect", dialect]
    done = datalyst("eval", "run", *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr
    for dialect in dialects:
        assert f"| {dialect} | 6/6 | 100.0 [" in done.stdout


def test_a_finished_run_whose_cells_all_failed_reruns_nothing(datalyst, tmp_path, failing_server_url):
    """Trajectories that ended in execution_errors are finished: running the command again must not give some a
    second chance (that would bias every resumed run)."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": str(i), "question": "Six times seven?", "answer": 42}) + "\n"
                             for i in range(12)))  # fmt: skip
    args = ["eval", "run", "--bench", "tasks", "--bench-path", str(tasks), "--out", str(tmp_path / "run")]
    args += ["--trials", "1", "--concurrency", "2", "--model", f"openai:m@{failing_server_url}"]
    for _ in range(2):
        done = datalyst(*args)
        assert done.returncode == 0, done.stderr
    lines = (tmp_path / "run" / "trajectories" / "datamind.jsonl").read_text().splitlines()
    assert len(lines) == 12 and {json.loads(line)["termination"] for line in lines} == {"execution_errors"}
