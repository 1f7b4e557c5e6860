"""Training examples: a trajectory as token ids with a loss mask, for one tokenizer and chat template.

The conversation is rendered with the model's chat template exactly as the model saw it turn after
turn, less any sampling guidance (``Trajectory.guidance``) unless it is asked for. The mask is 1 on
the agent's own text and 0 on everything the environment wrote: the system prompt, the task, every
observation, and the template's own role headers. The end-of-turn token after a message is trained
only where the model wrote it (``TrainingMessage.closed``: an answer it ended): a code turn is cut by
a stop string, so training its end-of-turn token would teach the model a token it never wrote, and a
model so trained learns to end turns it has not begun. A turn that went wrong (its cell failed, or
the format check sent its answer back) stays in the context but out of the loss unless asked for:
the model learns to fix a mistake from what the environment said of it, not to make it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from datalyst.agent._export import to_messages
from datalyst.agent._trajectory import Trajectory
from datalyst.errors import ConfigError
from datalyst.llm import ChatMessage, ChatTokenizer


class TrainingExample(BaseModel):
    """Token ids of a whole conversation and, per token, whether the loss counts it."""

    trajectory_id: str
    input_ids: list[int]
    loss_mask: list[int]
    """1 on the agent's tokens, 0 on the environment's; as long as ``input_ids``."""


def training_example(
    trajectory: Trajectory, tokenizer: ChatTokenizer, *, guidance: bool = False, failed_turns: bool = False
) -> TrainingExample:
    """``trajectory`` as ids and mask for ``tokenizer``; ConfigError if its template changes a message's text.

    The sampling guidance (``Trajectory.guidance``) is left out of the first message unless ``guidance``;
    turns that went wrong (``TrainingMessage.failed``) are masked unless ``failed_turns``.
    """
    messages = to_messages(trajectory, guidance=guidance)
    chat = [ChatMessage(role=message.role, content=message.content) for message in messages]
    rendered = tokenizer.render(chat, add_generation_prompt=False)
    spans = [
        _assistant_span(tokenizer, chat, index, rendered, closed=message.closed)
        for index, message in enumerate(messages)
        if not message.is_environment and (failed_turns or not message.failed)
    ]
    input_ids: list[int] = []
    loss_mask: list[int] = []
    position = 0
    for start, end in [*spans, (len(rendered), len(rendered))]:
        for text, trained in ((rendered[position:start], 0), (rendered[start:end], 1)):
            ids = tokenizer.encode(text) if text else []
            input_ids += ids
            loss_mask += [trained] * len(ids)
        position = end
    return TrainingExample(trajectory_id=trajectory.id, input_ids=input_ids, loss_mask=loss_mask)


def _assistant_span(
    tokenizer: ChatTokenizer, chat: Sequence[ChatMessage], index: int, rendered: str, *, closed: bool
) -> tuple[int, int]:
    """Where message ``index`` (an assistant turn) lies in the rendering, with its end-of-turn token if ``closed``."""
    prompt = tokenizer.render(chat[:index], add_generation_prompt=True)
    content, end_of_turn = chat[index].content, tokenizer.end_of_turn
    start, end = len(prompt), len(prompt) + len(content)
    if not (rendered.startswith(prompt) and rendered.startswith(content + end_of_turn, start)):
        raise ConfigError(
            f"the chat template does not write assistant turn {index} as the prompt before it, its text and "
            f"{end_of_turn!r}; training examples need a template that keeps messages verbatim"
        )
    return start, end + len(end_of_turn) * closed
