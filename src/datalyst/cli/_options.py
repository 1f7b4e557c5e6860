"""Command options made from config models: each field is declared once, in its model (its type, its default and
its docstring as the help), and a command reads ``--config FILE`` (TOML or YAML) under what its command line says.

``@config_command(group, "name", Model, arguments=["data"])`` registers ``handler(config, **rest)``: the command's
options are the model's fields (``--field-name``; a nested model's fields as ``--nested-field``; a mapping as a
repeated ``--field KEY=VALUE``), ``arguments`` are given positionally, and the handler's other parameters are
options of the command alone (where the run goes, how often it saves). The handler gets the validated model.
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
_KEYWORD = inspect.Parameter.KEYWORD_ONLY
CONFIG_HELP = "A TOML or YAML file of this command's options; what the command line gives wins over it."


@dataclass(frozen=True)
class _Option:
    """A model field as the command line writes it."""

    path: tuple[str, ...]
    """Where it lies in the model (a nested model's field: two names)."""
    parameter: inspect.Parameter
    flag: str
    mapping: bool
    """A mapping, written as repeated ``KEY=VALUE`` items."""


def config_command(
    group: typer.Typer, name: str, model: type[C], *, arguments: Sequence[str] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register the decorated ``handler(config, **rest)`` as ``group``'s command ``name`` (see the module)."""

    def register(handler: Callable[..., None]) -> Callable[..., None]:
        options = list(_options(model, arguments))
        rest = list(inspect.signature(handler, eval_str=True).parameters.values())[1:]
        config_file = inspect.Parameter(
            "config", _KEYWORD, default=None,
            annotation=Annotated[Path | None, typer.Option(help=CONFIG_HELP, exists=True, dir_okay=False)],
        )  # fmt: skip
        context = inspect.Parameter("ctx", _KEYWORD, annotation=typer.Context)

        def command(ctx: typer.Context, **values: Any) -> None:
            data = read_config_file(values["config"], model) if values["config"] else {}
            record_command(sys.argv[1:], values["config"], copy.deepcopy(data))
            for option in options:
                if ctx.get_parameter_source(option.parameter.name).name not in ("DEFAULT", "DEFAULT_MAP"):
                    value = values[option.parameter.name]
                    _put(data, option.path, _pairs(option.flag, value) if option.mapping else value)
            handler(validated(model, data, options), **{parameter.name: values[parameter.name] for parameter in rest})

        parameters = [context, *(option.parameter for option in options), *rest, config_file]
        command.__signature__ = inspect.Signature([p.replace(kind=_KEYWORD) for p in parameters])  # type: ignore[attr-defined]
        command.__doc__ = handler.__doc__
        group.command(name)(command)
        return handler

    return register


def validated(model: type[C], data: Mapping[str, Any], options: Sequence[_Option] = ()) -> C:
    """``data`` as a ``model``; a ConfigError in one line naming the option of the first wrong value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = tuple(str(part) for part in exc.errors()[0]["loc"])
        for option in options:
            if where[: len(option.path)] == option.path:
                flag = " ".join((option.flag, *where[len(option.path) :]))  # and a mapping's key
                raise ConfigError(f"{flag}: {first_problem(exc, located=False)}") from None
        raise ConfigError(first_problem(exc, option=True)) from None


def read_config_file(path: Path, model: type[BaseModel]) -> dict[str, Any]:
    """The options in a TOML or YAML file (``field-name`` or ``field_name`` keys; a nested model as a table)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a TOML or YAML file of options ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: write the options as key = value lines (TOML) or key: value lines (YAML)")
    data = _snake(data)
    if unknown := sorted(set(data) - set(model.model_fields)):
        raise ConfigError(f"{path}: no option is called {unknown[0]!r}; see --help")
    return data


def _snake(data: dict[str, Any]) -> dict[str, Any]:
    return {
        str(key).replace("-", "_"): _snake(value) if isinstance(value, dict) else value for key, value in data.items()
    }


def _pairs(flag: str, items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping."""
    pairs = {}
    for item in items:
        key, sep, value = item.rpartition("=")
        if not sep or not key or not value:
            raise ConfigError(f"{flag} {item}: write KEY=VALUE")
        pairs[key] = value
    return pairs


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``value`` at ``path`` in nested ``data`` (a nested model's table is made, or its ``None`` replaced)."""
    *tables, last = path
    for table in tables:
        if not isinstance(data.get(table), dict):
            data[table] = {}
        data = data[table]
    data[last] = value


def _options(model: type[BaseModel], arguments: Sequence[str], prefix: tuple[str, ...] = ()) -> Iterator[_Option]:
    """Each field as an option (or an argument, for those named), nested models flattened."""
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        nested = _nested_model(field.annotation)
        if nested is not None:
            yield from _options(nested, (), path)
            continue
        parameter = "_".join(path)
        flag = (field.json_schema_extra or {}).get("flag") or f"--{parameter.replace('_', '-')}"  # type: ignore[union-attr]
        annotation, default = _cli_type(field)
        help_text = _first_sentence(field.description or "") or None
        if name in arguments:
            info = typer.Argument(help=help_text, show_default=False)
        else:
            info = typer.Option(flag, help=help_text)
        typed = Annotated[annotation, info]
        mapping = get_origin(field.annotation) is dict
        yield _Option(path, inspect.Parameter(parameter, _KEYWORD, default=default, annotation=typed), flag, mapping)


def _first_sentence(docstring: str) -> str:
    """A field's help: the first sentence of its docstring (the rest says why, for readers of the code)."""
    text = " ".join(docstring.replace("``", "`").split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0]


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a field that holds one (``Model`` or ``Model | None``)."""
    for option in get_args(annotation) if _is_union(annotation) else (annotation,):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _cli_type(field: FieldInfo) -> tuple[Any, Any]:
    """How a field is written on the command line (its type) and its default there."""
    annotation, default = field.annotation, field.get_default(call_default_factory=True)
    if default is ... or field.is_required():
        default = None
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
