"""The one JSON reader: envkit's own documents read back (collective profiles, smoke reports, refresh snapshots) and
what servers and users hand it (PyPI's API, a serving smoke's answers, a model's config.json).

Such a file comes back from another host, another run or another person, so it is read as untrusted input: at most
`MAX_BYTES`, UTF-8, nested at most `MAX_DEPTH` levels (counted before parsing, without recursion, so that 10,000
`[` are an error and not a RecursionError), no NaN, Infinity or number too large for a float (`1e999`), no key given
twice. Its shape is then checked by a strict pydantic model (`checked`: unknown keys refused, no coercion:
`"false"` is not a bool). Every failure is `BadInput` (exit 2) naming the file, and the line or the key.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from envkit.errors import BadInput, Where, shown

if TYPE_CHECKING:
    from pydantic import BaseModel

MAX_BYTES = 16 << 20  # a profile or a report is kB (64 ranks: 0.5 MB); PyPI's numpy document, stripped, is 0.3 MB
MAX_DEPTH = 64  # a smoke report with its profile nests eight levels

# a JSON string, its closing quote optional: one pass, linear (an unterminated string runs to the end, as json says)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 for [ {, -1 for ] } (as signed bytes)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))

M = TypeVar("M", bound="BaseModel")


class _Refused(ValueError):
    """A value JSON allows and envkit never writes; `token` is its text (to find its line)."""

    def __init__(self, message: str, token: str, *, key: bool = False) -> None:
        super().__init__(message)
        self.token = token
        self.key = key  # `token` is a key given twice (a JSON string): its line is that of its second use as a key


def _line_of(text: str, token: str, *, key: bool = False) -> int | None:
    """The line of the first `token` outside strings (a string never spans lines), or None; for a key given twice,
    of its second use as a key (the same key in another object before it can make that an earlier line)."""
    if key:
        uses = [m.start() for m in re.finditer(re.escape(token) + r"\s*:", text)]
        at = uses[1] if len(uses) > 1 else -1
        return text.count("\n", 0, at) + 1 if at >= 0 else None
    bare = _STRING.sub('""', text)
    at = bare.find(token)
    return bare.count("\n", 0, at) + 1 if at >= 0 else None


def read_json(
    path: Path | str, *, what: str = "JSON document", max_bytes: int = MAX_BYTES, root: Path | str | None = None
) -> Any:
    """The parsed document at `path` (see the module's doc), read through `envkit.io.untrusted` (a regular file only,
    never blocking on a FIFO, inside `root` where given, at most `max_bytes`); BadInput naming `path` otherwise."""
    from envkit.io import untrusted

    raw = untrusted.read_bytes(path, untrusted.Kind(f"a {what}", max_bytes), root=root)
    return parse_json(raw, str(Path(root) / path if root is not None and not Path(path).is_absolute() else path), what=what)


def parse_json(raw: bytes | str, file: str, *, what: str = "JSON document", max_depth: int = MAX_DEPTH) -> Any:
    """`raw` parsed as `read_json` parses a file's (a server's answer too: `envkit.io.httpclient`); `file` names it (a
    path or a URL) in the error."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{file}: not UTF-8 text (byte {exc.start})", where=Where(file)) from None
    else:
        text = raw
    if _too_deep(text, max_depth):
        raise BadInput(f"{file}: nested deeper than {max_depth} levels", where=Where(file), hint=f"Is it a {what}?")
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, object_pairs_hook=_object)
    except _Refused as exc:
        line = _line_of(text, exc.token, key=exc.key)
        raise BadInput(f"{file}: {exc}", where=Where(file, line), hint=f"Is it a {what}?") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{file}: not JSON: {exc.msg} (line {exc.lineno})", where=Where(file, exc.lineno)) from None
    except (ValueError, RecursionError) as exc:  # an integer of more than 4,300 digits; a depth the count missed
        raise BadInput(f"{file}: not a {what}: {str(exc)[:200]}", where=Where(file)) from None


def checked(data: Any, model: type[M], path: Path | str, *, what: str, key: str = "") -> M:
    """`data` (read from `path`, at `key` in it) validated by `model` strictly: no coercion, unknown keys refused
    when the model forbids them. BadInput naming the file and the first wrong key otherwise."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in (*([key] if key else []), *err["loc"]))
        got = "" if err["type"] == "missing" else f" (got {shown(err.get('input'))})"
        msg = _TYPES.get(err["type"], err["msg"])
        raise BadInput(
            f"{path}: {loc or 'the document'}: {msg}{got}",
            where=Where(str(path), None, loc or None),
            hint=f"Is it a {what} envkit wrote? One edited since is refused.",
        ) from None


# pydantic's words for a wrong JSON type that name a Python class instead
_TYPES = {"model_type": "should be a JSON object", "dict_type": "should be a JSON object", "list_type": "should be a JSON array"}


def _too_deep(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Whether `text` nests deeper than `max_depth` (strings skipped): a running sum over its brackets, in C."""
    raw = _STRING.sub("", text).encode("utf-8", "surrogatepass")  # no byte of a multi-byte character is a bracket
    steps = memoryview(raw.translate(_STEP, _NOT_BRACKET)).cast("b")
    return bool(steps) and max(accumulate(steps)) > max_depth


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number", name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:40]} is too large for a number", text)
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # the first key given twice, in one pass (a set of the keys seen: linear)
        seen: set[str] = set()
        for twice, _ in pairs:
            if twice in seen:
                raise _Refused(f"the key {twice!r} is given twice", json.dumps(twice), key=True)
            seen.add(twice)
    return out
