"""``datalyst synth files`` as a user runs it: the funnel printed, records written, bad options in one line."""

from __future__ import annotations

import pandas as pd

from datalyst.paths import dabench_dir


def test_synth_files_prints_the_funnel_and_writes_records(datalyst, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pd.DataFrame({"item": [f"i{n}" for n in range(25)], "price": range(25)}).to_csv(folder / "a.csv", index=False)
    pd.DataFrame({"item": ["x"], "price": [1]}).to_csv(folder / "tiny.csv", index=False)
    out = tmp_path / "files.jsonl"
    done = datalyst("synth", "files", str(folder), "--out", str(out), "--convert-share", "0")
    assert done.returncode == 0, done.stderr
    assert "kept 1 of 2 files (1 csv; 0 converted)" in done.stderr and "1 too_few_rows" in done.stderr
    if dabench_dir().is_dir():
        assert "decontaminating against" in done.stderr  # DABench's tables by default
    else:
        assert "no benchmark found under" in done.stderr
    assert len(out.read_text().splitlines()) == 1


def test_synth_files_user_errors_are_one_line(datalyst, tmp_path):
    bad = datalyst("synth", "files", str(tmp_path), "--out", str(tmp_path / "f.jsonl"), "--convert-share", "2")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --convert-share:") and "Traceback" not in bad.stderr
    missing = datalyst("synth", "files", str(tmp_path / "nowhere"), "--out", str(tmp_path / "f.jsonl"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_synth_templates_writes_verified_tasks_and_counts_them(datalyst, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pd.DataFrame(
        {
            "city": [f"c{n}" for n in range(30)],
            "zone": ["a", "b", "c"] * 10,
            "rent": [900 + 37 * (n % 11) for n in range(30)],
            "size": [40 + 3 * (n % 7) for n in range(30)],
        }
    ).to_csv(folder / "rents.csv", index=False)
    files = tmp_path / "files.jsonl"
    assert datalyst("synth", "files", str(folder), "--out", str(files), "--convert-share", "0").returncode == 0
    tasks = tmp_path / "tasks.jsonl"
    done = datalyst("synth", "templates", str(files), "--out", str(tasks))
    assert done.returncode == 0, done.stderr
    count = len(tasks.read_text().splitlines())
    assert count > 10 and f"{count} tasks from 1 of 1 tables" in done.stderr
    assert "categories: " in done.stderr and "levels: " in done.stderr


def test_synth_show_samples_each_category_as_text_or_a_page(datalyst, tmp_path):
    from datalyst.tasks import Task, write_tasks

    tasks = [
        Task(id=f"t{n}", question=f"Question {n}?", format="@x[value] where value is a count.", answer={"x": str(n)},
             category=["Counting", "Ranking"][n % 2], level="easy", files=["/data/sales.csv"])
        for n in range(6)
    ]  # fmt: skip
    path = tmp_path / "tasks.jsonl"
    write_tasks(tasks, path)
    text = datalyst("synth", "show", str(path), "--per-category", "1")
    assert text.returncode == 0, text.stderr
    assert "Counting (1)" in text.stdout and "Ranking (1)" in text.stdout
    assert "@x[value] where value is a count." in text.stdout  # brackets are not taken for markup
    page = tmp_path / "show.html"
    assert datalyst("synth", "show", str(path), "--html", str(page)).returncode == 0
    assert page.read_text().count('class="task"') == 4 and "sales.csv" in page.read_text()


def test_synth_sql_makes_execution_judged_tasks(datalyst, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pd.DataFrame(
        {
            "shop": [f"s{n}" for n in range(30)],
            "city": ["Oslo", "Bergen", "Tromso"] * 10,
            "revenue": [100 + 13 * (n % 9) for n in range(30)],
        }
    ).to_csv(folder / "shops.csv", index=False)
    files = tmp_path / "files.jsonl"
    assert datalyst("synth", "files", str(folder), "--out", str(files)).returncode == 0
    out = tmp_path / "sql.jsonl"
    done = datalyst("synth", "sql", str(files), "--out", str(out), "--split-share", "1")
    assert done.returncode == 0, done.stderr
    assert "tasks from 1 of 1 tables" in done.stderr and '"judge":"sql"' in out.read_text()
    bad = datalyst("synth", "sql", str(files), "--out", str(out), "--split-share", "3")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --split-share:")


def test_synth_queries_and_datasets_run_from_the_command_line(datalyst, replay_spec, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    pd.DataFrame({"team": [f"t{i}" for i in range(30)], "wins": range(30)}).to_csv(folder / "a.csv", index=False)
    files = tmp_path / "files.jsonl"
    assert datalyst("synth", "files", str(folder), "--out", str(files)).returncode == 0
    replies = [
        "Question: What is the median of wins?",
        "Question: What is the median of wins?\nConstraints: none.\nFormat: @median_wins[value] where value is it.",
    ]
    queries = tmp_path / "queries.jsonl"
    done = datalyst("synth", "queries", str(files), "--out", str(queries), "--model", replay_spec(replies),
                    "--categories-per-table", "1", "--rounds", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 tasks from 1 of 1 tables" in done.stderr
    datasets = tmp_path / "datasets.jsonl"
    done = datalyst("synth", "datasets", "--out", str(datasets), "--per-family", "1")
    assert done.returncode == 0, done.stderr
    assert "of 10 datasets" in done.stderr and len(datasets.read_text().splitlines()) >= 8
    bad = datalyst("synth", "queries", str(files), "--out", str(queries), "--rounds", "9")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --rounds:")


def test_synth_notebooks_prints_its_funnel(datalyst, replay_spec, tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    folder = tmp_path / "notebooks" / "repo"
    folder.mkdir(parents=True)
    cell = new_code_cell("import pandas as pd\ndf = pd.read_csv('data.csv')", execution_count=1)
    nbformat.write(new_notebook(cells=[cell]), folder / "short.ipynb")
    done = datalyst("synth", "notebooks", str(tmp_path / "notebooks"), "--out", str(tmp_path / "mined.jsonl"),
                    "--model", replay_spec([]), "--map", "owner/repo=" + str(folder))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 notebooks: dropped short_code 1; 0 over the caps; 0 mined" in done.stderr
    bad = datalyst("synth", "notebooks", str(folder), "--out", str(tmp_path / "x.jsonl"), "--model", replay_spec([]),
                   "--map", "not-a-mapping")  # fmt: skip
    assert bad.returncode != 0 and "--map 'not-a-mapping'" in bad.stderr and "Traceback" not in bad.stderr
