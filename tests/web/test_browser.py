"""The app in headless Chromium (Debian's package, driven by Playwright): ask and watch the answer stream in,
download the notebook, open a run and a failed trajectory, compare two runs, browse a tasks file.

Set DATALYST_SCREENSHOTS to a folder to save a screenshot of each page there (docs/web.md shows them).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest
from web_helpers import (
    NO_ANSWER,
    RIGHT_FOR_Q0,
    TOKEN,
    answer,
    code,
    eval_run,
    live_server,
    readers,
    script_spec,
    serve_config,
    wide_csv,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (.ci/run installs it)")
expect = pytest.importorskip("playwright.sync_api").expect
REGIONS = "import pandas as pd\nprint(pd.read_csv('sales.csv').groupby('region')['revenue'].sum().round(2))"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory, dabench_tables, examples_dir):
    root = tmp_path_factory.mktemp("served")
    eval_run(root / "runs" / "baseline", NO_ANSWER)
    eval_run(root / "runs" / "better", RIGHT_FOR_Q0)
    (root / "offered").mkdir()
    shutil.copy(examples_dir / "sales.csv", root / "offered")
    config = serve_config(root, runs=root / "runs", data=[root / "runs"], files=root / "offered")
    slow = script_spec(root / "slow.jsonl", [code("import time\ntime.sleep(20)"), answer("done")])
    broken_json = code("import json\njson.loads('{')")
    failing = script_spec(root / "failing.jsonl", [code("int('x')"), broken_json, code("1/0"), code("print(1)")])
    missing = f"replay:{root}/@name[value] [train].jsonl"
    regions = script_spec(root / "regions.jsonl", [code(REGIONS), answer("West has the highest total revenue.")])
    typing = script_spec(root / "typing.jsonl", [code("print(6 * 7)", "I multiply."), answer("42")], latency_s=4)
    config = config.model_copy(update={"models": [*config.models, slow, missing, failing, regions, typing]})
    with live_server(config) as (base, app):
        yield base, app


@pytest.fixture
def bare_page(tmp_path, browser):
    """The app of a server started with no runs or data folder."""
    with live_server(serve_config(tmp_path)) as (base, _):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{base}/?token={TOKEN}")
        yield page
        context.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(server, browser):  # the server first: its eval runs need a thread without Playwright's loop
    base, _ = server
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{base}/?token={TOKEN}")
    yield page
    context.close()


def screenshot(page, name: str) -> None:
    folder = os.environ.get("DATALYST_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_asking_streams_cells_outputs_a_figure_and_the_answer_then_the_notebook_downloads(page, examples_dir, server):
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.fill("#question", "How many rows does the file have?")
    page.click("#ask")
    page.wait_for_selector(".final")
    assert page.locator(".exchange .question").inner_text() == "How many rows does the file have?"
    assert page.locator("pre.code").count() == 2
    assert page.locator(".output").first.inner_text().strip() == "60"
    assert page.locator("img.figure").count() == 1
    assert page.locator(".output").nth(1).inner_text().strip() == "plotted"  # the figure shows; its file is not named
    assert page.locator(".final").inner_text() == "@rows[20]"
    assert page.locator("#files-info").inner_text().startswith("sales.csv (csv, 60 rows")
    page.fill("#question", "And the largest sale?")
    page.press("#question", "Enter")
    page.wait_for_selector(".exchange:nth-child(2) .final")
    assert page.locator(".exchange:nth-child(2) .tag").inner_text() == "follow-up"
    screenshot(page, "ask")
    with page.expect_download() as download:
        page.click("#download-notebook")
    notebook = nbformat.read(download.value.path(), as_version=4)
    nbformat.validate(notebook)
    assert [cell.execution_count for cell in notebook.cells if cell.cell_type == "code"] == [1, 2, 3]  # as on the page
    assert page.locator(".label").all_inner_texts() == ["CELL 1", "CELL 2", "CELL 3"]  # upper case by its style
    page.click("#new-conversation")
    _, app = server
    expect(page.locator("#transcript > *")).to_have_count(0)
    assert len(app.state.conversations) == 0


def test_a_run_shows_its_report_and_a_failed_trajectory(page):
    page.click("nav a[data-page=runs]")
    page.wait_for_selector("#runs-table tbody tr")
    assert page.locator("#runs-table tbody tr").count() == 2
    screenshot(page, "runs")
    page.click("text=better")
    page.wait_for_selector("#run-rows tbody tr")
    assert "33.3" in page.locator("#run-summary").inner_text()
    assert page.locator(".chart .bar-row").count() >= 1
    page.select_option("#run-filters select[data-facet=verdict]", "malformed")  # wrong, in another's format
    expect(page.locator("#run-count")).to_have_text("4 of 6 trajectories")
    page.locator("#run-rows tbody tr a").first.click()
    expect(page.frame_locator("#run-trajectory").locator("body")).to_contain_text("@mean_fare[34.65]")
    screenshot(page, "run")


def test_two_runs_compare(page):
    page.goto(page.url.split("#")[0] + "#/runs")
    page.wait_for_selector("#runs-table tbody tr")
    for box in page.locator("#runs-table input[type=checkbox]").all():
        box.check()
    page.click("#compare")
    page.wait_for_selector("#compare-table tbody tr")
    rows = page.locator("#compare-table tbody tr")
    assert rows.count() == 2 and "pass@1" in rows.first.inner_text()
    assert "significant" in rows.first.inner_text()
    screenshot(page, "compare")


def test_a_tasks_file_is_browsed_with_filters(page):
    page.click("nav a[data-page=data]")
    page.wait_for_selector("#data-file option:nth-child(2)", state="attached")
    label = page.locator("#data-file option", has_text="better/tasks.jsonl").inner_text()
    page.select_option("#data-file", label=label)
    page.wait_for_selector("#data-rows tbody tr")
    assert page.locator("#data-count").inner_text() == "3 of 3 tasks"
    screenshot(page, "data")


def test_a_new_conversation_while_an_answer_streams_is_no_error(page, server, examples_dir):
    base, _ = server
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.select_option("#model", index=1)  # a model whose first cell takes 20 s
    page.fill("#question", "Anything?")
    page.click("#ask")
    page.wait_for_selector(".turn.pending")
    page.click("#new-conversation")
    expect(page.locator("#transcript > *")).to_have_count(0)
    expect(page.locator("#ask")).to_be_enabled()
    assert page.locator("#ask-error").is_hidden() and "aborted" not in page.locator("body").inner_text()
    favicon = page.request.get(f"{base}/favicon.ico")
    assert favicon.status == 200 and favicon.headers["content-type"] == "image/svg+xml"


def test_an_error_shows_its_text_exactly(page, examples_dir):
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.select_option("#model", index=2)  # a replay model whose file is missing
    page.fill("#question", "Anything?")
    page.click("#ask")
    page.wait_for_selector(".final.none")
    assert "/@name[value] [train].jsonl: No such file" in page.locator(".final.none").inner_text()


def test_pages_without_runs_or_data_say_how_to_get_them(bare_page):
    bare_page.click("nav a[data-page=runs]")
    expect(bare_page.locator("#runs-note")).to_contain_text("datalyst serve --runs DIR")
    assert bare_page.locator("#runs-table").is_hidden() and bare_page.locator("#compare").is_hidden()
    bare_page.click("nav a[data-page=data]")
    expect(bare_page.locator("#data-note")).to_contain_text("datalyst serve --data DIR")
    assert bare_page.locator("#data-picker").is_hidden()


def test_a_first_visit_is_guided_in_plain_words(page):
    assert page.locator("#new-conversation").is_hidden()  # there is no conversation yet
    assert page.locator("#dialect").is_hidden()  # under "Advanced", preselected from the model
    assert page.locator("#dialect").input_value() == "datamind"
    expect(page.locator("#folder-files legend")).to_have_text("or pick files from the served folder")
    page.click("#welcome .example")
    assert page.locator("#question").input_value() == "Which region has the highest total revenue?"
    page.check("#folder-files input[value='sales.csv']")
    page.select_option("#model", index=3)  # a model whose cells all fail
    page.click("#ask")
    expect(page.locator(".final.none")).to_have_text(
        "No answer: the code kept failing; the last error was ZeroDivisionError: division by zero."
    )
    library_error = page.locator(".output.error").nth(1).inner_text()  # a traceback through the standard library
    assert 'File "<python>/json/decoder.py"' in library_error
    assert sys.base_prefix not in library_error and sys.prefix not in library_error  # no host path
    assert page.locator("#new-conversation").is_visible() and page.locator("#welcome").is_hidden()


def test_the_page_shows_what_the_agent_is_doing_follows_it_and_esc_stops_it(page, examples_dir):
    page.set_viewport_size({"width": 1280, "height": 320})  # short: the steps go past the bottom
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.select_option("#model", index=1)  # a model whose first cell takes 20 s
    page.fill("#question", "Anything?")
    asked = time.monotonic()
    page.click("#ask")
    page.wait_for_selector("#working")
    assert time.monotonic() - asked < 1.0
    expect(page.locator("#working")).to_contain_text("Running cell 1…")
    assert re.fullmatch(r"Running cell 1… \d+\.\d s", page.locator("#working").inner_text())
    assert page.evaluate("scrollY") > 0  # followed the new step down
    page.evaluate("scrollTo(0, 0)")  # the reader goes back up to read
    page.keyboard.press("Escape")
    expect(page.locator(".final.none")).to_contain_text("Stopped.")
    assert page.evaluate("scrollY") == 0 and page.locator("#working").is_hidden()


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("empty.csv", b"", "empty"),
        ("blob.csv", bytes(range(256)) * 40, "binary"),
        ("note.txt", b"just one line of prose\n", "no rows of data"),
    ],
)
def test_a_file_is_checked_as_it_is_chosen(page, examples_dir, name, content, why):
    page.set_input_files("#upload", files=[{"name": name, "mimeType": "text/plain", "buffer": content}])
    expect(page.locator("#ask-error")).to_contain_text(name)  # at once, before any question
    assert why in page.locator("#ask-error").inner_text() and "\n" not in page.locator("#ask-error").inner_text()
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    expect(page.locator("#files-info")).to_have_text("sales.csv (csv, 60 rows \u00d7 6 columns)")
    assert page.locator("#ask-error").is_hidden()


def test_esc_stops_a_check_and_the_server_stops_reading(page):
    page.set_input_files("#upload", files=[{"name": "wide.csv", "mimeType": "text/csv", "buffer": wide_csv()}])
    expect(page.locator("#files-info")).to_have_text("checking the files… (Esc stops)")
    deadline = time.monotonic() + 20
    while not readers():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    page.keyboard.press("Escape")
    expect(page.locator("#files-info")).to_have_text("checking stopped")
    deadline = time.monotonic() + 5
    while readers():
        assert time.monotonic() < deadline, "the reader outlived the check"
        time.sleep(0.05)
    assert page.locator("#ask-error").is_hidden()


def test_the_answer_shows_the_value_that_decides_it_and_the_cell_behind_it(page, examples_dir):
    page.set_viewport_size({"width": 1280, "height": 400})
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.select_option("#model", index=4)  # totals by region, then "West has the highest total revenue."
    page.fill("#question", "Which region has the highest total revenue?")
    page.click("#ask")
    evidence = page.locator(".final .evidence")
    expect(evidence).to_contain_text("West")
    assert "4961.88" in evidence.inner_text() and evidence.inner_text().endswith("from cell 1")
    page.evaluate("scrollTo(0, document.documentElement.scrollHeight)")
    evidence.locator("a").click()
    expect(page.locator(".turn").first).to_be_in_viewport()


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (375, 740)])
def test_the_ask_page_fits_a_laptop_and_a_phone(server, browser, examples_dir, width, height):
    base, _ = server
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(f"{base}/?token={TOKEN}")
    page.wait_for_selector("#model option", state="attached")
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    expect(page.locator("#files-info")).to_contain_text("sales.csv")
    for control in ("#upload", "#model", "#question", "#ask", "#welcome .example"):
        box = page.locator(control).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, control
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing to scroll sideways
    screenshot(page, f"ask-{width}")
    context.close()


def test_the_model_text_shows_as_it_is_written(page, examples_dir):
    page.set_input_files("#upload", str(examples_dir / "sales.csv"))
    page.select_option("#model", index=5)  # a model that takes 4 s to write each turn
    page.fill("#question", "What is six times seven?")
    page.click("#ask")
    expect(page.locator(".draft")).to_contain_text("I multiply.")  # before the turn is whole
    assert page.locator(".turn").count() == 0
    expect(page.locator(".final")).to_contain_text("42 — from cell 1", timeout=30_000)
    assert page.locator(".draft").count() == 0 and page.locator(".output").inner_text().strip() == "42"
