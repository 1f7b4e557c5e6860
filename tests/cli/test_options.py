"""Commands made from config models: help from the fields' docstrings, ``--config`` files under the command line,
and one line for a wrong value."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from datalyst import provenance
from datalyst.cli._options import config_command
from datalyst.errors import ConfigError
from datalyst.provenance import new_manifest


class Inner(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    rank: int = 8
    """The rank. Why it is 8 stays out of the help."""


class Settings(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    inputs: list[str] = []
    """Files to read."""
    lr: float = 0.1
    """Learning rate."""
    inner: Inner | None = Inner()
    caps: dict[str, int] = Field(default={}, json_schema_extra={"flag": "--cap"})
    """PATH=N caps."""
    fast: bool = False


@pytest.fixture
def run(monkeypatch):
    monkeypatch.setattr(provenance, "_command", {})  # what a command records stays with this test
    app = typer.Typer()
    seen: list[tuple[Settings, int]] = []

    @config_command(app, "go", Settings, arguments=["inputs"])
    def go(config: Settings, every: Annotated[int, typer.Option(help="How often.")] = 1) -> None:
        """Go somewhere."""
        seen.append((config, every))

    @app.command()
    def other() -> None: ...

    def invoke(*args: str) -> tuple[Settings | None, int, str]:
        seen.clear()
        result = CliRunner().invoke(app, ["go", *args], env={"COLUMNS": "200"})
        if isinstance(result.exception, ConfigError):
            return None, 2, str(result.exception)
        assert result.exit_code == 0 or not seen, result.output
        return (seen[0][0] if seen else None), (seen[0][1] if seen else 0), result.output

    return invoke


def test_options_are_the_fields_with_their_first_sentence_as_help(run):
    _, _, text = run("--help")
    assert "Go somewhere." in text and "Learning rate. " in text and "[default: 0.1]" in text
    assert "--inner-rank" in text and "The rank." in text and "stays out" not in text
    assert "--cap " in text and "--every" in text and "How often." in text and "--config" in text


def test_the_command_line_wins_over_the_config_file(run, tmp_path: Path):
    toml = tmp_path / "run.toml"
    toml.write_text('lr = 0.5\nfast = true\ninputs = ["a.jsonl"]\n[inner]\nrank = 4\n')
    config, every, _ = run("--config", str(toml), "--lr", "0.25", "--every", "3")
    assert config == Settings(inputs=["a.jsonl"], lr=0.25, inner=Inner(rank=4), fast=True) and every == 3
    yaml = tmp_path / "run.yaml"
    yaml.write_text("max-nothing: 1\n")
    assert run("--config", str(yaml)) == (None, 2, f"{yaml}: no option is called 'max_nothing'; see --help")
    yaml.write_text("lr: 0.5\ncaps:\n  a.jsonl: 2\n")
    config, _, _ = run("b.jsonl", "--config", str(yaml), "--cap", "c.jsonl=3")
    assert config == Settings(inputs=["b.jsonl"], lr=0.5, caps={"c.jsonl": 3})  # a mapping given is given whole


def test_defaults_arguments_and_mappings(run):
    config, every, _ = run("x.jsonl", "y.jsonl", "--cap", "x.jsonl=2", "--inner-rank", "16")
    assert config == Settings(inputs=["x.jsonl", "y.jsonl"], caps={"x.jsonl": 2}, inner=Inner(rank=16)) and every == 1
    assert run()[0] == Settings()


def test_a_wrong_value_is_one_line_naming_its_option(run, tmp_path: Path):
    assert run("--cap", "x.jsonl") == (None, 2, "--cap x.jsonl: write KEY=VALUE")
    assert run("--cap", "x.jsonl=many")[2].startswith("--cap x.jsonl: Input should be a valid integer")
    toml = tmp_path / "run.toml"
    toml.write_text("[inner]\nrank = 'high'\n")
    assert run("--config", str(toml))[2].startswith("--inner-rank: Input should be a valid integer")
    toml.write_text("lr = [")
    assert run("--config", str(toml))[2].startswith(f"{toml}: not a TOML or YAML file of options")


def test_manifests_record_the_command_and_its_config_file(run, tmp_path: Path):
    toml = tmp_path / "run.toml"
    toml.write_text("lr = 0.5\n")
    run("--config", str(toml), "--fast")
    command = new_manifest()["command"]
    assert command["config_file"] == str(toml) and command["config_options"] == {"lr": 0.5}
    assert "arguments" in command  # what the process was called with (here, the test runner's)


class _Stop(Exception):
    pass


def test_eval_run_settings_come_from_the_file_and_the_command_line(monkeypatch, tmp_path: Path):
    import datalyst.cli._eval as eval_cli
    from datalyst.cli._app import _register, app

    _register()
    seen = []

    def prepare_run(config, out):
        seen.append(config)
        raise _Stop

    monkeypatch.setattr(eval_cli, "prepare_run", prepare_run)
    monkeypatch.setattr(provenance, "_command", {})
    toml = tmp_path / "eval.toml"
    toml.write_text('bench = "dabench"\ndialect = ["jupiter"]\nmax-turns = 8\nlast-call = true\ntemperature = 0\n')
    CliRunner().invoke(app, ["eval", "run", "--config", str(toml), "--out", str(tmp_path / "run"), "--seed", "3",
                             "--max-tokens", "768", "--model", "embedded:small", "--no-reformat"])  # fmt: skip
    config = seen[0]
    assert config.dialects == ["jupiter"] and config.agent.last_call and config.reformat_model is None
    assert config.agent.max_turns == config.search.max_depth == 8  # one turn limit for both
    sampling = config.agent.sampling  # eval's own sampling defaults under what was given
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens, sampling.seed) == (0.0, 0.95, 768, 3)


def test_a_preset_fills_what_the_run_does_not_set(monkeypatch):
    monkeypatch.setattr(provenance, "_command", {})
    app = typer.Typer()
    seen: list[Settings] = []

    @config_command(app, "go", Settings, presets={"fast": {"lr": 0.9, "inner.rank": 2}})
    def go(config: Settings) -> None:
        seen.append(config)

    @app.command()
    def other() -> None: ...

    for args in (["--fast"], ["--fast", "--lr", "0.3"], ["--lr", "0.3"]):
        assert CliRunner().invoke(app, ["go", *args]).exit_code == 0
    assert [(c.lr, c.inner.rank) for c in seen] == [(0.9, 2), (0.3, 2), (0.3, 8)]


def test_every_option_of_every_command_says_what_it_is_for():
    import typer.main

    from datalyst.cli._app import _register, app

    _register()

    def commands(group: typer.Typer, prefix: str = ""):
        for info in group.registered_commands:
            yield f"{prefix}{info.name}", typer.main.get_command_from_info(info, pretty_exceptions_short=True,
                                                                      rich_markup_mode="rich")  # fmt: skip
        for sub in group.registered_groups:
            yield from commands(sub.typer_instance, f"{prefix}{sub.name} ")

    silent = [
        f"{name} {param.opts[0]}"
        for name, command in commands(app)
        for param in command.params
        if isinstance(param, typer.core.TyperOption) and not param.help
    ]
    assert len(list(commands(app))) > 40
    assert silent == [], silent
