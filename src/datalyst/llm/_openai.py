"""Chat models behind any OpenAI-compatible HTTP server: vLLM, SGLang, llama.cpp server, Ollama, OpenAI, DeepSeek.

Retries are the ``openai`` SDK's own: exponential backoff (0.5 s doubling to 8 s, or the server's
``Retry-After``) on 408, 409, 429, 5xx, timeouts and connection errors, ``max_retries`` times. An answer
whose body is not JSON at all (a proxy's HTML error page sent with status 200) is retried the same way
here. Bad requests (400), a rejected key (401, 403), an unknown model (404) and other 4xx answers are
never retried. Errors leave this module as :mod:`datalyst.errors` classes.

Servers strip the stop string from the text; when they say which one matched (vLLM's ``stop_reason``,
SGLang's ``matched_stop``) it is put back, so the text ends with it as with every other backend. With
``logprobs`` the per-token log-probabilities come back, and offsets when their tokens spell the text;
token ids only from servers that return them (vLLM with the ``token_ids=true`` option).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, TypeGuard

import openai
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from datalyst.errors import ConfigError, ModelResponseError, ModelUnavailable, first_problem
from datalyst.llm._base import AsyncClosing, ChatMessage, Completion, SamplingParams, TokenLogprob
from datalyst.llm._errors import ContextOverflow
from datalyst.llm._spec import ModelKind, ModelSpec

__all__ = ["OpenAIModel"]

LOCAL_API_KEY = "EMPTY"  # local servers (vLLM, llama.cpp, Ollama) accept any key, but the SDK requires one
MODEL_LIST_TIMEOUT_S = 5.0
MAX_SERVER_MESSAGE_CHARS = 200
FIRST_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
"""Backoff between retries of a non-JSON answer, as the SDK waits between its own retries."""
_CONTEXT_OVERFLOW = re.compile(
    r"context.?(length|size|window)|maximum.{0,20}length|too many tokens|prompt is too long",
    re.IGNORECASE,
)


class OpenAIModel(AsyncClosing):
    """A model served over the OpenAI chat-completions API, with at most ``max_concurrency`` requests in flight.

    ``api_key`` defaults to ``$DATALYST_API_KEY``, else ``$OPENAI_API_KEY``, else ``"EMPTY"`` (enough for
    local servers); ``base_url=None`` uses the SDK's default (``$OPENAI_BASE_URL`` or OpenAI's API).
    ``token_ids=True`` asks for the completion's token ids with vLLM's ``return_token_ids`` (other
    servers may refuse that field).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 16,
        token_ids: bool = False,
        spec: str | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency={max_concurrency} leaves no request slot; use 1 or more")
        try:
            self.spec = spec or str(ModelSpec(kind=ModelKind.OPENAI, target=model, base_url=base_url))
        except ValidationError as exc:
            reason = first_problem(exc, located=False)
            raise ConfigError(f"cannot use model {model!r} at base URL {base_url!r}: {reason}") from exc
        self.model = model
        self.max_retries = max_retries
        self.token_ids = token_ids
        self._client = openai.AsyncOpenAI(
            api_key=api_key or _default_api_key(), base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )
        self._slots = asyncio.Semaphore(max_concurrency)
        self._max_n_per_request: int | None = None  # learned when a server answers fewer choices than asked

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> OpenAIModel:
        """Build from ``openai:MODEL[@URL]``; options: timeout_s, max_retries, max_concurrency, token_ids."""
        options = spec.check_options(
            {"timeout_s": float, "max_retries": int, "max_concurrency": int, "token_ids": bool}
        )
        return cls(spec.target, base_url=spec.base_url, spec=str(spec), **options)

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def agenerate(self, messages: Sequence[ChatMessage], params: SamplingParams) -> list[Completion]:
        """``params.n`` completions; servers that return fewer choices than ``n`` are asked again for the rest.

        When ``n`` is split over several requests, each request's seed is ``seed`` plus the number of
        choices asked for before it, so a seeded call still gives distinct samples, the same ones every time.
        """
        wire = [{"role": message.role.value, "content": message.content} for message in messages]
        completions: list[Completion] = []
        asked_before = 0  # choices requested so far: the seed offset of the next request
        while len(completions) < params.n:
            missing = params.n - len(completions)
            step = min(missing, self._max_n_per_request or missing)
            counts = [min(step, missing - done) for done in range(0, missing, step)]
            offsets = [asked_before + done for done in range(0, missing, step)]
            asked_before += missing
            batches = await asyncio.gather(
                *(self._request(wire, params, count, offset) for count, offset in zip(counts, offsets, strict=True))
            )
            for asked, batch in zip(counts, batches, strict=True):
                if not batch:
                    raise ModelResponseError(
                        f"the model server at {self.base_url} returned no choices for {self.model!r}; check its log"
                    )
                if len(batch) < asked:
                    self._max_n_per_request = min(len(batch), self._max_n_per_request or len(batch))
                completions.extend(batch)
        return completions[: params.n]

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def _request(
        self, wire: list[dict[str, str]], params: SamplingParams, n: int, seed_offset: int
    ) -> list[Completion]:
        arguments: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.stop:
            arguments["stop"] = list(params.stop)
        if params.seed is not None:
            arguments["seed"] = params.seed + seed_offset
        if params.logprobs:
            arguments["logprobs"] = True
        extra: dict[str, Any] = {"return_token_ids": True} if self.token_ids else {}
        if wire[-1]["role"] == "assistant":  # a turn begun for the model: vLLM's flags (llama.cpp's server needs none)
            extra |= {"continue_final_message": True, "add_generation_prompt": False}
        if extra:
            arguments["extra_body"] = extra
        response = await self._create(arguments)
        try:
            return _completions(response, params.stop)
        except (AttributeError, TypeError, ValidationError) as exc:  # a 200 answer that is not a chat completion
            raise ModelResponseError(
                f"the model server at {self.base_url} answered with something other than a chat completion "
                f"({type(exc).__name__}: {_short(str(exc))}); check that it serves the OpenAI API under /v1"
            ) from exc

    async def _create(self, arguments: dict[str, Any]) -> ChatCompletion:
        """The server's answer, asking again (with the SDK's backoff) while its body is not JSON."""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(min(FIRST_RETRY_DELAY_S * 2 ** (attempt - 1), MAX_RETRY_DELAY_S))
            async with self._slots:
                try:
                    response = await self._client.chat.completions.create(**arguments)
                except json.JSONDecodeError as exc:  # labelled JSON, but not JSON
                    body = exc.doc
                except openai.OpenAIError as exc:
                    raise await self._translate(exc) from exc
                else:
                    if not isinstance(response, str):  # the SDK hands back a body that is not JSON as text
                        return response
                    body = response
        retried = f"{self.max_retries} {'retry' if self.max_retries == 1 else 'retries'}"
        raise ModelUnavailable(
            f"the model server at {self.base_url} answered with a page that is not JSON ({_short(body)}) after "
            f"{retried}; check that the URL points at an OpenAI-compatible server (ending in /v1) and its log"
        )

    async def _translate(self, exc: openai.OpenAIError) -> Exception:
        """The :mod:`datalyst.errors` exception for an SDK error (raised by the caller ``from exc``)."""
        url, retried = self.base_url, f"after {self.max_retries} {'retry' if self.max_retries == 1 else 'retries'}"
        fix = "start it or check --model"
        if isinstance(exc, openai.APITimeoutError):
            return ModelUnavailable(f"cannot reach the model server at {url}: no answer in time {retried}; {fix}")
        if isinstance(exc, openai.APIConnectionError):
            cause = _short(str(exc.__cause__ or exc))
            return ModelUnavailable(
                f"cannot reach the model server at {url}: connection failed ({cause}) {retried}; {fix}"
            )
        if not isinstance(exc, openai.APIStatusError):
            return ModelResponseError(f"unusable answer from the model server at {url}: {_short(str(exc))}")
        status, said = exc.status_code, _server_message(exc)
        if status in (401, 403):
            return ModelUnavailable(
                f"the model server at {url} rejected the API key ({status}: {said}); "
                "set DATALYST_API_KEY or OPENAI_API_KEY to a valid key"
            )
        if status == 404:
            return ModelUnavailable(f"the model server at {url} has no model {self.model!r}; {await self._served()}")
        if status == 400 and (exc.code == "context_length_exceeded" or _CONTEXT_OVERFLOW.search(said)):
            return ContextOverflow(
                f"the prompt plus max_tokens does not fit the context of {self.model!r} ({said}); "
                "lower max_tokens, shorten the prompt or serve the model with a longer context"
            )
        if status == 429:
            return ModelUnavailable(
                f"the model server at {url} is rate-limiting ({said}) {retried}; lower max_concurrency"
            )
        if status >= 500:
            return ModelUnavailable(f"the model server at {url} failed ({status}: {said}) {retried}; check its log")
        return ModelResponseError(
            f"the model server at {url} refused the request ({status}: {said}); check the sampling params"
        )

    async def _served(self) -> str:
        """The fix for an unknown model: the served names, or a hint about the URL when they cannot be listed."""
        try:
            page = await self._client.with_options(max_retries=0).models.list(timeout=MODEL_LIST_TIMEOUT_S)
            names = [model.id for model in page.data]
        except openai.OpenAIError:
            return "check the model name, and that the URL ends in /v1"
        if not names:
            return "the server lists no models; check how it was started"
        return f"it serves: {', '.join(names)}; use openai:NAME with one of them"


