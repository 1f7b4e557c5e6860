"""The Runs and Data endpoints on real evaluation runs, tasks files and curation runs."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient
from web_helpers import NO_ANSWER, ORIGIN, RIGHT_FOR_Q0, eval_run, headers, serve_config

from datalyst.curate import RunFolder
from datalyst.eval import compare_runs
from datalyst.web import create_app


@pytest.fixture(scope="module")
def runs(tmp_path_factory, dabench_tables):
    root = tmp_path_factory.mktemp("runs")
    eval_run(root / "eval" / "good", RIGHT_FOR_Q0)
    eval_run(root / "eval" / "silent", NO_ANSWER)
    return root


@pytest.fixture
def client(tmp_path, runs):
    with TestClient(create_app(serve_config(tmp_path, runs=runs, data=[runs])), base_url=ORIGIN) as client:
        yield client


def get(client, path, **params):
    reply = client.get(path, headers=headers(), params=params)
    return reply.json() if reply.headers["content-type"].startswith("application/json") else reply


def test_runs_are_listed_with_their_headline_figures(client):
    listed = {run["id"]: run for run in get(client, "/api/runs")}
    assert set(listed) == {"eval/good", "eval/silent"}
    good = listed["eval/good"]
    assert good["bench"] == "tasks" and good["strategy"] == "react" and good["n_tasks"] == 3
    assert good["dialects"] == {"datamind": pytest.approx(1 / 3)} and listed["eval/silent"]["dialects"]["datamind"] == 0


def test_a_run_shows_its_report_chart_and_filtered_trajectories(client):
    report = get(client, "/api/runs/report", run="eval/good")
    assert report["n_tasks"] == 3 and report["dialects"][0]["rates"]["pass_at_1"]["value"] == pytest.approx(1 / 3)
    assert get(client, "/api/runs/chart", run="eval/good").headers["content-type"] == "image/png"
    rows = get(client, "/api/runs/rows", run="eval/good")
    assert rows["total"] == rows["matching"] == 6 and rows["facets"]["verdict"] == ["malformed", "right"]
    right = get(client, "/api/runs/rows", run="eval/good", verdict="right")
    assert right["matching"] == 2 and {row["answer"] for row in right["rows"]} == {"@mean_fare[34.65]"}
    [level] = {row["level"] for row in right["rows"]}
    assert get(client, "/api/runs/rows", run="eval/good", level=level)["matching"] >= 2
    assert get(client, "/api/runs/rows", run="eval/silent", verdict="unanswered")["matching"] == 6
    # The run answers every question in the first one's format: the others' answers are wrong and malformed.
    wrong = get(client, "/api/runs/rows", run="eval/good", verdict="malformed")["rows"][0]
    page = get(client, "/api/runs/page", run="eval/good", dialect="datamind", id=wrong["id"])
    assert page.status_code == 200 and "@mean_fare[34.65]" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    missing = client.get("/api/runs/page", headers=headers(), params={"run": "eval/good", "dialect": "datamind",
                                                                       "id": "nope#0"})  # fmt: skip
    assert missing.status_code == 404


def test_two_runs_compare_as_eval_compare_does(client, runs):
    compared = get(client, "/api/runs/compare", a="eval/silent", b="eval/good")
    expected = compare_runs(runs / "eval" / "silent", runs / "eval" / "good")
    assert compared["text"] == expected.model_copy(update={"run_a": "eval/silent", "run_b": "eval/good"}).render()
    assert str(runs) not in compared["text"]
    [dialect] = compared["dialects"]
    assert dialect["pass_at_1"]["b"] == pytest.approx(1 / 3) and dialect["pass_at_1"]["a"] == 0
    assert dialect["pass_at_1"]["significant"] == expected.dialects[0].pass_at_1.is_significant


@pytest.mark.parametrize("run", ["../", "..", "/etc", "eval/../../", "eval/good/../../..", "eval", "missing"])
def test_run_names_outside_the_runs_folder_or_not_runs_are_refused(client, run):
    assert client.get("/api/runs/report", headers=headers(), params={"run": run}).status_code == 404


def test_a_server_without_runs_says_so(tmp_path):
    with TestClient(create_app(serve_config(tmp_path)), base_url=ORIGIN) as client:
        assert get(client, "/api/runs") == []
        assert "--runs" in get(client, "/api/runs/report", run="x")["error"]


def test_data_files_are_listed_and_filtered(client, runs):
    files = {(f["name"], f["kind"]) for f in get(client, "/api/data")}
    assert ("eval/good/tasks.jsonl", "tasks") in files and ("eval/good-tasks.jsonl", "tasks") in files
    tasks = get(client, "/api/data/rows", root=0, name="eval/good/tasks.jsonl")
    assert tasks["total"] == 3 and set(tasks["facets"]) == {"category", "level"}
    level = tasks["facets"]["level"][0]
    narrowed = get(client, "/api/data/rows", root=0, name="eval/good/tasks.jsonl", level=level)
    assert 0 < narrowed["matching"] < 3 or tasks["facets"]["level"] == [level]
    assert all(row["level"] == level for row in narrowed["rows"])


def test_a_curation_run_shows_strata_and_drop_reasons(tmp_path, runs):
    trajectories = [
        json.loads(line) for line in (runs / "eval/good/trajectories/datamind.jsonl").read_text().splitlines()
    ]
    run = RunFolder(tmp_path / "curation")
    run.path.mkdir()
    run.samples.write_text("".join(json.dumps(t) + "\n" for t in trajectories))
    kept, dropped = trajectories[0], trajectories[1]
    run.kept.write_text(json.dumps({"id": kept["id"], "trajectory": kept, "selected_by": "ground_truth",
                                    "stratum": "success", "overthinking": 0.1}) + "\n")  # fmt: skip
    run.dropped.write_text(json.dumps({"id": dropped["id"], "stage": "select", "reason": "wrong_answer"}) + "\n")
    with TestClient(create_app(serve_config(tmp_path, data=[tmp_path / "curation"])), base_url=ORIGIN) as client:
        listed = {f["name"]: f["kind"] for f in get(client, "/api/data")}
        assert listed == {"samples.jsonl": "trajectories", "kept.jsonl": "curated"}
        rows = get(client, "/api/data/rows", root=0, name="samples.jsonl")
        assert rows["facets"]["stratum"] == ["success"] and rows["facets"]["reason"] == ["select: wrong_answer"]
        assert get(client, "/api/data/rows", root=0, name="samples.jsonl", stratum="success")["matching"] == 1
        assert get(client, "/api/data/rows", root=0, name="samples.jsonl", reason="select: wrong_answer")["rows"][0][
            "id"] == dropped["id"]  # fmt: skip
        run.dropped.write_text(json.dumps({"id": dropped["id"], "stage": "rules", "reason": "too_long"}) + "\n")
        rows = get(client, "/api/data/rows", root=0, name="samples.jsonl")  # read again: the file changed
        assert rows["facets"]["reason"] == ["rules: too_long"]
        page = get(client, "/api/data/page", root=0, name="kept.jsonl", id=kept["id"])
        assert page.status_code == 200 and "<section>" in page.text
        for params in [{"root": 1, "name": "samples.jsonl"}, {"root": "x", "name": "samples.jsonl"},
                       {"root": 0, "name": "../script.jsonl"}, {"root": 0, "name": "dropped.jsonl"},
                       {"root": 0, "name": "/etc/passwd"}]:  # fmt: skip
            assert client.get("/api/data/rows", headers=headers(), params=params).status_code in (400, 404)
