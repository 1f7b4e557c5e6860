"""Model specs: parsing, writing back, errors that list the accepted forms, and where the default comes from."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from datalyst.errors import ConfigError
from datalyst.llm._spec import ModelKind, ModelSpec, resolve_spec

SETTINGS = ("DATALYST_MODEL", "DATALYST_CONFIG", "DATALYST_BASE_URL", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch, tmp_path):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))  # never the user's own config


@pytest.mark.parametrize(
    ("text", "kind", "target", "base_url", "options"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None, {}),
        ("openai:qwen2.5:7b@http://localhost:11434/v1", "openai", "qwen2.5:7b", "http://localhost:11434/v1", {}),
        ("openai:org/model@https://h.example/v1?max_retries=2", "openai", "org/model", "https://h.example/v1",
         {"max_retries": 2}),
        ("gguf:/models/q4.gguf?n_ctx=8192&flash=true&rope=0.5&tag=v1", "gguf", "/models/q4.gguf", None,
         {"n_ctx": 8192, "flash": True, "rope": 0.5, "tag": "v1"}),
        ("gguf:C:\\models\\q4.gguf", "gguf", "C:\\models\\q4.gguf", None, {}),
        ("hf:Qwen/Qwen2.5-0.5B-Instruct", "hf", "Qwen/Qwen2.5-0.5B-Instruct", None, {}),
        ("embedded:small", "embedded", "small", None, {}),
        ("  replay:runs/a.jsonl  ", "replay", "runs/a.jsonl", None, {}),
    ],
)  # fmt: skip
def test_parse_and_write_back(text, kind, target, base_url, options):
    spec = ModelSpec.parse(text)
    assert (spec.kind, spec.target, spec.base_url, spec.options) == (kind, target, base_url, options)
    assert str(spec) == text.strip()
    assert ModelSpec.parse(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpt-4o-mini", "has no known kind"),
        ("ollama:llama3", "has no known kind"),
        ("openai:", "is empty"),
        ("openai:@http://localhost:8000/v1", "contains '@http'"),
        ("gguf:model.gguf?n_ctx", "has no '=value'"),
        ("gguf:model.gguf?n_ctx=1&n_ctx=2", "is repeated"),
        ("gguf:model.gguf?2x=1", "not an identifier"),
    ],
)
def test_malformed_specs_list_the_accepted_forms(text, fragment):
    with pytest.raises(ConfigError, match=fragment) as caught:
        ModelSpec.parse(text)
    message = str(caught.value)
    assert "openai:MODEL[@URL]" in message
    assert "\n" not in message


def test_base_url_only_goes_with_openai():
    with pytest.raises(ValidationError, match="only goes with openai"):
        ModelSpec(kind=ModelKind.GGUF, target="m.gguf", base_url="http://localhost:8000/v1")
    with pytest.raises(ValidationError, match="must start with http"):
        ModelSpec(kind=ModelKind.OPENAI, target="m", base_url="localhost:8000")


def test_check_options_converts_and_rejects():
    spec = ModelSpec.parse("gguf:m.gguf?n_ctx=4096&temperature_floor=1&name=7")
    assert spec.check_options({"n_ctx": int, "temperature_floor": float, "name": str}) == {
        "n_ctx": 4096,
        "temperature_floor": 1.0,
        "name": "7",
    }
    with pytest.raises(ConfigError, match="unknown option 'name'; gguf accepts: n_ctx, temperature_floor"):
        spec.check_options({"n_ctx": int, "temperature_floor": float})
    with pytest.raises(ConfigError, match="n_ctx=big must be of type int"):
        ModelSpec.parse("gguf:m.gguf?n_ctx=big").check_options({"n_ctx": int})


def test_with_options_adds_and_overrides():
    spec = ModelSpec.parse("openai:m?max_retries=1").with_options(max_retries=3, timeout_s=2.5)
    assert str(spec) == "openai:m?max_retries=3&timeout_s=2.5"
    with pytest.raises(ConfigError, match="cannot add options"):
        spec.with_options(tag="a&b")


_pieces = st.one_of(st.sampled_from([*":/@?&=.- ", "http://", "true", "1", "e5"]), st.characters())
_tricky = st.lists(_pieces, max_size=12).map("".join)  # text rich in the characters the syntax uses
_options = st.dictionaries(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), _tricky),
    max_size=4,
)


@given(
    kind=st.sampled_from(list(ModelKind)),
    target=_tricky,
    base_url=st.one_of(st.none(), st.from_regex(r"https?://[a-z0-9.:/@]{1,20}", fullmatch=True)),
    options=_options,
)
@example(kind=ModelKind.OPENAI, target="a@b:c", base_url="http://h:1/v1", options={"x": "1.5e", "y": "-"})
@example(kind=ModelKind.GGUF, target="a@http://b", base_url=None, options={"flag": "TRUE"})
@example(kind=ModelKind.OPENAI, target=":\n:", base_url="http://0", options={})  # a line break in the name
def test_every_valid_spec_reads_back_equal(kind, target, base_url, options):
    try:
        spec = ModelSpec(kind=kind, target=target, base_url=base_url, options=options)
    except ValidationError:
        assume(False)
    assert ModelSpec.parse(str(spec)) == spec


def test_resolution_order(monkeypatch, tmp_path):
    assert str(resolve_spec(None)) == "embedded:small"

    default_config = tmp_path / "config-home" / "datalyst" / "config.toml"
    default_config.parent.mkdir(parents=True)
    default_config.write_text('[llm]\nmodel = "gguf:/from/default.gguf"\n')
    assert str(resolve_spec(None)) == "gguf:/from/default.gguf"

    named_config = tmp_path / "named.toml"
    named_config.write_text('[other]\nx = 1\n[llm]\nmodel = "hf:from/named"\n')
    monkeypatch.setenv("DATALYST_CONFIG", str(named_config))
    assert str(resolve_spec(None)) == "hf:from/named"

    monkeypatch.setenv("DATALYST_MODEL", "openai:from-env")
    assert str(resolve_spec(None)) == "openai:from-env"

    assert str(resolve_spec("replay:explicit.jsonl")) == "replay:explicit.jsonl"


def test_config_without_a_model_falls_through(monkeypatch, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[llm]\ntemperature = 0.2\n")
    monkeypatch.setenv("DATALYST_CONFIG", str(config))
    assert str(resolve_spec(None)) == "embedded:small"
    assert str(resolve_spec(None, default="embedded:small-sft")) == "embedded:small-sft"  # a command's own default


def test_the_trained_model_and_asks_default_name_their_dialect():
    from datalyst.cli._ask import ASK_MODEL
    from datalyst.llm import ModelSpec, own_dialect

    assert own_dialect(ModelSpec.parse("embedded:small-sft")) == "jupiter"  # the format its adapter learned
    assert own_dialect(ModelSpec.parse(ASK_MODEL)) == "jupiter"  # ask's default runs in the format measured for it
    others = ("embedded:small", "embedded:small-sft?adapter=/elsewhere", "embedded:medium?adapter=/a", "replay:x")
    for other in (*others, "openai:gpt@http://h/v1"):
        assert own_dialect(ModelSpec.parse(other)) is None


def test_openai_base_url_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env:1/v1")
    assert resolve_spec("openai:m").base_url == "http://openai-env:1/v1"
    monkeypatch.setenv("DATALYST_BASE_URL", "http://datalyst-env:2/v1")
    assert resolve_spec("openai:m").base_url == "http://datalyst-env:2/v1"
    assert resolve_spec("openai:m@http://explicit:3/v1").base_url == "http://explicit:3/v1"
    assert resolve_spec("gguf:m.gguf").base_url is None


@pytest.mark.parametrize(
    ("config_text", "fragment"),
    [
        ("[llm\nmodel=", "cannot be read"),
        ("[llm]\nmodel = 3\n", "must be a string"),
        ("[llm]\nmodel = 'x'\n", "from config"),
    ],
)
def test_bad_config_files_are_named(monkeypatch, tmp_path, config_text, fragment):
    config = tmp_path / "bad.toml"
    config.write_text(config_text)
    monkeypatch.setenv("DATALYST_CONFIG", str(config))
    with pytest.raises(ConfigError, match=fragment) as caught:
        resolve_spec(None)
    assert str(config) in str(caught.value)


def test_missing_named_config_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DATALYST_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match=r"named by \$DATALYST_CONFIG does not exist"):
        resolve_spec(None)


def test_bad_env_spec_says_where_it_came_from(monkeypatch):
    monkeypatch.setenv("DATALYST_MODEL", "llama3")
    with pytest.raises(ConfigError, match=r"came from \$DATALYST_MODEL"):
        resolve_spec(None)
