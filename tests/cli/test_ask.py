"""``datalyst ask`` with a recorded model (streamed turns, the answer, notebook and page), and once with a real one."""

from __future__ import annotations

import json

import nbformat
import pytest

from datalyst.agent import ActionKind, Termination, Trajectory, Turn
from datalyst.cli._ask import _speed
from datalyst.tasks import Task

SCRIPT = [
    "<think>Load the file.</think>\n<code>\n```python\nimport pandas as pd\n"
    "df = pd.read_csv('sales.csv')\nprint(df.groupby('region')['revenue'].sum().idxmax())\n```\n</code>",
    "<think>West sells most.</think>\n<answer>West</answer>",
]


def test_ask_streams_the_turns_and_prints_the_answer(datalyst, replay_spec, tmp_path, examples_dir):
    notebook, page = tmp_path / "run.ipynb", tmp_path / "run.html"
    done = datalyst(
        "ask", str(examples_dir / "sales.csv"), "Which region has the highest revenue?",
        "--model", replay_spec(SCRIPT), "--notebook", str(notebook), "--html", str(page),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Load the file." in done.stdout and "West sells most." in done.stdout
    assert done.stdout.count("West") >= 3  # the printed result, the thought and the answer
    assert "2 turn(s) · " in done.stdout and " tokens generated" in done.stdout and "code ran" in done.stdout
    assert "reading prompts included" in done.stdout  # a replayed model does not time its first token
    cells = nbformat.read(notebook, as_version=4).cells
    assert [c.cell_type for c in cells].count("code") == 1 and "West" in cells[-2].source
    assert "Which region has the highest revenue?" in page.read_text()


def test_ask_json_prints_the_trajectory(datalyst, replay_spec, examples_dir):
    done = datalyst("ask", str(examples_dir / "sales.csv"), "Best region?", "--model", replay_spec(SCRIPT), "--json")
    trajectory = json.loads(done.stdout)
    assert trajectory["answer"] == "West" and trajectory["termination"] == "answer"
    assert trajectory["turns"][0]["observation"] == "West"


def test_ask_samples_at_the_temperature_and_seed_it_is_given(datalyst, replay_spec, examples_dir):
    greedy = datalyst("ask", str(examples_dir / "sales.csv"), "Best region?", "--model", replay_spec(SCRIPT), "--json")
    assert json.loads(greedy.stdout)["sampling"]["temperature"] == 0.0
    sampled = datalyst(
        "ask", str(examples_dir / "sales.csv"), "Best region?", "--model", replay_spec(SCRIPT), "--json",
        "--temperature", "0.7", "--seed", "3",
    )  # fmt: skip
    sampling = json.loads(sampled.stdout)["sampling"]
    assert (sampling["temperature"], sampling["seed"], sampling["max_tokens"]) == (0.7, 3, 1024)


def test_ask_without_an_answer_exits_1(datalyst, replay_spec, examples_dir):
    spec = replay_spec(["hmm", "still thinking", ""])  # nothing at the last call either
    done = datalyst("ask", str(examples_dir / "sales.csv"), "Best region?", "--model", spec, "--max-turns", "2")
    assert done.returncode == 1 and "No answer: the agent used all its turns without answering" in done.stdout
    assert all(ending.words for ending in Termination)  # every way a run ends is said in words


def test_ask_asks_once_more_for_an_answer_when_the_turns_run_out(datalyst, replay_spec, examples_dir):
    failing = "<think>Sum it.</think>\n<code>\n```python\nprint(undefined_frame)\n```\n</code>"
    spec = replay_spec([failing, "West</answer>"])  # the last call begins the turn with the answer tag
    done = datalyst(
        "ask", str(examples_dir / "sales.csv"), "Best region?", "--model", spec, "--max-turns", "1", "--json"
    )
    trajectory = json.loads(done.stdout)
    assert done.returncode == 0 and trajectory["answer"] == "West", done.stderr
    assert "No code can run any more" in trajectory["turns"][0]["last_call"]
    shown = datalyst("ask", str(examples_dir / "sales.csv"), "Best region?", "--model", spec, "--max-turns", "1")
    assert shown.returncode == 0 and "This answer was asked for when no turn was left" in shown.stdout


def test_ask_user_errors_are_one_line(datalyst, tmp_path, examples_dir):
    bad_dialect = datalyst("ask", str(examples_dir / "sales.csv"), "q", "--dialect", "klingon")
    assert bad_dialect.returncode == 2 and bad_dialect.stderr.startswith("error: unknown dialect 'klingon'")
    unreachable = datalyst(
        "ask", str(examples_dir / "sales.csv"), "q", "--model", "openai:some-model@http://127.0.0.1:9/v1"
    )
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr
    assert "cannot reach the model server" in unreachable.stderr


def footer(*turns: tuple[int, float, float | None]) -> str:
    """The footer of a trajectory whose turns wrote (tokens, generation_s, first_token_s)."""
    trajectory = Trajectory(
        id="t#0", task=Task(id="t", question="q"), trial=0, dialect="datamind", model="m", sampling={},
        system_prompt="", first_message="", started_at="2026-01-01T00:00:00Z", datalyst_version="0",
        termination="answer",
        turns=[
            Turn(index=i, raw="", text="", kind=ActionKind.VOID, completion_tokens=tokens, generation_s=seconds,
                 first_token_s=first, execution_s=0.5)
            for i, (tokens, seconds, first) in enumerate(turns)
        ],
    )  # fmt: skip
    return _speed(trajectory)


def test_the_footer_gives_the_generation_speed_apart_from_reading_prompts():
    # 100 + 50 tokens in (4 - 1) + (2.5 - 0.5) = 5 s of writing: 30 tokens/s
    assert footer((100, 4.0, 1.0), (50, 2.5, 0.5)) == (
        "2 turn(s) · 150 tokens generated in 6.5 s of model time (30.0 tokens/s, after 1.5 s reading prompts) · "
        "code ran 1.0 s"
    )
    # a turn without the first token's time: the speed counts reading prompts in
    assert "(23.1 tokens/s, reading prompts included)" in footer((100, 4.0, 1.0), (50, 2.5, None))


@pytest.mark.model
@pytest.mark.slow
def test_ask_with_a_real_model_names_the_cpu_library_that_ran_it(datalyst, examples_dir):
    pytest.importorskip("llama_cpp", reason="needs pip install 'datalyst[llamacpp]'")
    done = datalyst(
        "ask", str(examples_dir / "sales.csv"), "How many rows are there?", "--model", "embedded:tiny",
        "--max-turns", "1", timeout_s=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr  # tiny may not answer in one turn; it must run
    footer = done.stdout.strip().splitlines()[-1]
    assert "tokens generated" in footer and "· llama.cpp CPU library " in footer, done.stdout


def test_a_long_line_of_code_wraps_inside_its_panel_and_is_never_cut(datalyst, replay_spec, examples_dir):
    line = "best = max(totals, key=totals.get) if totals else None  # the region with the most revenue, at_the_end"
    cell = f"<code>\n```python\ntotals = {{'West': 4961.88}}\n{line}\n```\n</code>"
    script = replay_spec([cell, "<answer>West</answer>"], per_turn=True)
    done = datalyst("ask", str(examples_dir / "sales.csv"), "Best region?", "--model", script)
    assert done.returncode == 0, done.stderr
    assert "at_the_end" in done.stdout and "Traceback" not in done.stdout


def test_a_long_answer_wraps_inside_its_panel_and_is_never_cut(datalyst, replay_spec, examples_dir):
    long = "The region with the highest total revenue is West, with 4961.88 in all, ahead of East at 3120.55."
    done = datalyst(
        "ask", str(examples_dir / "sales.csv"), "Best region?", "--model", replay_spec([f"<answer>{long}</answer>"])
    )
    assert done.returncode == 0, done.stderr
    shown = " ".join(line.strip("│ ") for line in done.stdout.splitlines() if line.startswith("│"))
    assert long in shown and "3120.55." in done.stdout
