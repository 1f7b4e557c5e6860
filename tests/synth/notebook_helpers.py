"""Notebooks written for the mining tests."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROWS = "x,y\n" + "".join(f"{i},{i * i}\n" for i in range(30))
FILLER = "\n".join(f"v{i} = {i}" for i in range(40))  # enough lines of code for the 40-line filter


def write_notebook(path: Path, sources: list[str], *, counts: list[int | None] | None = None,
                   outputs: list[list] | None = None) -> Path:  # fmt: skip
    counts = counts or list(range(1, len(sources) + 1))
    outputs = outputs or [[new_output("stream", name="stdout", text="ok\n")] for _ in sources]
    cells = [new_markdown_cell("# An analysis")]
    cells += [new_code_cell(source, execution_count=count, outputs=output)
              for source, count, output in zip(sources, counts, outputs, strict=True)]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=cells), path)
    return path
