"""The judges' prompt templates: ``prompts/NAME.yaml`` maps each part of a conversation to a Jinja template."""

from __future__ import annotations

import functools
from importlib import resources

import jinja2
import yaml


@functools.cache
def prompt_templates(name: str) -> dict[str, jinja2.Template]:
    """Every template in ``prompts/{name}.yaml``, by its key (undefined variables are errors)."""
    source = (resources.files("datalyst.judge") / "prompts" / f"{name}.yaml").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return {key: env.from_string(text) for key, text in yaml.safe_load(source).items()}
