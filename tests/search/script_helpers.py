"""A scripted model for search tests: its turns depend on the depth and on what the last cell printed."""

from __future__ import annotations

import re

from datalyst.llm import Completion, TokenLogprob


def code(source: str) -> str:
    return f"Thought: run it.\nAction:\n```python\n{source}\n```"


def answer(value: str) -> str:
    return f"Thought: done.\nFormatted answer: @x[{value}]"


class ScriptModel:
    """Turns chosen by depth and by what the last cell printed; each with one token of log-probability -0.5."""

    spec = "script"

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after

    async def agenerate(self, messages, params):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("the model server went away")
        self.calls += 1
        depth = sum(message.role == "assistant" for message in messages)
        printed = re.findall(r"\d+", messages[-1].content) if depth else []
        if depth == 0:
            texts = [code("x = 10"), code("x = 20"), answer("5")]
        elif depth == 1:
            texts = [code("print(x)"), answer("10"), "hmm"]
        else:
            texts = [answer(printed[-1] if printed else "0"), code("1/0"), "hmm"]
        return [Completion(text=t, finish_reason="stop", prompt_tokens=10, completion_tokens=5, offsets=[len(t)],
                           logprobs=[TokenLogprob(token=t, logprob=-0.5)]) for t in texts[: params.n]]  # fmt: skip

    async def aclose(self):
        pass
