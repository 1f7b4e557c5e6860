"""Prompt files: ``<package>/prompts/<name>.yaml`` maps each part of a conversation to a Jinja template.

The agent, judge and curate packages keep their prompts as such files, all
loaded the same way: trimmed blocks, no escaping, and an undefined variable is an error.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2
import yaml


@functools.cache
def prompt_templates(package: str, name: str) -> dict[str, jinja2.Template]:
    """Every template of ``prompts/{name}.yaml`` in ``package`` (e.g. ``datalyst.judge``), by its key."""
    source = (resources.files(package) / "prompts" / f"{name}.yaml").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return {key: env.from_string(text) for key, text in yaml.safe_load(source).items()}