def _default_api_key() -> str:
    # Read here rather than in resolve_spec: a key must never become part of a spec, which is recorded.
    return os.environ.get("DATALYST_API_KEY") or os.environ.get("OPENAI_API_KEY") or LOCAL_API_KEY


def _completions(response: ChatCompletion, stops: Sequence[str]) -> list[Completion]:
    choices = sorted(response.choices, key=lambda choice: choice.index)
    usage = response.usage
    # Servers report one total for all choices; logprobs, when present, give each choice's exact count.
    share = usage.completion_tokens // len(choices) if usage and choices else 0
    completions = []
    for choice in choices:
        text, stop = choice.message.content or "", _matched_stop(choice, stops)
        text += stop or ""
        tokens = choice.logprobs.content if choice.logprobs and choice.logprobs.content is not None else None
        logprobs = [TokenLogprob(token=token.token, logprob=token.logprob) for token in tokens] if tokens else None
        offsets = None
        if logprobs:
            text, offsets = _spelled(text, [entry.token for entry in logprobs], stop is not None)
        token_ids = getattr(choice, "token_ids", None)
        if not _are_ids(token_ids) or (logprobs is not None and len(token_ids) != len(logprobs)):
            token_ids = None
        completions.append(
            Completion(
                text=text,
                finish_reason=choice.finish_reason or "stop",
                stop=stop,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=len(tokens) if tokens is not None else share,
                token_ids=token_ids,
                offsets=offsets,
                logprobs=logprobs,
            )
        )
    return completions


