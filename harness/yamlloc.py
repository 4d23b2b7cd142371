"""YAML loading that remembers where every value came from, for file:line errors.

Mappings load as `LocDict` and sequences as `LocList`; both carry the line of each key or
item (1-based), so a validator can point at the exact line of a bad value. Duplicate keys
are an error here (PyYAML silently keeps the last one).
"""
from __future__ import annotations

import pathlib
from typing import Any

import yaml


class ConfigError(Exception):
    """One or more configuration mistakes, each 'FILE:LINE: message'."""

    def __init__(self, messages: list[str] | str):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(self.messages))


class LocDict(dict):
    path: str = "?"
    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LocList(list):
    path: str = "?"
    line: int = 0
    item_lines: list[int]

    def line_of(self, i: int) -> int:
        return self.item_lines[i] if 0 <= i < len(self.item_lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LocDict:
    out = LocDict()
    out.path, out.line, out.key_lines = loader.name, node.start_mark.line + 1, {}
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)):
            raise ConfigError(f"{loader.name}:{key_node.start_mark.line + 1}: mapping keys must be scalars")
        if key in out:
            raise ConfigError(f"{loader.name}:{key_node.start_mark.line + 1}: duplicate key {key!r} "
                              f"(first at line {out.key_lines[key]})")
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LocList:
    out = LocList(loader.construct_object(child, deep=True) for child in node.value)
    out.path, out.line = loader.name, node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load(path: str | pathlib.Path) -> Any:
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise ConfigError(f"{path}:{line}: YAML syntax: {exc.problem or exc.context}") from None
    finally:
        loader.dispose()


def plain(value: Any) -> Any:
    """Drops the location wrappers (for JSON dumps)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
