"""A spec's files: YAML read strictly (no key twice, no tags that run code) and written
back readable, paths made absolute against the spec file's directory, and command-line
overrides merged in before validation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field

from ...errors import SpecError


def _absolute(value: Any) -> Any:
    """A path made absolute on the driver (``~`` expanded, relative to the current
    directory; :func:`load_spec` first resolves a spec file's paths against its own
    directory), so that no worker resolves it against its own directory."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str) and value.strip():
        return os.path.abspath(os.path.expanduser(value))
    return value


#: A path in a spec: absolute once validated.
PathStr = Annotated[str, Field(min_length=1), BeforeValidator(_absolute)]

#: Where the spec's paths live: resolved against the spec file's directory by load_spec.
PATH_KEYS = (("data", "store"), ("run", "out"), ("module_dir",), ("cluster", "security", "ca"),
             ("cluster", "security", "cert"), ("cluster", "security", "key"))


def resolve_paths(data: Mapping, base: str | os.PathLike) -> dict:
    """A raw spec mapping with each relative path of :data:`PATH_KEYS` joined to
    ``base`` (the spec file's directory; ``~`` expanded); other values untouched."""

    def resolve(node: Any, keys: tuple[str, ...]) -> Any:
        if not isinstance(node, Mapping) or keys[0] not in node:
            return node
        value = node[keys[0]]
        if len(keys) > 1:
            value = resolve(value, keys[1:])
        elif isinstance(value, str) and value.strip():
            value = os.path.join(base, os.path.expanduser(value))
        return {**node, keys[0]: value}

    for keys in PATH_KEYS:
        data = resolve(data, keys)
    return dict(data)


def merged(base: Mapping, overrides: Mapping) -> dict:
    """`base` with `overrides` merged in, mapping into mapping; None overrides skipped.

    A section that `base` leaves empty (None) takes the override's mapping; one that is
    not a mapping is kept, for validation to refuse it with its key."""
    out = dict(base)
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            current = out.get(key)
            if current is None:
                out[key] = merged({}, value)
            elif isinstance(current, Mapping):
                out[key] = merged(current, value)
        else:
            out[key] = value
    return out


class _Loader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    twice = key in seen
                except TypeError:  # an unhashable key: SafeLoader refuses it below
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"found key {key!r} twice",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    """A safe YAML dumper that writes lists (symbols, values, constraints) on one line."""


def _flow_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(list, _flow_list)


def load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise SpecError(f"invalid sweep spec {source}: not valid YAML{where}: {problem}") from None




def dump_yaml(data: Mapping) -> str:
    """``data`` as block-style YAML with lists on one line, keys in their order."""
    return yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, default_flow_style=False)
