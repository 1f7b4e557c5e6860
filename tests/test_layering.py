"""The package layering of docs/ARCHITECTURE: lower packages never import higher ones, nobody imports cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "datalyst"
# leaf modules every package may use
SHARED = {"errors", "files", "jsonl", "paths", "progress", "prompts", "provenance", "text"}
ALLOWED = {
    "data": set(),
    "sandbox": {"data"},
    "llm": set(),
    "tasks": {"data"},
    "agent": {"llm", "sandbox", "data", "tasks", "judge"},
    "judge": {"llm", "tasks", "sandbox"},
    "synth": {"data", "sandbox", "llm", "tasks", "agent", "judge"},
    "curate": {"agent", "tasks", "judge", "llm", "synth"},
    "eval": {"data", "sandbox", "llm", "tasks", "agent", "judge", "search", "train"},
    "train": {"agent", "judge", "llm", "tasks", "curate"},
    "search": {"agent", "train", "judge", "llm", "sandbox", "tasks"},
    "web": {"data", "sandbox", "llm", "tasks", "agent", "judge", "synth", "curate", "eval", "train", "search"},
    "cli": {"data", "sandbox", "llm", "tasks", "agent", "judge", "synth", "curate", "eval", "train", "search", "web"},
}


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
    assert package in ALLOWED, f"add {package} to the layering table"
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
