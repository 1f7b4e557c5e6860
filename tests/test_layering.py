"""The package layering of docs/architecture.md: each package imports only what its row allows, nobody imports cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "datalyst"
DOC = SRC.parents[1] / "docs" / "architecture.md"
# leaf modules every package may use
SHARED = {"errors", "files", "jsonl", "paths", "progress", "prompts", "provenance", "text"}


def _allowed() -> dict[str, set[str]]:
    """The package table of docs/architecture.md: package -> the packages it may import."""
    rows = [line.split("|") for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return {row[1].strip(" `"): {name.strip() for name in row[3].split(",")} - {"—", ""} for row in rows}


ALLOWED = _allowed()


def _imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "datalyst" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"))
def test_package_imports_respect_the_layering(package):
    assert package in ALLOWED, f"add {package} to the table of docs/architecture.md"
    for module in (SRC / package).rglob("*.py"):
        used = _imported_packages(module) - SHARED - {package}
        assert used <= ALLOWED[package], f"{module.relative_to(SRC)} imports {used - ALLOWED[package]}"


@pytest.mark.parametrize("package", sorted(p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"))
def test_packages_use_only_each_others_public_names(package):
    for module in (SRC / package).rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("datalyst."):
                parts = node.module.split(".")
                private = [p for p in parts[2:] if p.startswith("_")]
                assert parts[1] == package or not private, f"{module.relative_to(SRC)} imports {node.module}"
