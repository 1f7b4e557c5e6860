"""Model errors specific to the llm package."""

from datalyst.errors import ModelResponseError


class ContextOverflow(ModelResponseError):
    """The prompt plus max_tokens does not fit the model's context."""
