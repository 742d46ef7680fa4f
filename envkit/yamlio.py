"""YAML reading that keeps line numbers, so that every error can say file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from envkit.errors import BadInput, Where

try:  # the C loader is much faster on the matrix
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


_SCALARS = yaml.constructor.SafeConstructor()  # resolves a scalar node's tag (int, float, bool, null, str)


def _construct(node: yaml.Node, path: tuple[str, ...], lines: dict[str, int], scalars_as_str: bool) -> Any:
    lines.setdefault(".".join(path), node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in out:
                raise BadInput(
                    f"duplicate key '{key}'",
                    where=Where(None, key_node.start_mark.line + 1, ".".join((*path, key))),
                    hint="Each key may appear once.",
                )
            lines[".".join((*path, key))] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, (*path, key), lines, scalars_as_str)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(v, (*path, str(i)), lines, scalars_as_str) for i, v in enumerate(node.value)]
    if scalars_as_str:
        if node.tag == "tag:yaml.org,2002:null" or (node.value in ("", "~", "null") and node.style is None):
            return None
        return str(node.value)
    return _SCALARS.construct_object(node)


def load_text(text: str, filename: str, *, scalars_as_str: bool = False) -> tuple[Any, dict[str, int]]:
    """Parse YAML text. Returns (data, lines) where lines maps a dotted key path to its 1-based line.

    With scalars_as_str, every scalar stays the string the user wrote (``python: 3.10`` is "3.10",
    not the float 3.1).
    """
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise BadInput(
            f"{filename} is not valid YAML: {exc.problem or exc.context}",
            where=Where(filename, mark.line + 1 if mark else None),
            hint="Fix the YAML syntax at that line.",
        ) from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{filename} is not valid YAML: {exc}", where=Where(filename)) from None
    if node is None:
        return None, {}
    lines: dict[str, int] = {}
    try:
        data = _construct(node, (), lines, scalars_as_str)
    except BadInput as exc:
        assert exc.where is not None
        raise BadInput(exc.message, where=Where(filename, exc.where.line, exc.where.key), hint=exc.hint) from None
    return data, lines


def read_text(path: Path) -> str:
    """A file's UTF-8 text, read once (it may be a pipe); BadInput (exit 2) with the reason otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path} does not exist", where=Where(str(path)), hint="Check the path.") from None
    except IsADirectoryError:
        raise BadInput(f"{path} is a directory, not a file", where=Where(str(path))) from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}", where=Where(str(path))) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start})", where=Where(str(path))) from None


def load_file(path: Path, *, scalars_as_str: bool = False) -> tuple[Any, dict[str, int]]:
    return load_text(read_text(path), str(path), scalars_as_str=scalars_as_str)


def fast_load(path: Path) -> Any:
    """Plain fast load for trusted data (the shipped matrix)."""
    return yaml.load(path.read_bytes(), Loader=_Loader)  # noqa: S506 - safe loader
