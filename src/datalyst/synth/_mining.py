"""``synth notebooks``: tasks and their multi-step solutions mined from executed notebooks (NbQA).

Per notebook that passes the coarse filters (``_notebooks``): a model scores it 1-5 (kept from ``min_score``);
extracts 1-3 tasks whose answers it copies from the notebook's outputs; adds constraints, an ``@name[value]``
format and the label; rebuilds the solution from the notebook's own cells and outputs; and reviews the result.
Every model claim that can be checked against the notebook is checked in code, each drop with its reason:
an answer or a label value that appears in no output, a solution step whose code or output the notebook does
not hold, a label longer than 150 characters or with more than 5 names. Where every data file is here, the
solution's cells run again in the sandbox, and a task whose label reproduces is marked verified
(``lineage.verified``); the rest stay, unverified, as NbQA keeps them for SFT.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from datalyst.data import DataFileError
from datalyst.llm import ChatMessage, ChatModel, Role, SamplingParams
from datalyst.prompts import prompt_templates
from datalyst.sandbox import Limits, Sandbox
from datalyst.synth._notebooks import (
    LOADERS,
    REASONS,
    AddressMap,
    Notebook,
    NotebookFilters,
    Screened,
    cap_per_repository,
    parseable,
    read_notebook,
    screen_notebook,
    syntax_tree,
)
from datalyst.synth._stage import Made, TaskSummary, run_units
from datalyst.synth._verify import NUMBER
from datalyst.tasks import Lineage, Task, extract_answers
from datalyst.text import clip_middle

GENERATOR_VERSION = 5
SOURCE = "synth:notebooks"
CATEGORIES = (
    "Summary Statistics", "Distribution Analysis", "Correlation Analysis", "Outlier Detection",
    "Comprehensive Data Preprocessing", "Feature Engineering", "Machine Learning", "Visualization",
)  # fmt: skip
"""NbQA's eight kinds of task."""
MAX_LABEL_CHARS = 150
MAX_LABEL_NAMES = 5
CHECKS = ("low_score", "no_tasks", "unknown_category", "visualization", "answer_not_in_outputs", "no_label",
          "label_too_long", "label_not_in_outputs", "invented_step", "review_failed")  # fmt: skip
REVIEW = ("aligned", "verifiable", "correct", "complete", "clear")
SAMPLING = SamplingParams(temperature=0.0, max_tokens=1024)
SOLUTION_SAMPLING = SamplingParams(temperature=0.6, max_tokens=2048, seed=0)
"""NbQA writes solutions at temperature 0.6 and everything else at 0."""


class MiningOptions(BaseModel):
    """How notebooks are mined: which pass the coarse filters, which the model scores high enough, how many tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    filters: NotebookFilters = NotebookFilters()
    min_score: int = Field(3, ge=1, le=5)
    """Lowest quality score (1-5) a notebook may get."""
    max_tasks: int = Field(3, ge=1)
    """Most tasks asked of each notebook."""
    max_notebook_chars: int = Field(12_000, ge=1000)
    """The notebook text the models read, clipped in the middle beyond this."""


Step = tuple[str, str, str]
"""A rebuilt solution step: thought, code, output."""


# ---- what the notebook holds


def _squashed(text: str) -> str:
    return " ".join(text.split())


def _numbers(text: str) -> list[float]:
    return [float(n) for n in NUMBER.findall(text.replace(",", ""))]


def value_in_outputs(value: str, outputs: str) -> bool:
    """``value`` appears in ``outputs``: as text, or as a number that an output number rounds to (at the number
    of decimals ``value`` shows), or, for a list, every element so."""
    value = value.strip().strip("'\"")
    if not value:
        return False
    if _squashed(value) in _squashed(outputs):
        return True
    if value.startswith("[") and value.endswith("]"):
        items = [item.strip() for item in value[1:-1].split(",") if item.strip()]
        return bool(items) and all(value_in_outputs(item, outputs) for item in items)
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        return False
    decimals = len(value.split(".")[1]) if "." in value and "e" not in value.lower() else 0
    return any(abs(round(found, decimals) - number) <= 10**-decimals / 2 + 1e-12 for found in _numbers(outputs))


def _canonical(line: str) -> str:
    """A code line as its syntax tree when it parses alone (so quotes and spacing do not matter), else its
    text with runs of whitespace squashed."""
    try:
        return ast.dump(ast.parse(line.strip()))
    except SyntaxError:
        return _squashed(line)


def _lines(code: str) -> set[str]:
    return {_canonical(line) for line in code.splitlines() if line.strip()}


def step_in_notebook(code: str, output: str, notebook: Notebook, local_names: Iterable[str]) -> bool:
    """Every line of ``code`` is a line of the notebook's code (or one wrapped in ``print``, or a loading call
    of a local file), and every line of ``output`` is in the notebook's outputs."""
    lines = _lines("\n".join(cell.source for cell in notebook.cells))
    names = tuple(local_names)
    for line in (_squashed(line) for line in code.splitlines() if line.strip()):
        wrapped = re.fullmatch(r"print\((.*)\)", line)
        loads_local = any(f"{loader}(" in line for loader in LOADERS) and any(name in line for name in names)
        found = _canonical(line) in lines or (wrapped is not None and _canonical(wrapped.group(1)) in lines)
        if not found and not loads_local:
            return False
    outputs = _squashed(notebook.outputs)
    return all(_squashed(line) in outputs for line in output.splitlines() if line.strip())


