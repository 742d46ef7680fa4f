"""YAML reading that keeps line numbers, so that every error can say file:line.

A stack file or a lock is untrusted input, so loading is bounded: at most ``MAX_BYTES`` of text,
``MAX_DEPTH`` levels of nesting, ``MAX_ALIAS_NODES`` nodes reached again through aliases (an
alias bomb fails at once instead of expanding), and only the plain YAML tags (str, int, float,
bool, null, timestamp, map, seq): ``!!python/object``, ``!foo``, ``!!set``... are refused. Each
limit is a BadInput (exit 2) naming file:line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from envkit.errors import BadInput, Where

try:  # the C loader is much faster on the matrix
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


_SCALARS = yaml.constructor.SafeConstructor()  # resolves a scalar node's tag (int, float, bool, null, str)

MAX_BYTES = 8 << 20  # a lock or a stack file is a few kB; the matrix is read by fast_load
MAX_DEPTH = 64  # levels of nesting (a lock has six)
MAX_ALIAS_NODES = 10_000  # nodes visited again through aliases
_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp", "map", "seq", "merge", "value")
)


class _Walk:
    """One document's construction: line numbers, and the limits on depth and alias expansion."""

    def __init__(self, scalars_as_str: bool) -> None:
        self.scalars_as_str = scalars_as_str
        self.lines: dict[str, int] = {}
        self.seen: set[int] = set()
        self.again = 0

    def fail(self, node: yaml.Node, message: str, path: tuple[str, ...], hint: str) -> BadInput:
        return BadInput(message, where=Where(None, node.start_mark.line + 1, ".".join(path) or None), hint=hint)

    def check(self, node: yaml.Node, path: tuple[str, ...]) -> None:
        if node.tag not in _TAGS:
            raise self.fail(node, f"unknown YAML tag '{node.tag}'", path, "Remove the tag: only plain YAML values are read.")
        if len(path) > MAX_DEPTH:
            raise self.fail(node, f"nested deeper than {MAX_DEPTH} levels", path, "Flatten the document.")
        if id(node) in self.seen:
            self.again += 1
            if self.again > MAX_ALIAS_NODES:
                raise self.fail(
                    node,
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?)",
                    path,
                    "Write the values out instead of repeating anchors (&name / *name).",
                )
        else:
            self.seen.add(id(node))

    def construct(self, node: yaml.Node, path: tuple[str, ...]) -> Any:
        self.check(node, path)
        self.lines.setdefault(".".join(path), node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.fail(key_node, "a mapping key must be a plain value", path, "Use a string as the key.")
                self.check(key_node, path)
                key = str(key_node.value)
                if key in out:
                    raise BadInput(
                        f"duplicate key '{key}'",
                        where=Where(None, key_node.start_mark.line + 1, ".".join((*path, key))),
                        hint="Each key may appear once.",
                    )
                self.lines[".".join((*path, key))] = key_node.start_mark.line + 1
                out[key] = self.construct(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.construct(v, (*path, str(i))) for i, v in enumerate(node.value)]
        if self.scalars_as_str:
            if node.tag == "tag:yaml.org,2002:null" or (
                node.value in ("", "~", "null") and isinstance(node, yaml.ScalarNode) and node.style is None
            ):
                return None
            return str(node.value)
        try:
            return _SCALARS.construct_object(node)
        except (yaml.YAMLError, ValueError, KeyError, TypeError, OverflowError, IndexError) as exc:  # !!int x, 2024-13-45
            kind = node.tag.rsplit(":", 1)[-1]
            raise self.fail(node, f"not a valid {kind}: {exc}", path, "Quote the value.") from None


def load_text(text: str, filename: str, *, scalars_as_str: bool = False) -> tuple[Any, dict[str, int]]:
    """Parse YAML text. Returns (data, lines) where lines maps a dotted key path to its 1-based line.

    With scalars_as_str, every scalar stays the string the user wrote (``python: 3.10`` is "3.10",
    not the float 3.1).
    """
    if len(text) > MAX_BYTES:
        raise BadInput(
            f"{filename} is too large for a YAML input ({len(text)} characters, at most {MAX_BYTES})",
            where=Where(filename),
        )
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
    walk = _Walk(scalars_as_str)
    try:
        data = walk.construct(node, ())
    except BadInput as exc:
        assert exc.where is not None
        raise BadInput(
            f"{filename}: {exc.message}", where=Where(filename, exc.where.line, exc.where.key), hint=exc.hint
        ) from None
    return data, walk.lines


def read_text(path: Path) -> str:
    """A file's UTF-8 text, read once, at most MAX_BYTES; BadInput (exit 2) with the reason otherwise.

    It may be a pipe on purpose (`-f <(make-stack)`, `/dev/stdin`), so a pipe is read, but the open never waits: it
    is non-blocking (a named FIFO with no writer would block a plain `open` forever) and the reads then block, so
    a pipe with a writer is read to its end and one without is refused (it reads as empty)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as fh:
            os.set_blocking(fd, True)
            raw = fh.read(MAX_BYTES + 1)
            pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
    except FileNotFoundError:
        raise BadInput(f"{path} does not exist", where=Where(str(path)), hint="Check the path.") from None
    except IsADirectoryError:
        raise BadInput(f"{path} is a directory, not a file", where=Where(str(path))) from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}", where=Where(str(path))) from None
    if pipe and not raw:
        raise BadInput(
            f"{path} is a pipe that gave nothing (no writer had it open)",
            where=Where(str(path)),
            hint="Start the program that writes it first, or give a file.",
        )
    if len(raw) > MAX_BYTES:
        raise BadInput(f"{path} is too large (over {MAX_BYTES} bytes)", where=Where(str(path))) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start})", where=Where(str(path))) from None


def load_file(path: Path, *, scalars_as_str: bool = False) -> tuple[Any, dict[str, int]]:
    return load_text(read_text(path), str(path), scalars_as_str=scalars_as_str)


class _FastLoader(_Loader):
    """The C loader for a fast path: refuses (yaml.YAMLError) what load_text checks closely."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(None, None, "an alias (*name)", node.start_mark)
        if node.tag not in _TAGS:
            raise yaml.constructor.ConstructorError(None, None, f"unknown tag {node.tag}", node.start_mark)
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, TypeError, OverflowError, IndexError) as exc:  # !!int x, 2024-13-45, 5,000 digits
            raise yaml.constructor.ConstructorError(None, None, str(exc), node.start_mark) from None


