"""OpenAIModel against a real loopback HTTP server with scripted faults (never a mock of the SDK)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable
from datalyst.llm._base import ChatMessage, Completion, Role, SamplingParams, TokenLogprob
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._openai import OpenAIModel
from datalyst.llm._registry import load_model

ASK = [ChatMessage(role=Role.SYSTEM, content="You analyse data."), ChatMessage(role=Role.USER, content="Rows?")]
SERVED = ["qwen-small", "llama-tiny"]
FAST = {"timeout_s": 5.0, "max_retries": 2}

Reply = tuple[int, dict[str, Any] | str, dict[str, str]]  # status, JSON body (or raw text), extra headers


@pytest.fixture(autouse=True)
def no_ambient_keys(monkeypatch):
    for name in ("DATALYST_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Server:
    """What the scripted server saw: request bodies, headers, and the most requests it held at once."""

    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth_headers: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    condition: threading.Condition = field(default_factory=threading.Condition)
    released: threading.Event = field(default_factory=threading.Event)


def answer(body: dict[str, Any], n: int | None = None) -> Reply:
    """A normal chat completion with ``n`` (default: the requested n) choices and logprobs if asked."""
    choices = []
    for index in range(body.get("n", 1) if n is None else n):
        text = f"answer {index}"
        logprobs = None
        if body.get("logprobs"):
            content = [{"token": t, "logprob": -0.25 * (i + 1), "bytes": None, "top_logprobs": []}
                       for i, t in enumerate(["answer", f" {index}"])]  # fmt: skip
            logprobs = {"content": content, "refusal": None}
        message = {"role": "assistant", "content": text}
        choices.append({"index": index, "message": message, "finish_reason": "stop", "logprobs": logprobs})
    usage = {"prompt_tokens": 12, "completion_tokens": 2 * len(choices), "total_tokens": 12 + 2 * len(choices)}
    payload = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"], "choices": choices}
    return 200, payload | {"usage": usage}, {}


def error(status: int, message: str, code: str | None = None, **headers: str) -> Reply:
    return status, {"error": {"message": message, "type": "error", "param": None, "code": code}}, headers


@contextmanager
def serve(script: Callable[[Server, int, dict[str, Any]], Reply]) -> Iterator[Server]:
    """A ThreadingHTTPServer on 127.0.0.1 whose POST /v1/chat/completions answers ``script(server, i, body)``."""
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                models = [{"id": name, "object": "model", "created": 0, "owned_by": "test"} for name in SERVED]
                self._send(200, {"object": "list", "data": models}, {})
            else:
                self._send(*error(404, "no such route"))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.condition:
                index = len(state.bodies)
                state.bodies.append(body)
                state.auth_headers.append(self.headers.get("Authorization", ""))
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
                state.condition.notify_all()
            try:
                self._send(*script(state, index, body))
            finally:
                with state.condition:
                    state.in_flight -= 1

        def _send(self, status: int, payload: dict[str, Any] | str, headers: dict[str, str]) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            if "Content-Type" not in headers:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def generate(url: str, params: SamplingParams, model: str = "qwen-small", **options: Any) -> list[Completion]:
    async def main() -> list[Completion]:
        async with OpenAIModel(model, base_url=url, **(FAST | options)) as chat:
            return await chat.agenerate(ASK, params)

    return asyncio.run(main())


def test_answer_with_n_choices_and_logprobs():
    with serve(lambda state, i, body: answer(body)) as server:
        params = SamplingParams(n=2, temperature=0.5, top_p=0.9, max_tokens=64, stop=("Obs:",), seed=3, logprobs=True)
        completions = generate(server.url, params)
    assert [c.text for c in completions] == ["answer 0", "answer 1"]
    assert completions[1].logprobs == [
        TokenLogprob(token="answer", logprob=-0.25),
        TokenLogprob(token=" 1", logprob=-0.5),
    ]
    first = completions[0]
    assert (first.prompt_tokens, first.completion_tokens, first.finish_reason) == (12, 2, "stop")
    [body] = server.bodies
    assert body["messages"] == [
        {"role": "system", "content": "You analyse data."},
        {"role": "user", "content": "Rows?"},
    ]
    sent = {key: body[key] for key in ("model", "n", "temperature", "top_p", "max_tokens", "stop", "seed", "logprobs")}
    assert sent == {"model": "qwen-small", "n": 2, "temperature": 0.5, "top_p": 0.9, "max_tokens": 64,
                    "stop": ["Obs:"], "seed": 3, "logprobs": True}  # fmt: skip
    assert server.auth_headers == ["Bearer EMPTY"]


def test_api_key_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    with serve(lambda state, i, body: answer(body)) as server:
        generate(server.url, SamplingParams())
        monkeypatch.setenv("DATALYST_API_KEY", "sk-datalyst")
        generate(server.url, SamplingParams())
    assert server.auth_headers == ["Bearer sk-openai", "Bearer sk-datalyst"]


def test_rate_limits_are_retried_until_success():
    def script(state: Server, i: int, body: dict[str, Any]) -> Reply:
        return error(429, "slow down", **{"retry-after-ms": "10"}) if i < 2 else answer(body)

    with serve(script) as server:
        assert [c.text for c in generate(server.url, SamplingParams())] == ["answer 0"]
    assert len(server.bodies) == 3


def test_server_errors_are_retried():
    with serve(lambda state, i, body: error(500, "engine hiccup") if i == 0 else answer(body)) as server:
        assert [c.text for c in generate(server.url, SamplingParams())] == ["answer 0"]
    assert len(server.bodies) == 2


def test_persistent_server_errors_become_model_unavailable():
    with (
        serve(lambda state, i, body: error(503, "overloaded", **{"retry-after-ms": "1"})) as server,
        pytest.raises(ModelUnavailable, match=r"failed \(503: overloaded\) after 2 retries"),
    ):
        generate(server.url, SamplingParams())
    assert len(server.bodies) == 3


def test_unknown_model_names_the_served_ones_and_is_not_retried():
    with (
        serve(lambda state, i, body: error(404, "The model `nope` does not exist.", "model_not_found")) as server,
        pytest.raises(ModelUnavailable, match="has no model 'nope'; it serves: qwen-small, llama-tiny"),
    ):
        generate(server.url, SamplingParams(), model="nope")
    assert len(server.bodies) == 1


def test_rejected_key_is_not_retried():
    with (
        serve(lambda state, i, body: error(401, "Invalid API key", "invalid_api_key")) as server,
        pytest.raises(ModelUnavailable, match=r"rejected the API key.*DATALYST_API_KEY or OPENAI_API_KEY"),
    ):
        generate(server.url, SamplingParams())
    assert len(server.bodies) == 1


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
        "the request exceeds the available context size, try increasing it",
    ],
)
def test_context_overflow_has_its_own_error(message):
    with (
        serve(lambda state, i, body: error(400, message)) as server,
        pytest.raises(ContextOverflow, match="lower max_tokens"),
    ):
        generate(server.url, SamplingParams(max_tokens=4000))
    assert len(server.bodies) == 1


def test_other_bad_requests_are_response_errors():
    with (
        serve(lambda state, i, body: error(400, "top_p must be in (0, 1]")) as server,
        pytest.raises(ModelResponseError, match=r"refused the request \(400: top_p must be") as caught,
    ):
        generate(server.url, SamplingParams())
    assert not isinstance(caught.value, ContextOverflow)
    assert len(server.bodies) == 1


def test_a_reply_that_is_not_a_chat_completion_is_a_response_error():
    with (
        serve(lambda state, i, body: (200, {"status": "ok"}, {})) as server,
        pytest.raises(ModelResponseError, match="something other than a chat completion"),
    ):
        generate(server.url, SamplingParams())


PROXY_PAGE = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"


@pytest.mark.parametrize(
    ("status", "content_type"),
    [(200, "application/json"), (200, "text/html"), (502, "text/html"), (502, "application/json")],
)
def test_a_page_that_is_not_json_is_retried_then_one_line(status, content_type):
    with (
        serve(lambda state, i, body: (status, PROXY_PAGE, {"Content-Type": content_type})) as server,
        pytest.raises(ModelUnavailable) as caught,
    ):
        generate(server.url, SamplingParams(), max_retries=1)
    assert len(server.bodies) == 2  # the first try and one retry
    message = str(caught.value)
    assert "\n" not in message and "after 1 retry" in message and "502 Bad Gateway" in message, message


def test_a_page_that_is_not_json_then_an_answer_succeeds():
    def script(state: Server, i: int, body: dict[str, Any]) -> Reply:
        return (200, PROXY_PAGE, {"Content-Type": "application/json"}) if i == 0 else answer(body)

    with serve(script) as server:
        assert [c.text for c in generate(server.url, SamplingParams())] == ["answer 0"]
    assert len(server.bodies) == 2


def test_servers_that_ignore_n_are_topped_up():
    with serve(lambda state, i, body: answer(body, n=1)) as server:

        async def main() -> tuple[list[Completion], list[Completion]]:
            async with OpenAIModel("qwen-small", base_url=server.url, **FAST) as chat:
                first = await chat.agenerate(ASK, SamplingParams(n=3, temperature=1.0, seed=10))
                second = await chat.agenerate(ASK, SamplingParams(n=2, temperature=1.0, seed=10))
                return first, second

        first, second = asyncio.run(main())
    assert (len(first), len(second)) == (3, 2)
    # The first call learns that the server answers one choice per request (and tops up with fresh seeds);
    # the second asks one choice at a time from the start.
    assert [(body["n"], body["seed"]) for body in server.bodies[:1]] == [(3, 10)]
    assert sorted((body["n"], body["seed"]) for body in server.bodies[1:3]) == [(1, 13), (1, 14)]
    assert sorted((body["n"], body["seed"]) for body in server.bodies[3:]) == [(1, 10), (1, 11)]


def test_concurrency_cap_is_respected():
    cap = 3

    def script(state: Server, i: int, body: dict[str, Any]) -> Reply:
        with state.condition:  # hold each request until the cap is reached (or briefly, for the last ones)
            state.condition.wait_for(lambda: state.in_flight >= cap, timeout=0.5)
        return answer(body)

    with serve(script) as server:

        async def main() -> list[list[Completion]]:
            async with OpenAIModel("qwen-small", base_url=server.url, max_concurrency=cap, **FAST) as chat:
                return await asyncio.gather(*(chat.agenerate(ASK, SamplingParams()) for _ in range(20)))

        results = asyncio.run(main())
    assert len(results) == len(server.bodies) == 20
    assert server.max_in_flight == cap


def test_a_port_without_a_server_is_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ModelUnavailable, match=f"cannot reach the model server at {url}.*start it or check --model"):
        generate(url, SamplingParams(), timeout_s=2.0, max_retries=1)


def test_a_silent_server_times_out():
    def script(state: Server, i: int, body: dict[str, Any]) -> Reply:
        state.released.wait(timeout=10)
        return answer(body)

    with serve(script) as server, pytest.raises(ModelUnavailable, match="no answer in time after 0 retries"):
        generate(server.url, SamplingParams(), timeout_s=0.3, max_retries=0)


def test_load_model_builds_an_openai_model():
    with serve(lambda state, i, body: answer(body)) as server:

        async def main() -> tuple[str, list[Completion]]:
            chat = load_model(f"openai:qwen-small@{server.url}?max_retries=0")
            try:
                return chat.spec, await chat.agenerate(ASK, SamplingParams())
            finally:
                await chat.aclose()

        spec, completions = asyncio.run(main())
    assert spec == f"openai:qwen-small@{server.url}?max_retries=0"
    assert completions[0].text == "answer 0"


@pytest.mark.parametrize(
    ("options", "fragment"),
    [({"base_url": "localhost:8000/v1"}, "must start with http"), ({"max_concurrency": 0}, "no request slot")],
)
def test_bad_settings_are_config_errors(options, fragment):
    with pytest.raises(ConfigError, match=fragment):
        OpenAIModel("qwen-small", **options)


def served(text: str, tokens: list[str] | None = None, finish_reason: str = "stop", **extra: Any) -> Callable:
    """A script answering one choice of ``text`` with server-specific fields ``extra`` (and logprobs of ``tokens``)."""

    def script(state: Server, i: int, body: dict[str, Any]) -> Reply:
        logprobs = None
        if tokens is not None:
            content = [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []} for t in tokens]
            logprobs = {"content": content, "refusal": None}
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": logprobs} | extra
        payload = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice]}
        return 200, payload, {}

    return script


STOPS = SamplingParams(stop=("</code>", "Observation:"))


@pytest.mark.parametrize("field", ["stop_reason", "matched_stop"])  # vLLM, SGLang
def test_the_stop_string_the_server_stripped_is_put_back(field):
    with serve(served("<code>print(1)", **{field: "</code>"})) as server:
        [completion] = generate(server.url, STOPS)
    assert (completion.text, completion.stop, completion.finish_reason) == ("<code>print(1)</code>", "</code>", "stop")


@pytest.mark.parametrize(
    "extra",
    [{}, {"stop_reason": None}, {"stop_reason": 151645}, {"matched_stop": 2}, {"stop_reason": "not asked for"}],
)
def test_without_a_matched_stop_string_the_text_is_kept(extra):
    with serve(served("The answer is 4.", **extra)) as server:
        [completion] = generate(server.url, STOPS)
    assert (completion.text, completion.stop, completion.token_ids, completion.offsets) == (
        "The answer is 4.",
        None,
        None,
        None,
    )


def test_logprob_tokens_give_offsets_and_the_last_token_may_run_past_the_stop():
    # The server cut "</code>\n" in the middle of its last token and returned the text before "</code>".
    tokens = ["<code>", "print", "(1)", "</", "code>\n"]
    with serve(served("<code>print(1)", tokens, stop_reason="</code>", token_ids=[5, 6, 7, 8, 9])) as server:
        [completion] = generate(server.url, STOPS.model_copy(update={"logprobs": True}))
    assert completion.text == "<code>print(1)</code>\n"
    assert completion.offsets == [6, 11, 14, 16, 22]
    assert completion.token_ids == [5, 6, 7, 8, 9]
    assert [entry.token for entry in completion.logprobs] == tokens
    assert completion.cut(len("<code>print")).text == "<code>print"


def test_tokens_that_do_not_spell_the_text_give_no_offsets():
    with serve(served("héllo", ["h", "bytes:\\xc3", "bytes:\\xa9", "llo"], token_ids=[1, 2])) as server:
        [completion] = generate(server.url, SamplingParams(logprobs=True))
    assert (completion.text, completion.offsets, completion.completion_tokens) == ("héllo", None, 4)
    assert completion.token_ids is None  # two ids for four logprobs: they do not describe the same tokens


def test_token_ids_option_asks_vllm_for_them():
    with serve(served("hi", token_ids=[10, 11])) as server:

        async def main() -> list[Completion]:
            chat = load_model(f"openai:qwen-small@{server.url}?token_ids=true&max_retries=0")
            try:
                return await chat.agenerate(ASK, SamplingParams())
            finally:
                await chat.aclose()

        [completion] = asyncio.run(main())
        assert completion.token_ids == [10, 11]
        generate(server.url, SamplingParams())
    assert [body.get("return_token_ids") for body in server.bodies] == [True, None]


def test_a_turn_begun_for_the_model_asks_the_server_to_continue_it():
    begun = [*ASK, ChatMessage(role=Role.ASSISTANT, content="Formatted answer:")]
    with serve(served(" 3")) as server:

        async def main() -> list[Completion]:
            async with OpenAIModel("qwen-small", base_url=server.url, **FAST) as chat:
                return await chat.agenerate(begun, SamplingParams())

        [completion] = asyncio.run(main())
        generate(server.url, SamplingParams())
    assert completion.text == " 3" and server.bodies[0]["messages"][-1] == {
        "role": "assistant",
        "content": "Formatted answer:",
    }
    flags = [(body.get("continue_final_message"), body.get("add_generation_prompt")) for body in server.bodies]
    assert flags == [(True, False), (None, None)]
