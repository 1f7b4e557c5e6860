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

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        system = body["messages"][0]["content"]
        text = "Formatted answer: 42" if "Formatted answer" in system else "<answer>42</answer>"
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


@pytest.fixture
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


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
