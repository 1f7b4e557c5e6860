"""``synth datasets``: synthetic datasets with a hidden trap, and questions whose answer depends on handling it.

Each unit is one dataset of one family (``synth._challenges``): a domain and a size drawn from the seed,
the table generated, the trap proved present by the family's detector, the table written as CSV, and
the family's questions verified in the sandbox like every template's. With ``model``, a chat model
writes the generator instead (Datarus' route): it gets the domain, the columns and the trap, its
script runs in an empty sandbox and must leave ``data.csv``; a script that fails, misses columns or
hides no detectable trap is sent back with the reason, up to ``repairs`` times.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from datalyst.data import describe
from datalyst.errors import ConfigError
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.sandbox import Limits, Sandbox
from datalyst.synth._challenges import DOMAINS, FAMILIES, Domain, Family
from datalyst.synth._fingerprint import fingerprint
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.synth._verify import CHECKS, verify
from datalyst.tasks import Lineage

GENERATOR_VERSION = 1
SOURCE = "synth:datasets"
DATASET_CHECKS = ("script_failed", "columns_missing", "challenge_absent", *CHECKS)
SCRIPT = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
WRITER_SAMPLING = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=1500)


class DatasetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = 0
    """Seed of domains, sizes and data."""
    per_family: int = Field(5, ge=1)
    """Datasets made per family of trap."""
    min_rows: int = Field(200, ge=20)
    """Fewest rows of a dataset."""
    max_rows: int = Field(600, ge=20)
    """Most rows of a dataset."""
    repairs: int = Field(2, ge=0)
    """With --model: how many times a failed script is sent back."""


@dataclass(frozen=True)
class DatasetUnit:
    family: Family
    index: int

    @property
    def id(self) -> str:
        return f"{self.family.name}-{self.index:03d}"


def make_dataset_tasks(
    out: str | Path,
    *,
    options: DatasetOptions | None = None,
    data_dir: str | Path | None = None,
    model: ChatModel | None = None,
    progress: bool = True,
    require_isolation: bool = True,
) -> TaskSummary:
    """Append to ``out`` the tasks of every dataset not done yet; the datasets go to ``data_dir``
    (``<out>.data/``)."""
    options = options or DatasetOptions()
    if options.min_rows > options.max_rows:
        raise ConfigError(f"min_rows ({options.min_rows}) is above max_rows ({options.max_rows})")
    out = Path(out)
    folder = (Path(data_dir) if data_dir is not None else out.with_name(out.name + ".data")).resolve()
    units = [DatasetUnit(family, index) for family in FAMILIES for index in range(options.per_family)]
    settings = {"stage": "datasets", "options": options.model_dump(), "version": GENERATOR_VERSION,
                "model": model.spec if model is not None else None}  # fmt: skip
    make = partial(_unit_tasks, options=options, folder=folder, model=model, require_isolation=require_isolation)
    return run_units(units, out, make, checks=DATASET_CHECKS, settings=settings, progress=progress)


async def _unit_tasks(
    unit: DatasetUnit, options: DatasetOptions, folder: Path, model: ChatModel | None, require_isolation: bool
) -> Made:
    rng = np.random.default_rng([options.seed, FAMILIES.index(unit.family), unit.index])
    domain = DOMAINS[int(rng.integers(len(DOMAINS)))]
    rows = int(rng.integers(options.min_rows, options.max_rows + 1))
    rejected: Counter[str] = Counter()
    if model is None:
        frame: pd.DataFrame | None = unit.family.generate(rng, domain, rows)
        if not unit.family.detect(frame, domain):
            rejected["challenge_absent"] += 1
            frame = None
    else:
        frame = await _written_by(model, unit.family, domain, rows, options.repairs, rejected, require_isolation)
    if frame is None:
        return [], rejected
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{unit.id}-{domain.name}.csv"
    frame.to_csv(path, index=False)
    source_hash = fingerprint(pd.read_csv(path)).content_hash
    prompt = describe(path).render()
    load = f"import pandas as pd\n\ndf = pd.read_csv({path.name!r})\n"
    tasks = []
    with Sandbox(files=[path], limits=Limits(wall_s=20, cpu_s=20), require_isolation=require_isolation) as box:
        for draft in unit.family.drafts(domain):
            verdict = await asyncio.to_thread(verify, draft, load + draft.code, box, prompt)
            if verdict.answer is None:
                rejected[verdict.reason or "solution_failed"] += 1
                continue
            digest = hashlib.sha256(f"{path.name}\n{draft.question}".encode()).hexdigest()[:8]
            lineage = Lineage(
                generator=draft.template, version=GENERATOR_VERSION, seed=options.seed, source_hash=source_hash
            )
            solution = load + draft.code
            tasks.append(draft.task(f"{unit.id}-{digest}", str(path), verdict.answer, solution, SOURCE, lineage))
    return tasks, rejected


def writer_messages(family: Family, domain: Domain, rows: int) -> list[ChatMessage]:
    """The request for a generator script: the domain, the exact columns and the trap to hide."""
    columns = "\n".join(f"- {name}: {what}" for name, what in family.columns(domain).items())
    request = (
        f"Write a Python script that makes a synthetic {domain.name} dataset of {rows} rows, one row per "
        f"{domain.entity} record, with exactly these columns:\n{columns}\n\n"
        f"Hide this analytical trap in the data: {family.description}\n\n"
        "Use pandas and numpy with a fixed random seed, and save the table with "
        "df.to_csv('data.csv', index=False). Answer with the script in one ```python block."
    )
    system = (
        "You write short, correct Python scripts that generate realistic synthetic datasets to practise analysis on."
    )
    return [ChatMessage(role=Role.SYSTEM, content=system), ChatMessage(role=Role.USER, content=request)]


async def _written_by(
    model: ChatModel,
    family: Family,
    domain: Domain,
    rows: int,
    repairs: int,
    rejected: Counter[str],
    require_isolation: bool,
) -> pd.DataFrame | None:
    """The table a model's script makes, checked, after at most ``repairs`` rounds of feedback."""
    messages = writer_messages(family, domain, rows)
    for _ in range(repairs + 1):
        [completion] = await model.agenerate(messages, WRITER_SAMPLING)
        found = SCRIPT.findall(completion.text)
        script = found[-1] if found else completion.text
        frame, reason, feedback = await asyncio.to_thread(_run_script, script, family, domain, require_isolation)
        if reason is None:
            return frame
        rejected[reason] += 1
        messages += [
            ChatMessage(role=Role.ASSISTANT, content=completion.text),
            ChatMessage(role=Role.USER, content=f"{feedback}\nFix the script and answer with the whole script again."),
        ]
    return None


def _run_script(
    script: str, family: Family, domain: Domain, require_isolation: bool
) -> tuple[pd.DataFrame | None, str | None, str]:
    """(table, None, "") when the script's data.csv has the columns and the trap; else (None, reason, feedback)."""
    with Sandbox(limits=Limits(wall_s=30, cpu_s=30), require_isolation=require_isolation) as box:
        result = box.run_python(script)
        if not result.ok:
            return None, "script_failed", f"The script failed:\n{result.render()[-1500:]}"
        try:
            frame = pd.read_csv(Path(box.host_workdir) / "data.csv")
        except (OSError, ValueError) as exc:
            return None, "script_failed", f"The script left no readable data.csv ({exc})."
    missing = [name for name in family.columns(domain) if name not in frame.columns]
    if missing:
        return None, "columns_missing", f"data.csv lacks the columns {', '.join(missing)}."
    try:
        present = family.detect(frame, domain)
    except (KeyError, TypeError, ValueError) as exc:
        return None, "challenge_absent", f"The columns could not be analysed as described ({exc})."
    if not present:
        return None, "challenge_absent", f"The trap is not detectable in the data: {family.description}"
    return frame, None, ""
