"""Reading executed Jupyter notebooks for mining (NbQA): their cells, the data files they load, coarse filters.

The data files come from the loading calls themselves, read from the code's syntax tree: the first argument of
``pd.read_csv`` and its kin, a string or a name bound to one earlier in the notebook (``url = '...'`` then
``pd.read_csv(url)``). A web address becomes a local file through an :class:`AddressMap`; any other path is
looked for next to the notebook. Every coarse filter has a stable reason name, counted in the funnel.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field

from datalyst.data import DataFileError, load
from datalyst.errors import ConfigError

LOADERS = frozenset({"read_csv", "read_table", "read_excel", "read_json", "read_parquet", "read_fwf",
                     "read_feather", "read_stata", "read_sas", "read_spss", "loadtxt", "genfromtxt"})  # fmt: skip
"""Calls whose first argument (or ``filepath_or_buffer`` / ``io`` / ``path`` / ``fname``) names a data file."""
DATABASES = frozenset({"sqlite3.connect", "duckdb.connect"})
"""Calls that open a database file, named with their module (``connect`` alone is too common a name)."""
_PATH_KEYWORDS = ("filepath_or_buffer", "io", "path", "path_or_buf", "fname", "database")

TEACHING_DATASETS = ("iris", "titanic", "breast cancer", "breast_cancer", "boston housing", "load_boston",
                     "wine quality", "winequality")  # fmt: skip
"""Common teaching and competition datasets (NbQA's list, as words found in file names or code)."""
DEEP_LEARNING = re.compile(
    r"\b(?:import torch|from torch|tensorflow|keras|jax\b|flax\b|\.cuda\(|device\s*=\s*['\"]cuda|"
    r"transformers\b|nn\.Module)",
)
"""Neural networks, pre-trained models or GPU code (NbQA keeps classical analysis only)."""

REASONS = ("unreadable", "unexecuted_cells", "not_in_order", "error_output", "short_code", "teaching_dataset",
           "neural_network", "no_data_files", "missing_data", "small_data")  # fmt: skip
"""Coarse filters in the order they are applied; a notebook is counted under the first it fails."""


@dataclass(frozen=True)
class Cell:
    """A code cell: its source and what it showed (text outputs joined; an image as a placeholder)."""

    source: str
    output: str
    execution_count: int | None
    error: bool = False


@dataclass(frozen=True)
class Notebook:
    path: Path
    repository: str
    """The folder it came from (the first folder under the scanned root): the unit of NbQA's caps."""
    cells: tuple[Cell, ...]
    text: str
    """The whole notebook as markdown with code blocks and their outputs, in order (what the models read)."""

    @cached_property
    def outputs(self) -> str:
        """Every code cell's output, in order."""
        return "\n".join(cell.output for cell in self.cells)

    @property
    def code_lines(self) -> int:
        return sum(1 for cell in self.cells for line in cell.source.splitlines() if line.strip())


def read_notebook(path: Path, root: Path) -> Notebook:
    """``path`` parsed with nbformat; DataFileError when it is not a readable notebook."""
    import nbformat  # slow to import; only mining needs it

    try:
        node = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises many kinds (JSON, validation, encoding)
        raise DataFileError(f"{path} is not a readable notebook: {exc}") from exc
    cells, parts = [], []
    for cell in node.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        elif cell.cell_type == "code":
            output, error = _outputs(cell.get("outputs", []))
            cells.append(Cell(cell.source, output, cell.get("execution_count"), error))
            parts.append(f"```python\n{cell.source}\n```" + (f"\n\nOutput:\n```\n{output}\n```" if output else ""))
    relative = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
    repository = relative.parts[0] if len(relative.parts) > 1 else root.name
    return Notebook(path, repository, tuple(cells), "\n\n".join(parts))


def _outputs(outputs: Sequence[Mapping]) -> tuple[str, bool]:
    texts, error = [], False
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            texts.append(output.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "text/plain" in data:
                texts.append(data["text/plain"])
            elif any(key.startswith("image/") for key in data):
                texts.append("[figure]")
        elif kind == "error":
            error = True
            texts.append(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
    return "".join(text if text.endswith("\n") else text + "\n" for text in texts).rstrip("\n"), error


# ---- data loading calls


def parseable(source: str) -> str:
    """The cell without IPython magics and shell lines, which are not Python."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def syntax_tree(source: str) -> ast.Module:
    """The cell's syntax tree without its magics; an empty module when it is not Python."""
    try:
        return ast.parse(parseable(source))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _string(node: ast.expr, names: Mapping[str, str]) -> str | None:
    """A node's value when it is a string: a literal, a name bound to one, or literals and names added up."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left, names), _string(node.right, names)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [_string(value, names) if not isinstance(value, ast.FormattedValue) else _string(value.value, names)
                 for value in node.values]  # fmt: skip
        return "".join(parts) if all(part is not None for part in parts) else None  # type: ignore[arg-type]
    return None


def data_loads(cells: Iterable[Cell]) -> list[str | None]:
    """What each loading call in the notebook reads, in order: the path or address, or None when the code
    computes it in a way the syntax tree does not show."""
    names: dict[str, str] = {}
    found: list[str | None] = []
    for cell in cells:
        for node in ast.walk(syntax_tree(cell.source)):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if (value := _string(node.value, names)) is not None:
                    names[node.targets[0].id] = value
            elif isinstance(node, ast.Call) and (_called(node) in LOADERS or _module_call(node) in DATABASES):
                argument = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg in _PATH_KEYWORDS), None)  # fmt: skip
                found.append(_string(argument, names) if argument is not None else None)
    return found


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _module_call(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


# ---- from addresses and paths to local files


@dataclass
class AddressMap:
    """Where web addresses live on this machine.

    ``repositories`` maps ``OWNER/REPO`` to a folder holding a copy of that repository: a
    ``raw.githubusercontent.com/OWNER/REPO/BRANCH/PATH`` (or ``github.com/OWNER/REPO/raw|blob/BRANCH/PATH``)
    address becomes ``FOLDER/PATH``. ``files`` maps a whole address to one local file.
    """

    repositories: dict[str, Path] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AddressMap:
        """From ``OWNER/REPO=FOLDER`` and ``ADDRESS=FILE`` entries (the command line's ``--map``)."""
        mapping = cls()
        for entry in entries:
            key, sep, target = entry.partition("=")
            if not sep or not key or not target:
                raise ConfigError(f"--map {entry!r}: write OWNER/REPO=FOLDER or ADDRESS=FILE")
            if "://" in key:
                mapping.files[key] = Path(target).expanduser()
            elif key.count("/") == 1:
                mapping.repositories[key] = Path(target).expanduser()
            else:
                raise ConfigError(f"--map {entry!r}: the key must be OWNER/REPO or a whole web address")
        return mapping

    def local(self, address: str) -> Path | None:
        """The local copy of ``address``, or None when the map has none."""
        if address in self.files:
            return self.files[address]
        url = urlparse(address)
        parts = [unquote(part) for part in url.path.split("/") if part]
        if url.netloc == "raw.githubusercontent.com" and len(parts) >= 4:
            repository, rest = "/".join(parts[:2]), parts[3:]
        elif url.netloc == "github.com" and len(parts) >= 5 and parts[2] in ("raw", "blob"):
            repository, rest = "/".join(parts[:2]), parts[4:]
        else:
            return None
        folder = self.repositories.get(repository)
        return folder.joinpath(*rest) if folder is not None else None


def find_data_file(target: str, notebook: Path, addresses: AddressMap) -> Path | None:
    """The local file a loading call reads: through the address map for a web address, else the path next to
    the notebook, else a file of that name next to it (a path from its author's machine, ``~/Desktop/x.csv``)."""
    if "://" in target:
        local = addresses.local(target)
        return local if local is not None and local.is_file() else None
    candidates = [notebook.parent / target, notebook.parent / Path(target).name]
    return next((path for path in candidates if path.is_file()), None)


def table_rows(path: Path) -> int:
    """Rows of the largest table in ``path`` (data lines less a header, for text datalyst cannot parse)."""
    try:
        return max(len(frame) for frame in load(path).values())
    except (DataFileError, ValueError):
        with path.open(encoding="utf-8", errors="replace") as handle:
            return max(sum(1 for line in handle if line.strip()) - 1, 0)


def data_hash(files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# ---- coarse filters


class NotebookFilters(BaseModel):
    """NbQA's coarse filters: what a notebook must have before a model reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    min_code_lines: int = 40
    """Fewest non-blank lines of code a notebook may have."""
    min_rows: int = 20
    """Fewest rows its largest data table may have."""
    exclude: list[str] = Field(default_factory=list)
    """More teaching or competition datasets to drop (a word each), beside :data:`TEACHING_DATASETS`."""
    keep_incomplete: bool = False
    """Keep notebooks whose data files are not all here (their tasks stay unverified). NbQA keeps them for SFT."""


@dataclass(frozen=True)
class Screened:
    """A notebook that passed the coarse filters, with its data files (None for each one not found)."""

    notebook: Notebook
    loads: tuple[str, ...]
    files: tuple[Path | None, ...]

    @property
    def id(self) -> str:
        return str(self.notebook.path)

    @property
    def complete(self) -> bool:
        return all(path is not None for path in self.files)


def screen_notebook(notebook: Notebook, addresses: AddressMap, options: NotebookFilters) -> Screened | str:
    """The notebook with its data files, or the name of the first coarse filter it fails (see :data:`REASONS`)."""
    executed = [cell.execution_count for cell in notebook.cells if cell.source.strip()]
    if any(count is None for count in executed):
        return "unexecuted_cells"
    if any(b <= a for a, b in itertools.pairwise(executed)):  # type: ignore[operator]
        return "not_in_order"
    if any(cell.error for cell in notebook.cells):
        return "error_output"
    if notebook.code_lines < options.min_code_lines:
        return "short_code"
    code = "\n".join(cell.source for cell in notebook.cells)
    loads = data_loads(notebook.cells)
    words = f"{notebook.path.name}\n{code}\n{' '.join(str(target) for target in loads)}".lower()
    if any(re.search(rf"\b{re.escape(name.lower())}\b", words) for name in (*TEACHING_DATASETS, *options.exclude)):
        return "teaching_dataset"
    if DEEP_LEARNING.search(code):
        return "neural_network"
    if not loads:
        return "no_data_files"
    files = tuple(find_data_file(target, notebook.path, addresses) if target else None for target in loads)
    if not options.keep_incomplete and any(path is None for path in files):
        return "missing_data"
    found = [path for path in files if path is not None]
    if found and max(table_rows(path) for path in found) < options.min_rows:
        return "small_data"
    return Screened(notebook, tuple(target or "" for target in loads), files)


def cap_per_repository(screened: Sequence[Screened], *, complete: int = 2, incomplete: int = 1,
                       per_data: int = 2) -> tuple[list[Screened], int]:  # fmt: skip
    """NbQA's diversity caps: at most ``complete`` notebooks per repository when their data is all here and
    ``incomplete`` when not, and at most ``per_data`` per group of notebooks reading the same data (a group
    whose notebooks come from several repositories is dropped: its data was copied around). Returns the kept
    notebooks, in order, and how many were capped."""
    groups: dict[str, list[Screened]] = {}
    for item in screened:
        if item.complete:
            groups.setdefault(data_hash(p for p in item.files if p is not None), []).append(item)
    shared = {id(item) for group in groups.values() if len({i.notebook.repository for i in group}) > 1
              for item in group}  # fmt: skip
    in_group = {id(item): rank for group in groups.values() for rank, item in enumerate(group)}
    taken: dict[tuple[str, bool], int] = {}
    kept = []
    for item in screened:
        key = (item.notebook.repository, item.complete)
        limit = complete if item.complete else incomplete
        if id(item) in shared or in_group.get(id(item), 0) >= per_data or taken.get(key, 0) >= limit:
            continue
        taken[key] = taken.get(key, 0) + 1
        kept.append(item)
    return kept, len(screened) - len(kept)