# ---- reading the models' replies


def read_json(text: str) -> Any:
    """The first JSON value (an object or a list) in ``text``, or None."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "[{":
            try:
                return decoder.raw_decode(text, start)[0]
            except json.JSONDecodeError:
                continue
    return None


def _field(record: Any, name: str) -> str:
    value = record.get(name, "") if isinstance(record, dict) else ""
    return value if isinstance(value, str) else json.dumps(value) if value is not None else ""


class _Asker:
    """The prompts of ``prompts/notebooks.yaml``, filled for one notebook, sent to the model."""

    def __init__(self, model: ChatModel, screened: Screened, options: MiningOptions) -> None:
        self.model = model
        self.templates = prompt_templates("datalyst.synth", "notebooks")
        self.common = {"notebook": clip_middle(screened.notebook.text, options.max_notebook_chars),
                       "files": [path.name for path in screened.files if path is not None] or ["none"],
                       "max_tasks": options.max_tasks, "categories": CATEGORIES}  # fmt: skip

    async def __call__(self, step: str, params: SamplingParams = SAMPLING, **values: object) -> Any:
        prompt = self.templates[step].render({**self.common, **values}).strip()
        [reply] = await self.model.agenerate([ChatMessage(role=Role.USER, content=prompt)], params)
        return read_json(reply.text)


# ---- the steps


async def mine_notebook(screened: Screened, model: ChatModel, options: MiningOptions, *,
                        require_isolation: bool = True) -> Made:  # fmt: skip
    """The tasks of one notebook, and what was dropped on the way by reason."""
    ask, outputs, dropped = _Asker(model, screened, options), screened.notebook.outputs, Counter[str]()
    rated = await ask("score")
    score = rated.get("score") if isinstance(rated, dict) else None
    if not isinstance(score, int | float) or score < options.min_score:
        return [], Counter(low_score=1)
    extracted = await ask("extract")
    drafts = [d for d in extracted if isinstance(d, dict)][: options.max_tasks] if isinstance(extracted, list) else []
    if not drafts:
        return [], Counter(no_tasks=1)
    tasks = []
    for number, draft in enumerate(drafts):
        concepts = _concepts(draft.get("concepts"))
        task_text, answer = _field(draft, "task"), _field(draft, "answer")
        made = _draft_problem(task_text, answer, concepts, outputs) or await _finish(
            ask, screened, number, task_text, concepts, _field(draft, "difficulty"), answer, require_isolation
        )
        if isinstance(made, str):
            dropped[made] += 1
        else:
            tasks.append(made)
    return tasks, dropped


def _concepts(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    return [c for c in raw if isinstance(c, str)] if isinstance(raw, list) else []


def _draft_problem(task: str, answer: str, concepts: Sequence[str], outputs: str) -> str | None:
    if not task or not concepts or concepts[0] not in CATEGORIES:
        return "unknown_category"
    if concepts[0] == "Visualization":
        return "visualization"  # NbQA sets chart tasks apart: their answers are figures, not text
    if not value_in_outputs(answer, outputs):
        return "answer_not_in_outputs"
    return None


async def _finish(ask: _Asker, screened: Screened, number: int, task_text: str, concepts: list[str],
                  difficulty: str, answer: str, require_isolation: bool) -> Task | str:  # fmt: skip
    """The draft made a task (constraints, format, label, solution, review, verification), or why it was not."""
    outputs = screened.notebook.outputs
    standard = await ask("constrain", task=task_text, answer=answer)
    constraints, answer_format, label = (_field(standard, name) for name in ("constraints", "format", "label"))
    values = extract_answers(label)
    if not values:
        return "no_label"
    if len(label) > MAX_LABEL_CHARS or len(values) > MAX_LABEL_NAMES:
        return "label_too_long"
    if not all(value_in_outputs(value, outputs) for value in values.values()):
        return "label_not_in_outputs"
    solved = await ask("solve", SOLUTION_SAMPLING, task=task_text, constraints=constraints, label=label)
    records = [r for r in solved if isinstance(r, dict)] if isinstance(solved, list) else []
    steps = [(_field(r, "thought"), _field(r, "code"), _field(r, "output")) for r in records if _field(r, "code")]
    names = [path.name for path in screened.files if path is not None]
    if not steps or not all(step_in_notebook(code, out, screened.notebook, names) for _, code, out in steps):
        return "invented_step"
    steps = with_definitions(steps, screened.notebook)
    review = await ask("review", task=task_text, constraints=constraints, format=answer_format, label=label)
    if not isinstance(review, dict) or any(str(review.get(key, "no")).lower() != "yes" for key in REVIEW):
        return "review_failed"
    verified = None
    if screened.complete:
        verified = await asyncio.to_thread(reproduces, steps, screened, values, require_isolation)
    path = screened.notebook.path
    digest = hashlib.sha256(f"{path}\n{task_text}".encode()).hexdigest()[:8]
    return Task(
        id=f"nb-{path.stem}-{number}-{digest}", question=task_text, constraints=constraints, format=answer_format,
        answer=values, judge="dabench", files=[str(p) for p in screened.files if p is not None],
        category=concepts[0], concepts=concepts, level=difficulty or None, source=SOURCE,
        solution=percent_script(steps, screened),
        lineage=Lineage(generator="notebooks", version=GENERATOR_VERSION, seed=0, verified=verified,
                        origin=str(path)),
    )  # fmt: skip


def percent_script(steps: Sequence[Step], screened: Screened) -> str:
    """The solution in the percent format (jupytext's): each thought a markdown cell, each code a code cell."""
    cells = []
    for thought, code, _ in steps:
        if thought:
            cells.append("# %% [markdown]\n" + "\n".join(f"# {line}".rstrip() for line in thought.splitlines()))
        cells.append("# %%\n" + local_code(code, screened).strip("\n"))
    return "\n\n".join(cells) + "\n"


def local_code(code: str, screened: Screened) -> str:
    """``code`` reading each data file by its name in the sandbox's work folder instead of its address or path."""
    for target, path in zip(screened.loads, screened.files, strict=True):
        if target and path is not None:
            code = code.replace(target, path.name)
    return code


def with_definitions(steps: Sequence[Step], notebook: Notebook) -> list[Step]:
    """``steps`` after the notebook's own cells that define what they use and do not define themselves (the
    loading and cleaning a model skipped), found in the syntax tree, with their real outputs."""
    cells = [cell for cell in notebook.cells if cell.source.strip()]
    opening = _lines(steps[0][1]) if steps else set()
    first = next((i for i, cell in enumerate(cells) if opening & _lines(cell.source)), len(cells))
    needed, added = _free_names(code for _, code, _ in steps), []
    for cell in reversed(cells[:first]):
        if bound := _bound_names(syntax_tree(cell.source)) & needed:
            added.insert(0, cell)
            needed = (needed - bound) | _free_names([cell.source])
    return [("", parseable(cell.source).strip("\n"), cell.output) for cell in added] + list(steps)


def _bound_names(node: ast.AST) -> set[str]:
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, ast.alias):
            names.add((child.asname or child.name).split(".")[0])
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(child.name)
    return names


