"""Kept trajectories written for other trainers: token examples, LLaMA-Factory, TRL and verl; and as notebooks.

Every training view leaves out the sampling guidance (``Trajectory.guidance``) unless asked to keep it:
the model must learn to act without the hint. The examples and TRL's records hold the same conversation,
so TRL tokenizes them to the same ids; LLaMA-Factory's rows stop at the agent's last turn, as it requires.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from datalyst.agent import Trajectory, to_messages, to_notebook, training_example
from datalyst.curate._records import Curated
from datalyst.errors import ConfigError
from datalyst.files import write_atomic
from datalyst.llm import ChatTokenizer, Role, wire_messages

SHAREGPT_FROM = {Role.SYSTEM: "system", Role.USER: "human", Role.ASSISTANT: "gpt"}
"""LLaMA-Factory's default sharegpt tags; observations go in as ``human`` turns, so they are never trained on."""


class Exported(BaseModel):
    """What an export wrote: its files or folders and how many records they hold."""

    format: str
    paths: list[Path]
    records: int


def export_examples(
    curated: Sequence[Curated],
    out: str | Path,
    tokenizer: ChatTokenizer,
    *,
    guidance: bool = False,
    failed_turns: bool = False,
) -> Exported:
    """``out/examples.jsonl``: one ``TrainingExample`` (trajectory id, token ids, loss mask) per trajectory.

    Turns whose cell failed are in each example's context but out of its loss unless ``failed_turns``.
    """
    lines = [
        training_example(_trainable(record), tokenizer, guidance=guidance, failed_turns=failed_turns).model_dump_json()
        + "\n"
        for record in curated
    ]
    path = Path(out) / "examples.jsonl"
    write_atomic(path, "".join(lines))
    return Exported(format="examples", paths=[path], records=len(lines))


def export_sharegpt(
    curated: Sequence[Curated], out: str | Path, *, name: str = "datalyst", guidance: bool = False
) -> Exported:
    """``out/sharegpt.jsonl`` in LLaMA-Factory's sharegpt format, and its entry ``name`` in ``out/dataset_info.json``.

    Each row has ``conversations`` (``from``/``value``: the task and every observation as ``human``, the
    agent's turns as ``gpt``), ``system`` and ``id``. Point LLaMA-Factory's ``dataset_dir`` at ``out`` and
    set ``dataset: name``; entries for other datasets already in ``dataset_info.json`` are kept.
    """
    rows = []
    for record in curated:
        system, *rest = to_messages(_trainable(record), guidance=guidance)
        if rest[-1].is_environment:  # an observation no turn answered: LLaMA-Factory skips a row ending so
            rest.pop()
        conversation = [{"from": SHAREGPT_FROM[message.role], "value": message.content} for message in rest]
        rows.append({"id": record.id, "conversations": conversation, "system": system.content})
    folder = Path(out)
    data = folder / "sharegpt.jsonl"
    write_atomic(data, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    info_path = folder / "dataset_info.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    info[name] = {
        "file_name": data.name,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system"},
    }
    write_atomic(info_path, json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    return Exported(format="sharegpt", paths=[data, info_path], records=len(rows))


def export_trl(curated: Sequence[Curated], out: str | Path, *, guidance: bool = False) -> Exported:
    """``out/trl``: a Hugging Face ``datasets`` folder (``save_to_disk``) of conversational records for TRL.

    Each row has ``id`` and ``messages`` (``role``/``content``, system first), the conversational
    language-modeling format ``SFTTrainer`` reads; ``assistant_only_loss=True`` trains on the agent's turns only.
    """
    try:
        import datasets  # imported here: an optional dependency (datalyst[train]), slow to import
    except ModuleNotFoundError:
        raise ConfigError(
            "the trl export needs the datasets package; install it with pip install 'datalyst[train]'"
        ) from None
    rows = [{"id": r.id, "messages": wire_messages(to_messages(_trainable(r), guidance=guidance))} for r in curated]
    path = Path(out) / "trl"
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return Exported(format="trl", paths=[path], records=len(rows))


def export_verl(
    curated: Sequence[Curated],
    out: str | Path,
    *,
    split: str = "train",
    agent_name: str = "datalyst_agent",
    guidance: bool = False,
) -> Exported:
    """``out/verl/<split>.parquet``: one row per task and dialect, in the layout verl 0.9's ``RLHFDataset`` and
    multi-turn agent loop read (as verl's ``examples/data_preprocess/gsm8k_tool_agent_loop.py`` writes it).

    Columns: ``prompt`` (the system prompt and the task message, the chat an agent loop starts from),
    ``data_source`` (the task's source), ``ability``, ``reward_model`` (``style`` ``rule`` and
    ``ground_truth``: the task's answer as JSON text, a string too), ``agent_name`` (the registered agent
    loop to run), and ``extra_info``: ``index`` and ``split`` as verl expects, plus what a datalyst agent loop
    needs to run and judge the task (``task_id``, ``question``, ``format``, ``judge``, ``constraints``,
    ``subcategory``, ``answer_sql``, ``files``, ``dialect``)
    and the ids of the kept trajectories the row stands for.
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for record in curated:
        trajectory, task = record.trajectory, record.trajectory.task
        key = (task.id, trajectory.dialect)
        if key in rows:
            rows[key]["extra_info"]["trajectory_ids"].append(record.id)
            continue
        rows[key] = {
            "data_source": task.source or "datalyst",
            "agent_name": agent_name,
            "prompt": wire_messages(to_messages(trajectory, guidance=guidance)[:2]),
            "ability": "data_analysis",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(task.answer, ensure_ascii=False)},
            "extra_info": {
                "index": len(rows),
                "split": split,
                "task_id": task.id,
                "question": task.question,
                "format": task.format,
                "judge": task.judge,
                "constraints": task.constraints,
                "subcategory": task.subcategory,
                "answer_sql": task.answer_sql,
                "files": task.files,
                "dialect": trajectory.dialect,
                "trajectory_ids": [record.id],
            },
        }
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(list(rows.values())), sink)
    path = Path(out) / "verl" / f"{split}.parquet"
    write_atomic(path, sink.getvalue().to_pybytes())
    return Exported(format="verl", paths=[path], records=len(rows))


def _trainable(record: Curated) -> Trajectory:
    """The record's trajectory; ConfigError when the agent never took a turn (nothing to train on)."""
    if not record.trajectory.turns:
        raise ConfigError(
            f"kept trajectory {record.id} has no agent turn to train on; remove it from the kept records "
            "before exporting"
        )
    return record.trajectory


def export_notebooks(curated: Sequence[Curated], out: str | Path, *, guidance: bool = False) -> Exported:
    """``out/notebooks/<id>/<id>.ipynb``: each trajectory as an executed notebook, its data files beside it, so
    the folder can be opened in Jupyter or mined (``datalyst synth notebooks``). ``guidance`` has no effect: a
    notebook shows the task, not the sampling prompt."""
    import nbformat  # slow to import; only this export needs it

    folder = Path(out) / "notebooks"
    for record in curated:
        name = record.id.replace("#", "-").replace("/", "_")
        target = folder / name
        target.mkdir(parents=True, exist_ok=True)
        write_atomic(target / f"{name}.ipynb", nbformat.writes(to_notebook(record.trajectory)))
        for data in map(Path, record.trajectory.task.files):
            if data.is_file() and not (target / data.name).exists():
                shutil.copy2(data, target / data.name)
    return Exported(format="notebooks", paths=[folder], records=len(curated))