class _KeysAsWritten:
    """Mappings as load_text reads them: a key once, and `<<` a key like any other (load_text merges nothing)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        if any(key.tag == "tag:yaml.org,2002:merge" for key, _ in node.value):
            raise yaml.constructor.ConstructorError(None, None, "a merge key (<<)", node.start_mark)
        mapping = super().construct_mapping(node, deep)  # type: ignore[misc]
        if len(mapping) != len(node.value):  # a key twice (or two spellings of one value: 1 and 0x1)
            raise yaml.constructor.ConstructorError(None, None, "a repeated key", node.start_mark)
        return mapping


class _UniqueLoader(_KeysAsWritten, _Loader):
    pass


class _UniqueFastLoader(_KeysAsWritten, _FastLoader):
    pass


def fast_load_text(text: str, *, as_written: bool = False) -> Any:
    """YAML text through the C loader, for a caller's fast path (a lock). Raises yaml.YAMLError on
    anything load_text would refuse or look at closely (too large, an alias, an unknown tag, a value
    no constructor takes); the caller then loads with load_text, whose error names file:line. Depth
    is capped by libyaml itself (1,000 levels). `as_written`: also a key repeated in a mapping (load_text refuses
    it) and a merge key `<<` (load_text reads it as a plain key) raise, so that what loads is what load_text gives
    (with typed keys: a caller that takes str keys only gets the same mappings)."""
    if len(text) > MAX_BYTES:
        raise yaml.YAMLError(f"over {MAX_BYTES} characters")
    if "&" in text or "!" in text:  # an anchor or a tag may be there: check node by node
        return yaml.load(text, Loader=_UniqueFastLoader if as_written else _FastLoader)  # noqa: S506 - a safe loader
    try:  # no anchor, hence no alias, and only the implicit tags: the plain C loader
        return yaml.load(text, Loader=_UniqueLoader if as_written else _Loader)  # noqa: S506 - a safe loader
    except (ValueError, KeyError, TypeError, OverflowError, IndexError) as exc:
        raise yaml.YAMLError(str(exc)) from None


def fast_load(path: Path) -> Any:
    """Plain fast load for trusted data (the shipped matrix)."""
    return yaml.load(path.read_bytes(), Loader=_Loader)  # noqa: S506 - safe loader
