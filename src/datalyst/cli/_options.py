"""Command options made from config models: each field is declared once, in its model (its type, its default and
its docstring as the help), and a command reads ``--config FILE`` (TOML or YAML) under what its command line says.

``@config_command(group, "name", Model, arguments=["data"])`` registers ``handler(config, **rest)``: the command's
options are the model's fields (``--field-name``; a nested model's fields as ``--nested-field``, or as
``--field`` for a model named in ``inline``; a mapping as a repeated ``--field KEY=VALUE``), ``arguments`` are
given positionally, ``skip`` names fields the command does not offer, ``same`` fills a field with another's
value (the seed of sampling is the run's seed), ``convert`` turns a field's value (None when neither the
command line nor the file gives it) into what the model holds (a model spec resolved, a path made absolute),
``presets`` name a boolean field (or option) whose values, when it is on, fill the fields the run does not set, and
``defaults`` are the command's own defaults for fields whose model default suits other callers. The handler's
other parameters are options of the command alone (where the run goes, how often it saves); it gets the
validated model. A file names options as the command line does (``max-turns = 6``), or a nested model's as a
table.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
import tomllib
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import typer
import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from datalyst.errors import ConfigError, first_problem
from datalyst.provenance import record_command

C = TypeVar("C", bound=BaseModel)
Path_ = tuple[str, ...]
_KEYWORD = inspect.Parameter.KEYWORD_ONLY
CONFIG_HELP = "A TOML or YAML file of this command's options; what the command line gives wins over it."


@dataclass(frozen=True)
class _Option:
    """A model field as the command line writes it."""

    path: Path_
    """Where it lies in the model (a nested model's field: two names or more)."""
    parameter: inspect.Parameter
    flag: str
    mapping: bool
    """A mapping, written as repeated ``KEY=VALUE`` items."""


@dataclass(frozen=True)
class _Shape:
    """How a command writes its model: the options, and the fields it fills from others."""

    model: type[BaseModel]
    options: list[_Option]
    same: dict[Path_, Path_]
    convert: dict[Path_, Callable[[Any], Any]]

    def data(self, given: Sequence[tuple[Path_, Any]]) -> dict[str, Any]:
        """The model's data from the values ``given`` at their paths: a nested model starts from the field's
        default, so one value given leaves its other fields as the parent model sets them."""
        data: dict[str, Any] = {}
        for path, value in given:
            _put(data, self.model, path, value)
        for target, source in self.same.items():
            if (value := _get(data, source)) is not None:
                _put(data, self.model, target, value)
        for path, convert in self.convert.items():
            if (value := convert(_get(data, path))) is not None:
                _put(data, self.model, path, value)
        return data

    def validated(self, data: Mapping[str, Any]) -> BaseModel:
        """``data`` as the model; a ConfigError in one line naming the option of the first wrong value."""
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            where = tuple(str(part) for part in exc.errors()[0]["loc"])
            for option in self.options:
                if where[: len(option.path)] == option.path:
                    flag = " ".join((option.flag, *where[len(option.path) :]))  # and a mapping's key
                    raise ConfigError(f"{flag}: {first_problem(exc, located=False)}") from None
            raise ConfigError(first_problem(exc, option=True)) from None

    def read(self, path: Path) -> list[tuple[Path_, Any]]:
        """The options a TOML or YAML file gives, at their paths."""
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: not a TOML or YAML file of options ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: write the options as key = value lines (TOML) or key: value lines (YAML)")
        by_path = {option.path: option for option in self.options}
        by_name = {option.parameter.name: option for option in self.options}
        by_name |= {option.flag.lstrip("-").replace("-", "_"): option for option in self.options}
        found = []
        for keys, value in _leaves(data, by_path):
            option = by_path.get(keys) or (by_name.get(keys[0]) if len(keys) == 1 else None)
            if option is None:
                raise ConfigError(f"{path}: no option is called {'.'.join(keys)!r}; see --help")
            found.append((option.path, value))
        return found


def config_command(
    group: typer.Typer,
    name: str,
    model: type[C],
    *,
    arguments: Sequence[str] = (),
    inline: Sequence[str] = (),
    skip: Sequence[str] = (),
    same: Mapping[str, str] | None = None,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register the decorated ``handler(config, **rest)`` as ``group``'s command ``name`` (see the module); the
    field names of ``inline``, ``skip`` and ``same`` are dotted paths (``agent.sampling``)."""
    dotted = lambda names: {tuple(name.split(".")) for name in names}  # noqa: E731
    links = {tuple(target.split(".")): tuple(source.split(".")) for target, source in (same or {}).items()}
    own = {tuple(name.split(".")): value for name, value in (defaults or {}).items()}
    options = list(_options(model, set(arguments), dotted(inline), dotted(skip) | set(links), own))
    shape = _Shape(model, options, links, {tuple(name.split(".")): fn for name, fn in (convert or {}).items()})

    def register(handler: Callable[..., None]) -> Callable[..., None]:
        rest = list(inspect.signature(handler, eval_str=True).parameters.values())[1:]
        config_file = inspect.Parameter(
            "config", _KEYWORD, default=None,
            annotation=Annotated[Path | None, typer.Option(help=CONFIG_HELP, exists=True, dir_okay=False)],
        )  # fmt: skip
        context = inspect.Parameter("ctx", _KEYWORD, annotation=typer.Context)

        def command(ctx: typer.Context, **values: Any) -> None:
            given = shape.read(values["config"]) if values["config"] else []
            record_command(sys.argv[1:], values["config"], copy.deepcopy(shape.data(given)))
            for option in shape.options:
                if ctx.get_parameter_source(option.parameter.name).name not in ("DEFAULT", "DEFAULT_MAP"):
                    value = values[option.parameter.name]
                    given.append((option.path, _pairs(option.flag, value) if option.mapping else value))
            set_paths = {path for path, _ in given}
            for switch, preset_values in (presets or {}).items():  # a switch: a field, or an option of the command
                if dict(given).get(tuple(switch.split("."))) or values.get(switch):
                    preset = [(tuple(name.split(".")), value) for name, value in preset_values.items()]
                    given = [(path, value) for path, value in preset if path not in set_paths] + given
            given = [(path, value) for path, value in own.items() if path not in set_paths] + given
            config = shape.validated(shape.data(given))
            handler(config, **{parameter.name: values[parameter.name] for parameter in rest})

        parameters = [context, *(option.parameter for option in shape.options), *rest, config_file]
        command.__signature__ = inspect.Signature([p.replace(kind=_KEYWORD) for p in parameters])  # type: ignore[attr-defined]
        command.__doc__ = handler.__doc__
        group.command(name)(command)
        return handler

    return register


def validated(model: type[C], data: Mapping[str, Any]) -> C:
    """``data`` as a ``model``; a ConfigError in one line naming the first wrong option."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(first_problem(exc, option=True)) from None


def _options(
    model: type[BaseModel], arguments: set[str], inline: set[Path_], skip: set[Path_], own: Mapping[Path_, Any],
    at: Path_ = (), prefix: str = "", defaults: BaseModel | None = None, label: str = "",
) -> Iterator[_Option]:  # fmt: skip
    """Each field as an option (or an argument, for those named), nested models flattened; a nested field's
    default is the one its parent's default holds, and its help starts with the ``label`` its parent field names
    (``json_schema_extra={"label": "mcts"}``: the options that matter only to one strategy)."""
    for name, field in model.model_fields.items():
        path = (*at, name)
        if path in skip or (field.json_schema_extra or {}).get("option") is False:  # type: ignore[union-attr]
            continue  # what the stage sets, never the user (how many completions, stop strings)
        default = getattr(defaults, name) if defaults is not None else field.get_default(call_default_factory=True)
        default = own.get(path, default)
        nested = _nested_model(field.annotation)
        if nested is not None:
            inner = prefix if path in inline else f"{prefix}{name}_"
            start = default if isinstance(default, BaseModel) else None
            extra = field.json_schema_extra or {}
            yield from _options(nested, set(), inline, skip, own, path, inner, start, extra.get("label", label))  # type: ignore[union-attr]
            continue
        parameter = prefix + name
        custom = (field.json_schema_extra or {}).get("flag")  # type: ignore[union-attr]
        flag = custom or f"--{parameter.replace('_', '-')}"
        annotation, default = _cli_type(field, default)
        help_text = f"{label}: " * bool(label) + _first_sentence(field.description or "") or None
        if name in arguments:
            info = typer.Argument(help=help_text, show_default=False)
        else:
            info = typer.Option(*([custom] if custom else []), help=help_text)
        typed = Annotated[annotation, info]
        mapping = get_origin(field.annotation) is dict and not (field.json_schema_extra or {}).get("text")  # type: ignore[union-attr]
        yield _Option(path, inspect.Parameter(parameter, _KEYWORD, default=default, annotation=typed), flag, mapping)


def _leaves(data: dict[str, Any], options: Mapping[Path_, _Option], at: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """A file's values at their key paths (``-`` read as ``_``); a table is gone into unless it is a mapping's."""
    for key, value in data.items():
        path = (*at, str(key).replace("-", "_"))
        option = options.get(path)
        if isinstance(value, dict) and not (option is not None and option.mapping):
            yield from _leaves(value, options, path)
        else:
            yield path, value


def _put(data: dict[str, Any], model: type[BaseModel], path: Path_, value: Any) -> None:
    """Set ``value`` at ``path``; a nested model's table is made from the field's default where it is missing."""
    *tables, last = path
    for table in tables:
        field = model.model_fields[table]
        if not isinstance(data.get(table), dict):
            default = field.get_default(call_default_factory=True)
            data[table] = default.model_dump() if isinstance(default, BaseModel) else {}
        data, model = data[table], _nested_model(field.annotation)  # type: ignore[assignment]
    data[last] = value


def _get(data: Mapping[str, Any], path: Path_) -> Any:
    for name in path:
        if not isinstance(data, Mapping) or name not in data:
            return None
        data = data[name]
    return data


def _pairs(flag: str, items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping."""
    pairs = {}
    for item in items:
        key, sep, value = item.rpartition("=")
        if not sep or not key or not value:
            raise ConfigError(f"{flag} {item}: write KEY=VALUE")
        pairs[key] = value
    return pairs


def _first_sentence(docstring: str) -> str:
    """A field's help: the first sentence of its docstring (the rest says why, for readers of the code)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(docstring.replace("``", "`").split()), maxsplit=1)[0]


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a field that holds one (``Model`` or ``Model | None``)."""
    for option in get_args(annotation) if _is_union(annotation) else (annotation,):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _cli_type(field: FieldInfo, default: Any) -> tuple[Any, Any]:
    """How a field is written on the command line (its type) and its default there."""
    annotation = field.annotation
    if default is ... or field.is_required():
        default = None
    if (field.json_schema_extra or {}).get("text"):  # type: ignore[union-attr]
        return str | None, None  # written as text that the model's validator reads
    origin = get_origin(annotation)
    if origin is dict:
        return list[str] | None, None  # KEY=VALUE, repeated
    if origin is list:
        return annotation | None, None
    if _is_union(annotation):
        options = [option for option in get_args(annotation) if option is not type(None)]
        if any(get_origin(option) is list for option in options):  # a value or a list of them: one value
            return next(option for option in options if get_origin(option) is not list) | None, default
    return annotation, default
