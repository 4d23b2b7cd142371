"""Small helpers for strict validation of LocDict/LocList trees: every mistake becomes one
'FILE:LINE: where: message' line, and all mistakes of a file are reported together."""
from __future__ import annotations

import difflib
import re
from typing import Any, Iterable

from .yamlloc import ConfigError, LocDict, LocList

kNamePattern = re.compile(r"^[a-z][a-z0-9_]*$")


# bool before int: a bool is an int to isinstance.
kTypeNames = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "list"),
              (dict, "mapping"), (type(None), "null"))


def type_name(value: Any) -> str:
    return next((name for kind, name in kTypeNames if isinstance(value, kind)), type(value).__name__)


class Checker:
    def __init__(self, path: str):
        self.path = path
        self.errors: list[str] = []

    def error(self, line: int, where: str, message: str) -> None:
        self.errors.append(f"{self.path}:{line}: {where}: {message}")

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigError(self.errors)

    def keys(self, node: LocDict, where: str, allowed: Iterable[str], required: Iterable[str] = ()) -> None:
        allowed = list(allowed)
        for key in node:
            if key not in allowed:
                near = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                self.error(node.line_of(key), where, f"unknown key {key!r}{hint}; valid keys: {', '.join(allowed)}")
        for key in required:
            if key not in node:
                self.error(node.line, where, f"missing required key {key!r}")

    def mapping(self, parent: LocDict, key: str, where: str) -> LocDict | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.error(parent.line_of(key), where, f"{key} must be a mapping, got {type_name(value)} {value!r}")
            return None
        return value

    def typed(self, parent: LocDict | LocList, key: Any, where: str, kinds: tuple[type, ...],
              kind_text: str) -> bool:
        value = parent[key]
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok:
            self.error(parent.line_of(key), where, f"{key} must be {kind_text}, got {type_name(value)} {value!r}")
        return ok

    def choice(self, parent: LocDict | LocList, key: Any, where: str, choices: Iterable[Any]) -> bool:
        choices = list(choices)
        value = parent[key]
        if value not in choices:
            self.error(parent.line_of(key), where, f"{key} {value!r} is not valid; valid: {', '.join(map(str, choices))}")
            return False
        return True

    def name(self, parent: LocDict | LocList, key: Any, where: str, value: Any) -> bool:
        if not isinstance(value, str) or not kNamePattern.match(value):
            self.error(parent.line_of(key), where,
                       f"name {value!r} must match [a-z][a-z0-9_]* (lower case, digits, underscores)")
            return False
        return True
