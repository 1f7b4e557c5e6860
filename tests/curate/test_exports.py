"""Exports round-trip: each format read back with its trainer's loader where it installs, compared with the source."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datalyst.agent import Agent, AgentConfig, Termination, TrainingExample, Trajectory, to_messages, training_example
from datalyst.curate import (
    Curated,
    Stratum,
    export_examples,
    export_notebooks,
    export_sharegpt,
    export_trl,
    export_verl,
)
from datalyst.errors import ConfigError
from datalyst.llm import ReplayModel, load_tokenizer
from datalyst.tasks import Task

HINT = "Hint: count the distinct values of the column."
COUNT = "import pandas as pd\nprint(pd.read_csv('sales.csv')['region'].nunique())"


def code(source: str) -> str:
    return f"<think>Run it.</think>\n<code>\n```python\n{source}\n```\n</code>"


def run(task: Task, outputs: list[str], *, trial: int = 0, dialect: str = "datamind", hint: str = "") -> Trajectory:
    config = AgentConfig(dialect=dialect, max_turns=len(outputs))
    agent = Agent(ReplayModel(outputs, per_turn=True), config, guidance=lambda t: hint)
    return asyncio.run(agent.arun(task, trial=trial))


@pytest.fixture(scope="module")
def curated(examples_dir) -> list[Curated]:
    """Two guided trials of one task (one fixes an error), and an unguided one in another dialect out of turns."""
    files = [str(examples_dir / "sales.csv")]
    regions = Task(id="regions", question="How many regions are there?", format="@regions[n]", files=files, answer=4)
    total = Task(id="total", question="Total revenue by region?", files=files, answer={"north": 1.5, "south": 2})
    answer = "<think>Four.</think>\n<answer>@regions[4]</answer>"
    trajectories = [
        (run(regions, [code(COUNT), answer], hint=HINT), Stratum.SUCCESS),
        (run(regions, [code("1/0"), code(COUNT), answer], trial=1, hint=HINT), Stratum.ERROR_CORRECTION),
        (run(total, ["Hmm.", "Thought: look.\nAction:\n```python\nprint(1)\n```"], dialect="jupiter"),
         Stratum.PERSISTENT_FAILURE),
    ]  # fmt: skip
    assert trajectories[2][0].termination == Termination.MAX_TURNS and trajectories[2][0].turns[0].is_void
    assert HINT in trajectories[0][0].first_message
    return [
        Curated(id=t.id, trajectory=t, selected_by="ground_truth", stratum=stratum, overthinking=0.1 * i)
        for i, (t, stratum) in enumerate(trajectories)
    ]


def chat(record: Curated, *, guidance: bool = False) -> list[tuple[str, str]]:
    """The source conversation as (role, text)."""
    return [(m.role.value, m.content) for m in to_messages(record.trajectory, guidance=guidance)]


def up_to_last_turn(messages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Without a last observation that no turn answered (LLaMA-Factory's rows end with the agent)."""
    return messages[:-1] if messages[-1][0] == "user" else messages