def _free_names(codes: Iterable[str]) -> set[str]:
    """Names the code reads before binding them, other than Python's builtins, statement by statement: an
    assignment may read the name it binds (``df = df.dropna()``); a loop, a ``with`` or a comprehension reads
    only what it binds itself."""
    bound, free = set(dir(builtins)), set()
    for code in codes:
        for statement in syntax_tree(code).body:
            reads = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            binds = _bound_names(statement)
            assigned = set()
            if isinstance(statement, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                assigned = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            free |= reads - bound - (binds - assigned)
            bound |= binds
    return free


def reproduces(steps: Sequence[Step], screened: Screened, label: dict[str, str],
               require_isolation: bool = True) -> bool:  # fmt: skip
    """Run the solution's cells in a sandbox holding the data files; True when every label value shows up."""
    files = [str(path) for path in screened.files if path is not None]
    shown = []
    with Sandbox(files, limits=Limits(wall_s=60, cpu_s=60), require_isolation=require_isolation) as sandbox:
        for _, code, _ in steps:
            result = sandbox.run_python(local_code(code, screened))
            shown.append(result.stdout)
            if not result.ok:
                return False
    return all(value_in_outputs(value, "\n".join(shown)) for value in label.values())


class NotebookFunnel(BaseModel):
    """What became of the notebooks found: how many, which coarse filter dropped each, the caps, the rest mined."""

    found: int
    dropped: dict[str, int]
    capped: int
    mined: int


def screen_notebooks(roots: Sequence[Path], addresses: AddressMap, options: NotebookFilters,
                     caps: tuple[int, int, int] = (2, 1, 2)) -> tuple[list[Screened], NotebookFunnel]:  # fmt: skip
    """The notebooks under ``roots`` that pass the coarse filters and NbQA's caps (``complete``, ``incomplete``
    per repository, ``per_data``), in path order, with the funnel."""
    found = sorted({path.resolve(): root.resolve() for root in roots for path in _notebook_paths(root)}.items())
    dropped: Counter[str] = Counter()
    passed = []
    for path, root in found:
        try:
            result = screen_notebook(read_notebook(path, root), addresses, options)
        except DataFileError:
            result = "unreadable"
        if isinstance(result, str):
            dropped[result] += 1
        else:
            passed.append(result)
    complete, incomplete, per_data = caps
    kept, capped = cap_per_repository(passed, complete=complete, incomplete=incomplete, per_data=per_data)
    funnel = NotebookFunnel(found=len(found), dropped={r: dropped[r] for r in REASONS if dropped[r]},
                            capped=capped, mined=len(kept))  # fmt: skip
    return kept, funnel


def _notebook_paths(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return [path for path in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts]


def make_notebook_tasks(
    roots: Sequence[str | Path],
    out: str | Path,
    model: ChatModel,
    *,
    addresses: AddressMap | None = None,
    options: MiningOptions | None = None,
    require_isolation: bool = True,
    progress: bool = True,
) -> tuple[NotebookFunnel, TaskSummary]:
    """Append to ``out`` the tasks mined from every notebook under ``roots`` not done yet (resumable)."""
    addresses, options = addresses or AddressMap(), options or MiningOptions()
    kept, funnel = screen_notebooks([Path(root) for root in roots], addresses, options.filters)
    settings = {"stage": "notebooks", "roots": [str(Path(r).resolve()) for r in roots], "model": model.spec,
                "options": options.model_dump(),
                "version": GENERATOR_VERSION, "funnel": funnel.model_dump()}  # fmt: skip
    make = partial(mine_notebook, model=model, options=options, require_isolation=require_isolation)
    return funnel, run_units(kept, out, make, checks=CHECKS, settings=settings, progress=progress)
