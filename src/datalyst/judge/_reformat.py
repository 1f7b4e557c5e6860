"""DABench's official reformat step: a model rewrites a response into the question's ``@name[value]`` format.

The InfiAgent pipeline (``shared/benchmarks/dabench/SOURCE.md``) does not score raw responses: a
second model, at temperature 0, sees the question, the response as its own earlier turn and a
request to follow the question's format, and its reply is what the closed-form scorer reads. So a
right value written as ``@57`` or a bare ``-0.83`` still counts. The three messages are built from
``prompts/dabench_reformat.yaml`` (our wording).
"""

from __future__ import annotations

from datalyst.errors import ModelResponseError
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.prompts import prompt_templates
from datalyst.tasks import Task, extract_answers

REFORMAT_SAMPLING = SamplingParams(temperature=0.0, max_tokens=256)


def reformat_messages(task: Task, response: str) -> list[ChatMessage]:
    """The conversation the reformatting model continues: question, the raw response, the request."""
    variables = {"question": task.question.strip(), "constraints": task.constraints.strip(), "format": task.format}
    templates = prompt_templates("datalyst.judge", "dabench_reformat")
    return [
        ChatMessage(role=Role.USER, content=templates["question"].render(variables).strip()),
        ChatMessage(role=Role.ASSISTANT, content=response),
        ChatMessage(role=Role.USER, content=templates["request"].render(variables).strip()),
    ]


async def areformat_dabench(model: ChatModel, task: Task, response: str) -> str:
    """``response`` rewritten by ``model`` into ``task.format`` (temperature 0).

    A response that already gives every ``@name[value]`` the format asks for is kept as it is, without asking
    the model: a strong reformatter leaves it alone, and local ones do not (on the 60 dev questions' gold
    answers written as ``@name[value]``, a 1.5B model changed 8 right ones and a 0.5B model 52; RESULTS.md).
    """
    asked = set(extract_answers(task.format))
    if asked and asked <= set(extract_answers(response)):
        return response
    completions = await model.agenerate(reformat_messages(task, response), REFORMAT_SAMPLING)
    if not completions:
        raise ModelResponseError(f"reformat model {model.spec!r} returned no completion; check the backend")
    return completions[0].text