def test_the_source_conversations_are_as_the_tests_expect(curated):
    chats = [chat(record) for record in curated]
    assert [role for role, _ in chats[2]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert all(HINT not in text for messages in chats for _, text in messages)
    assert chats[0][1][1] == curated[0].trajectory.task_message


@pytest.mark.model
def test_examples_are_the_training_examples_of_the_trajectories(curated, tmp_path):
    tokenizer = load_tokenizer("embedded:small")
    exported = export_examples(curated, tmp_path, tokenizer)
    lines = exported.paths[0].read_text().splitlines()
    read = [TrainingExample.model_validate_json(line) for line in lines]
    assert exported.records == 3 and [e.trajectory_id for e in read] == [r.id for r in curated]
    assert read == [training_example(r.trajectory, tokenizer) for r in curated]
    assert HINT not in tokenizer.decode(read[0].input_ids)
    kept = export_examples(curated[:1], tmp_path / "kept", tokenizer, guidance=True)
    assert HINT in tokenizer.decode(TrainingExample.model_validate_json(kept.paths[0].read_text()).input_ids)


def test_sharegpt_rows_follow_llama_factorys_documented_schema(curated, tmp_path):
    (tmp_path / "dataset_info.json").write_text(json.dumps({"other": {"file_name": "other.json"}}))
    exported = export_sharegpt(curated, tmp_path, name="kept")
    data, info_path = exported.paths
    info = json.loads(info_path.read_text())
    assert info["other"] == {"file_name": "other.json"}
    entry = info["kept"]
    assert entry["formatting"] == "sharegpt" and (tmp_path / entry["file_name"]) == data
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert [row["id"] for row in rows] == [record.id for record in curated]
    for row, record in zip(rows, curated, strict=True):
        assert set(entry["columns"].values()) <= set(row)
        conversation = row[entry["columns"]["messages"]]
        # human (task, observations) in odd places, gpt (trained on) in even ones, an even count
        assert [m["from"] for m in conversation] == ["human", "gpt"] * (len(conversation) // 2)
        roles = {"human": "user", "gpt": "assistant"}
        messages = [("system", row["system"])] + [(roles[m["from"]], m["value"]) for m in conversation]
        assert messages == up_to_last_turn(chat(record))


def test_sharegpt_loads_as_llama_factory_loads_its_json_files(curated, tmp_path):
    datasets = pytest.importorskip("datasets")
    data, _ = export_sharegpt(curated, tmp_path).paths
    loaded = datasets.load_dataset("json", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    assert loaded["id"] == [record.id for record in curated]
    assert loaded[2]["conversations"][-1] == {"from": "gpt", "value": curated[2].trajectory.turns[-1].text}


def test_llama_factorys_own_converter_reads_the_sharegpt_export(curated, tmp_path):
    """Runs only where llamafactory is installed (it needs its own torch); the schema test above runs everywhere."""
    pytest.importorskip("llamafactory")
    from llamafactory.data.converter import get_dataset_converter
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.hparams import DataArguments

    export_sharegpt(curated, tmp_path, name="kept")
    data_args = DataArguments(dataset_dir=str(tmp_path))
    (attr,) = get_dataset_list(["kept"], str(tmp_path))
    converter = get_dataset_converter(attr.formatting, attr, data_args)
    rows = [json.loads(line) for line in (tmp_path / attr.dataset_name).read_text().splitlines()]
    for row, record in zip(rows, curated, strict=True):
        aligned = converter(row)
        messages = [("system", aligned["_system"])]
        messages += [(m["role"], m["content"]) for m in aligned["_prompt"] + aligned["_response"]]
        assert messages == up_to_last_turn(chat(record))


def test_trl_dataset_holds_the_conversations(curated, tmp_path):
    datasets = pytest.importorskip("datasets")
    exported = export_trl(curated, tmp_path)
    loaded = datasets.load_from_disk(str(exported.paths[0]))
    assert loaded["id"] == [record.id for record in curated]
    for row, record in zip(loaded, curated, strict=True):
        assert [(m["role"], m["content"]) for m in row["messages"]] == chat(record)


def test_the_trl_export_without_datasets_says_how_to_install_it(curated, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ConfigError, match=r"pip install 'datalyst\[train\]'"):
        export_trl(curated, tmp_path)


@pytest.mark.model
@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers' notice on an argument SFTConfig passes
def test_trls_sft_preparation_gives_our_ids_and_trains_on_the_agents_turns(curated, tmp_path):
    """SFTTrainer tokenizes the exported records as our training examples do; its mask adds only newlines."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from datalyst.llm import ensure_model

    tokenizer = load_tokenizer(f"hf:{ensure_model('small')}")
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer.tokenizer), hidden_size=8, intermediate_size=16, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1,
    )  # fmt: skip
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "out"), assistant_only_loss=True, max_length=None, use_cpu=True, bf16=False,
        report_to="none",
    )  # fmt: skip
    dataset = datasets.load_from_disk(str(export_trl(curated, tmp_path).paths[0]))
    trainer = trl.SFTTrainer(
        model=transformers.Qwen2ForCausalLM(config),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer.tokenizer,
    )
    for row, record in zip(trainer.train_dataset, curated, strict=True):
        ours = training_example(record.trajectory, tokenizer, failed_turns=True)  # TRL trains every turn
        assert row["input_ids"] == ours.input_ids
        theirs = [int(label != -100) for label in row["labels"]]
        assert all(t >= o for t, o in zip(theirs, ours.loss_mask, strict=True))
        extra = [token for token, t, o in zip(ours.input_ids, theirs, ours.loss_mask, strict=True) if t > o]
        assert tokenizer.decode(extra).strip() == ""


def verl_rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_verl_has_one_row_per_task_with_its_opening_prompt_and_answer(curated, tmp_path):
    exported = export_verl(curated, tmp_path, split="test", agent_name="datalyst_agent")
    assert exported.paths[0] == tmp_path / "verl" / "test.parquet" and exported.records == 2
    regions, total = verl_rows(exported.paths[0])
    first = curated[0].trajectory
    assert [(m["role"], m["content"]) for m in regions["prompt"]] == chat(curated[0])[:2]
    assert HINT not in regions["prompt"][1]["content"] and regions["prompt"][0]["content"] == first.system_prompt
    assert regions["reward_model"] == {"style": "rule", "ground_truth": "4"}
    assert json.loads(total["reward_model"]["ground_truth"]) == {"north": 1.5, "south": 2}
    assert regions["agent_name"] == "datalyst_agent" and regions["ability"] == "data_analysis"
    assert regions["extra_info"] | {"question": None} == {
        "index": 0, "split": "test", "task_id": "regions", "question": None, "format": "@regions[n]", "judge": "rule",
        "constraints": "", "subcategory": None, "answer_sql": None,
        "files": first.task.files, "dialect": "datamind", "trajectory_ids": ["regions#0", "regions#1"],
    }  # fmt: skip
    assert total["extra_info"]["index"] == 1 and total["extra_info"]["dialect"] == "jupiter"


def test_verl_keeps_a_string_answer_that_looks_like_json_a_string(curated, tmp_path):
    trajectory = curated[0].trajectory
    task = trajectory.task.model_copy(update={"answer": "42"})
    record = curated[0].model_copy(update={"trajectory": trajectory.model_copy(update={"task": task})})
    (row,) = verl_rows(export_verl([record], tmp_path).paths[0])
    assert json.loads(row["reward_model"]["ground_truth"]) == "42"


def test_verl_rows_read_back_as_its_rl_dataset_reads_them(curated, tmp_path):
    """verl's RLHFDataset loads the parquet with ``datasets`` and takes ``index`` from ``extra_info``."""
    datasets = pytest.importorskip("datasets")
    path = export_verl(curated, tmp_path).paths[0]
    frame = datasets.load_dataset("parquet", data_files=str(path), cache_dir=str(tmp_path / "cache"))["train"]
    assert frame.column_names == ["data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info"]
    assert [row["extra_info"]["index"] for row in frame] == [0, 1]
    assert frame[1]["prompt"] == [{"role": r, "content": c} for r, c in chat(curated[2])[:2]]


@pytest.mark.model
def test_verls_own_rl_dataset_reads_the_parquet(curated, tmp_path):
    """Runs only where verl is installed (it needs its own torch); the test above reads it as verl does, everywhere."""
    pytest.importorskip("verl")
    omegaconf = pytest.importorskip("omegaconf")
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from datalyst.llm import ensure_model

    tokenizer = load_tokenizer(f"hf:{ensure_model('small')}").tokenizer
    config = {"cache_dir": str(tmp_path / "cache"), "max_prompt_length": 4096, "filter_overlong_prompts_workers": 1}
    path = export_verl(curated, tmp_path).paths[0]
    dataset = RLHFDataset(str(path), tokenizer, omegaconf.OmegaConf.create(config))
    assert len(dataset) == 2  # neither prompt was filtered out as too long
    for index, record in enumerate([curated[0], curated[2]]):
        item = dataset[index]
        assert item["raw_prompt"] == [{"role": r, "content": c} for r, c in chat(record)[:2]]
        assert item["index"] == index and item["agent_name"] == "datalyst_agent"
        assert item["extra_info"]["task_id"] == record.trajectory.task.id


def test_every_view_keeps_the_guidance_when_asked(curated, tmp_path):
    data, _ = export_sharegpt(curated[:1], tmp_path, guidance=True).paths
    assert HINT in json.loads(data.read_text())["conversations"][0]["value"]
    (row,) = verl_rows(export_verl(curated[:1], tmp_path, guidance=True).paths[0])
    assert HINT in row["prompt"][1]["content"]


def test_a_trajectory_without_an_agent_turn_is_refused(curated, tmp_path):
    empty = curated[0].trajectory.model_copy(update={"turns": [], "termination": Termination.FAILED})
    record = curated[0].model_copy(update={"trajectory": empty})
    with pytest.raises(ConfigError, match="regions#0 has no agent turn"):
        export_sharegpt([record], tmp_path)


def test_notebooks_open_in_nbformat_beside_their_data(curated, tmp_path):
    import nbformat

    exported = export_notebooks(curated, tmp_path)
    [folder] = exported.paths
    assert exported.records == 3 and sorted(p.name for p in folder.iterdir()) == ["regions-0", "regions-1", "total-0"]
    notebook = nbformat.read(folder / "regions-1" / "regions-1.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.source for cell in code] == ["1/0", COUNT] and code[1].outputs[0]["text"] == "4\n"
    assert (folder / "regions-1" / "sales.csv").read_bytes() == Path(curated[0].trajectory.task.files[0]).read_bytes()
