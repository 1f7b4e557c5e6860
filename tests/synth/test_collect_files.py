"""``synth files``: which tables are kept and why the others are not, conversion, decontamination, resuming."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from datalyst.data import FileKind, load_table
from datalyst.errors import ConfigError
from datalyst.synth import FileOptions, benchmark_fingerprints, collect_files, read_source_files
from datalyst.synth._fingerprint import fingerprint
from datalyst.tasks import Task

STAY = FileOptions(convert_share=0)


def table(rows: int = 30, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "city": [f"town {i}" for i in range(rows)],
            "population": rng.integers(1_000, 90_000, rows),
            "area_km2": rng.uniform(5, 300, rows).round(2),
            "founded": rng.integers(1200, 1950, rows),
            "coastal": rng.choice(["yes", "no"], rows),
            "mayor": [f"person {i % 7}" for i in range(rows)],
        }
    )


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "topic").mkdir(parents=True)
    (folder / "SOURCE.md").write_text("Made by the test; CC0.")
    table().to_csv(folder / "topic" / "good.csv", index=False)
    table().to_csv(folder / "topic" / "same_as_good.tsv", sep="\t", index=False)
    table(seed=1).to_excel(folder / "sheet.xlsx", index=False)
    table(rows=5, seed=2).to_csv(folder / "short.csv", index=False)
    table(rows=1500, seed=3).to_csv(folder / "long.csv", index=False)
    pd.DataFrame({f"c{i}": range(30) for i in range(60)}).to_csv(folder / "wide.csv", index=False)
    pd.DataFrame({"name": [f"n{i}" for i in range(30)], "kind": ["a"] * 30}).to_csv(folder / "words.csv", index=False)
    sparse = table(seed=4).astype(object)
    sparse.iloc[:, 1:] = None
    sparse.to_csv(folder / "sparse.csv", index=False)
    table(seed=5).to_csv(folder / "headless.csv", index=False, header=False)
    (folder / "broken.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    (folder / "notes.md").write_text("not data")
    (folder / ".hidden").mkdir()
    table(seed=6).to_csv(folder / ".hidden" / "secret.csv", index=False)
    return folder


def test_each_file_is_kept_or_dropped_with_a_stable_reason(corpus, tmp_path):
    out = tmp_path / "files.jsonl"
    funnel = collect_files([corpus], out, options=STAY, progress=False)
    kept = {record.found_at.removeprefix(f"{corpus}/"): record for record in read_source_files(out)}
    assert sorted(kept) == ["sheet.xlsx", "topic/good.csv"]
    rejected = {json.loads(line)["id"].removeprefix(f"{corpus}/"): json.loads(line)["reason"]
                for line in out.with_name("files.jsonl.rejected.jsonl").read_text().splitlines()}  # fmt: skip
    assert rejected == {
        "broken.xlsx": "unreadable",
        "headless.csv": "unnamed_columns",
        "long.csv": "too_many_rows",
        "short.csv": "too_few_rows",
        "sparse.csv": "mostly_missing",
        "topic/same_as_good.tsv": "duplicate",
        "wide.csv": "too_many_columns",
        "words.csv": "no_numeric_column",
    }
    assert funnel.files == 10 and funnel.kept == 2 and funnel.kept_by_kind == {"csv": 1, "xlsx": 1}
    assert funnel.dropped_by_reason["duplicate"] == 1
    good = kept["topic/good.csv"]
    assert (good.rows, good.columns, good.table, good.kind) == (30, 6, "good", FileKind.CSV)
    assert good.licence == str(corpus) and good.id == good.content_hash[:16]
    assert [column.name for column in good.info.tables[0].columns][:2] == ["city", "population"]
    manifest = json.loads(out.with_name("files.jsonl.manifest.json").read_text())
    assert manifest["funnel"] == funnel.model_dump() and manifest["options"]["convert_share"] == 0


def test_snapshots_of_one_dataset_are_kept_up_to_the_schema_cap(tmp_path):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for day in range(4):
        table(seed=10 + day).to_csv(folder / f"forecast-{day}.csv", index=False)
    table(seed=20).rename(columns={"mayor": "governor"}).to_csv(folder / "other.csv", index=False)
    out = tmp_path / "files.jsonl"
    funnel = collect_files([folder], out, options=FileOptions(convert_share=0, max_per_schema=2), progress=False)
    kept = sorted(record.found_at.rsplit("/", 1)[1] for record in read_source_files(out))
    assert kept == ["forecast-0.csv", "forecast-1.csv", "other.csv"]
    assert funnel.dropped_by_reason == {"same_schema": 2}
    rejected = [json.loads(line) for line in (tmp_path / "files.jsonl.rejected.jsonl").read_text().splitlines()]
    assert {r["detail"] for r in rejected} == {"2 tables with its columns are kept"}


def test_converted_tables_keep_their_content_in_xlsx_and_sqlite(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for seed in range(8):
        table(seed=seed).to_csv(folder / f"t{seed}.csv", index=False)
    out = tmp_path / "files.jsonl"
    funnel = collect_files([folder], out, options=FileOptions(convert_share=1.0, max_per_schema=8), progress=False)
    records = read_source_files(out)
    assert funnel.converted == 8 and {r.kind for r in records} == {FileKind.XLSX, FileKind.SQLITE}
    for record in records:
        assert record.path.startswith(str(tmp_path / "files.jsonl.converted"))
        assert fingerprint(load_table(record.path, record.table)).content_hash == record.content_hash
        assert fingerprint(load_table(record.found_at)).content_hash == record.content_hash


def test_benchmark_tables_and_their_lookalikes_are_dropped(tmp_path):
    bench_dir, folder = tmp_path / "bench", tmp_path / "corpus"
    bench_dir.mkdir()
    folder.mkdir()
    benchmark = table(rows=80, seed=9)
    benchmark.to_csv(bench_dir / "bench.csv", index=False)
    benchmark[list(reversed(benchmark.columns))].to_excel(folder / "reordered.xlsx", index=False)  # same table
    benchmark.drop(columns=["mayor"]).head(50).to_csv(folder / "trimmed.csv", index=False)  # 5 of 6 columns, 50 rows
    table(rows=80, seed=10).to_csv(folder / "unrelated.csv", index=False)  # same columns, other rows
    prints = benchmark_fingerprints([Task(id="b1", question="?", files=[str(bench_dir / "bench.csv")])])
    out = tmp_path / "files.jsonl"
    funnel = collect_files([folder], out, options=STAY, benchmarks=prints, progress=False)
    assert funnel.dropped_by_reason == {"benchmark_table": 1, "benchmark_lookalike": 1}
    assert [record.found_at for record in read_source_files(out)] == [str(folder / "unrelated.csv")]


def test_a_rerun_resumes_and_refuses_other_options(corpus, tmp_path):
    out = tmp_path / "files.jsonl"
    collect_files([corpus], out, options=STAY, progress=False)
    before = out.read_text()
    table(seed=11).to_csv(corpus / "new.csv", index=False)
    funnel = collect_files([corpus], out, options=STAY, progress=False)
    assert out.read_text().startswith(before) and len(out.read_text().splitlines()) == 3
    assert funnel.files == 11 and funnel.kept == 3
    with pytest.raises(ConfigError, match="max_rows 1000 \\(now 10\\)"):
        collect_files([corpus], out, options=FileOptions(convert_share=0, max_rows=10), progress=False)


def test_two_runs_write_the_same_records(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for seed in range(6):
        table(seed=seed).to_csv(folder / f"t{seed}.csv", index=False)
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name / "files.jsonl"
        collect_files([folder], out, options=FileOptions(convert_share=0.5, seed=3), converted_dir=tmp_path / "conv",
                      progress=False)  # fmt: skip
        # a workbook records when it was written; the compressed time stamp changes its hash and size
        written_at = {"file_hash": True, "info": {"size_bytes"}}
        runs.append([r.model_dump(exclude=written_at if r.kind is FileKind.XLSX else None) for r in
                     read_source_files(out)])  # fmt: skip
    assert runs[0] == runs[1]


def test_a_missing_root_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        collect_files([tmp_path / "nowhere"], tmp_path / "files.jsonl", progress=False)


def test_records_name_files_by_absolute_paths_when_out_is_relative(tmp_path, monkeypatch):
    folder = tmp_path / "many"
    folder.mkdir()
    table().to_csv(folder / "t.csv", index=False)
    monkeypatch.chdir(tmp_path)
    collect_files(["many"], "files.jsonl", options=FileOptions(convert_share=1.0, max_per_schema=8), progress=False)
    [record] = read_source_files(tmp_path / "files.jsonl")
    assert record.path.startswith(str(tmp_path / "files.jsonl.converted")) and record.found_at == str(folder / "t.csv")
