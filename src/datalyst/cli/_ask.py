"""``datalyst ask``: answer a question about data files with an agent, showing each step as it happens."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from datalyst.agent import (
    DIALECTS,
    ActionKind,
    Agent,
    AgentConfig,
    Trajectory,
    Turn,
    analyst_config,
    get_dialect,
    to_html,
    to_notebook,
)
from datalyst.cli._app import AllowUnisolated, app
from datalyst.data import start_reader
from datalyst.llm import load_model, own_dialect, resolve_spec
from datalyst.tasks import Task

ASK_MODEL = "embedded:medium"
"""``ask``'s default model, chosen on held-out questions and speed (docs/models.md)."""


@app.command("ask")
def ask_command(
    files: Annotated[list[Path], typer.Argument(help="Data files the question is about.", show_default=False)],
    question: Annotated[str, typer.Argument(help="The question, in quotes.", show_default=False)],
    model: Annotated[
        str | None,
        typer.Option(
            help="Model spec, e.g. embedded:small, gguf:PATH, openai:NAME@URL. [default: embedded:medium, unless "
            "$DATALYST_MODEL or the config file names one]"
        ),
    ] = None,
    dialect: Annotated[
        str | None,
        typer.Option(help=f"Turn format: {', '.join(DIALECTS)}. [default: the model's own, else datamind]"),
    ] = None,
    max_turns: Annotated[int, typer.Option(help="Turns the agent may take.")] = 10,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="Sampling temperature; 0 is greedy, the same run every time.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the sampling (with a temperature above 0).")] = 0,
    notebook: Annotated[Path | None, typer.Option(help="Also save the run as a Jupyter notebook.")] = None,
    html: Annotated[Path | None, typer.Option(help="Also save the run as a standalone HTML page.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole trajectory as JSON instead.")] = False,
    allow_unisolated: AllowUnisolated = False,
) -> None:
    """Ask a QUESTION about FILES; the agent writes and runs code in the sandbox until it can answer."""
    spec = resolve_spec(model, default=ASK_MODEL)
    dialect = dialect or own_dialect(spec) or "datamind"
    get_dialect(dialect)  # an unknown name stops here, in one line
    console = Console(highlight=False, soft_wrap=True, stderr=as_json)
    task = Task(id=uuid.uuid4().hex[:8], question=question, files=[str(p) for p in files])
    console.print(f"[dim]model {spec} · dialect {dialect}[/]")
    config = analyst_config(dialect=dialect, max_turns=max_turns, require_isolation=not allow_unisolated)
    config.sampling = config.sampling.model_copy(update={"temperature": temperature, "seed": seed})
    trajectory, runs_on = asyncio.run(_run(task, str(spec), config, console))
    if notebook is not None:
        import nbformat

        notebook.write_text(nbformat.writes(to_notebook(trajectory)))
        console.print(f"[dim]Saved notebook to {notebook}[/]")
    if html is not None:
        html.write_text(to_html(trajectory))
        console.print(f"[dim]Saved page to {html}[/]")
    if as_json:
        print(trajectory.model_dump_json(indent=2))
    elif trajectory.answer is None:
        console.print(f"[bold red]No answer:[/] {trajectory.termination.words} ({len(trajectory.turns)} turns)")
    elif any(turn.last_call for turn in trajectory.turns):
        console.print(
            "[yellow]This answer was asked for when no turn was left, after cells that failed or ran out of turns: "
            "check it against the outputs above.[/]"
        )
    console.print(f"[dim]{_speed(trajectory)}{f' · {runs_on}' if runs_on else ''}[/]")
    raise typer.Exit(0 if trajectory.answer is not None else 1)


async def _run(task: Task, spec: str, config: AgentConfig, console: Console) -> tuple[Trajectory, str | None]:
    """The trajectory, and for a model run here, which of llama.cpp's CPU libraries ran it."""
    start_reader()  # it loads while the model does
    chat_model = load_model(spec)
    cpu = getattr(chat_model, "cpu", None)
    try:
        agent = Agent(chat_model, config)
        with console.status("[dim]the model is thinking[/]") as status:

            def on_turn(turn: Turn) -> None:
                console.print(_show(turn), soft_wrap=False)  # a panel's text wraps inside it, never cut
                status.update(f"[dim]the model is thinking (turn {turn.index + 2})[/]")

            return await agent.arun(task, on_turn=on_turn), cpu.describe() if cpu is not None else None
    finally:
        await chat_model.aclose()


def _speed(trajectory: Trajectory) -> str:
    """The footer: turns, how fast the model wrote, and where the time went."""
    turns = trajectory.turns
    tokens = sum(turn.completion_tokens for turn in turns)
    generation_s = sum(turn.generation_s for turn in turns)
    execution_s = sum(turn.execution_s for turn in turns)
    waits = [turn.first_token_s for turn in turns if turn.first_token_s is not None]
    if tokens and len(waits) == len(turns) and generation_s > (reading_s := sum(waits)):
        speed = f" ({tokens / (generation_s - reading_s):.1f} tokens/s, after {reading_s:.1f} s reading prompts)"
    elif tokens and generation_s > 0:
        speed = f" ({tokens / generation_s:.1f} tokens/s, reading prompts included)"
    else:
        speed = ""
    return (
        f"{len(turns)} turn(s) · {tokens} tokens generated in {generation_s:.1f} s of model time{speed} · "
        f"code ran {execution_s:.1f} s"
    )


def _show(turn: Turn) -> Group | Text | Panel:
    """One turn as the terminal shows it: the thought, then the code and what it printed."""
    parts: list[Text | Panel | Syntax] = []
    if turn.thought:
        parts.append(Text(turn.thought, style="italic"))
    if turn.kind == ActionKind.CODE:
        parts.append(
            Panel(Syntax(turn.code or "", "python", theme="ansi_dark", word_wrap=True), title=f"cell {turn.index + 1}")
        )
        style = "red" if turn.cell_failed else "dim"
        parts.append(Panel(Text(turn.observation or "", style=style), title="output", title_align="left"))
    elif turn.kind == ActionKind.ANSWER:
        parts.append(Panel(Text(turn.answer or "", style="bold"), title="answer", border_style="green"))
    else:
        parts.append(Text(f"(turn {turn.index + 1}: no code and no answer)", style="yellow"))
    return Group(*parts)