def _matched_stop(choice: Any, stops: Sequence[str]) -> str | None:
    """The stop string the server says ended ``choice`` (vLLM: ``stop_reason``, SGLang: ``matched_stop``)."""
    if choice.finish_reason != "stop":
        return None
    for name in ("stop_reason", "matched_stop"):
        matched = getattr(choice, name, None)
        if isinstance(matched, str) and matched in stops:  # an int there is a stop token's id
            return matched
    return None


def _spelled(text: str, tokens: list[str], stopped: bool) -> tuple[str, list[int] | None]:
    """``text`` and the offsets of ``tokens`` when the tokens spell it.

    After a stop string (``stopped``) the last token may run past it where the server cut that token in
    two; the text then keeps the whole token, as the local backends do. Otherwise there are no offsets.
    """
    joined = "".join(tokens)
    overran = stopped and joined.startswith(text) and len(joined) - len(tokens[-1]) < len(text)
    if joined != text and not overran:
        return text, None
    return joined, list(accumulate(len(token) for token in tokens))


def _are_ids(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return _short(str(message) if message else str(body or exc.message))


def _short(text: str) -> str:
    """``text`` on one line, cut to MAX_SERVER_MESSAGE_CHARS."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_SERVER_MESSAGE_CHARS else text[: MAX_SERVER_MESSAGE_CHARS - 3] + "..."
