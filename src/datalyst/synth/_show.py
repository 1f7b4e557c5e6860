"""A look at a task set: a random sample of each category, as text or as a standalone HTML page."""

from __future__ import annotations

import importlib.resources
import random
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import jinja2

from datalyst.tasks import Task


def sample_by_category(tasks: Iterable[Task], per_category: int = 2, seed: int = 0) -> dict[str, list[Task]]:
    """Up to ``per_category`` tasks of each category (sorted by name), drawn with ``seed``."""
    groups: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        groups[task.category or "(none)"].append(task)
    rng = random.Random(seed)
    return {name: rng.sample(group, min(per_category, len(group))) for name, group in sorted(groups.items())}


def tasks_html(sample: dict[str, list[Task]], title: str) -> str:
    """A page (no external assets) with every sampled task: question, constraints, format, answer, solution."""
    source = importlib.resources.files("datalyst.synth") / "templates" / "tasks.html.j2"
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["basename"] = lambda path: Path(path).name
    return environment.from_string(source.read_text()).render(title=title, sample=sample)
