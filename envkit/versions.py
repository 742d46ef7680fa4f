"""Version strings in Ascend's spellings, compared correctly.

Ascend writes versions in many ways: ``8.0.RC1`` = ``8.0.rc1``, ``24.1.rc3``, ``24.1.0.3``,
``24.1.rc3.5``, ``8.5.0.alpha001``, ``9.0.0-beta.2``, ``8.1.RC1.alpha002``, ``7.5.0.1.129``;
Python packages add ``2.1.0.post10`` and local labels such as ``2.6.0+cpu``.

A version is a sequence of tokens: numbers, and tagged numbers (``alpha``, ``beta``, ``rc``,
``post``, ``dev``). The comparison key orders, at each position,
``dev < alpha < beta < rc < (end) < post < number``, so ``24.1.rc3 < 24.1.0 < 24.1.0.3``,
``8.5.0.alpha001 < 8.5.0`` and ``2.1.0 < 2.1.0.post10``. Trailing zeros of the leading number run
do not count (``8.5 == 8.5.0``). The local label (``+cpu``) is kept apart: it never takes part in
ordering, and equality ignores it unless both sides carry one.

Series and ranges:
- ``8.5.X`` (a series): every version whose leading numbers start with ``8.5``.
- ``[7.0.0,7.5.99]`` (a closed range, as written in the driver's ``compatible_version_fw``); an
  upper bound that ends with a dot (``24.1.``) means "anything that starts with 24.1".
"""

from __future__ import annotations

import functools
import re

from envkit.records import Value

_set = object.__setattr__


# >>> the ordering: one definition, envkit.versions's, shipped byte for byte to the hosts in envkit_probe
# (playbooks/plugins/modules/envkit_probe.py), where the envkit_hdk role's firmware range check is
# decided; tests/provision/test_firmware_ranges.py holds the two copies equal. Standard library only (re,
# functools), for any Python 3.7 on a host.
_TAGS = {"dev": 0, "alpha": 1, "a": 1, "beta": 2, "b": 2, "rc": 3, "c": 3, "post": 5}
_END = 4
_NUMBER = 6
_TOKEN = re.compile(r"(?P<num>\d+)|(?P<tag>dev|alpha|beta|rc|post|a|b|c)(?P<tagnum>\d*)")
_VALID = re.compile(r"^v?[0-9][0-9a-z.\-_]*(\+[0-9a-z.]+)?$")
_RANGE = re.compile(r"\[([^,\]]+),([^\]]+)\]")
MAX_LENGTH = 128  # the longest real version is ~30 characters; a 5,000-digit one is an attack, not a version
MAX_RANGES_LENGTH = 1024  # a real list is at most ~100 characters; the range regex is quadratic in its length


class InvalidVersion(ValueError):
    pass


@functools.lru_cache(maxsize=8192)
def version_key(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...], str | None]:
    """(key, release, local) of a version in any of Ascend's or Python's spellings: the key it sorts and compares by,
    its leading numbers as written, its local label (None without one); InvalidVersion when the text is none."""
    raw = str(text).strip()
    if len(raw) > MAX_LENGTH:
        raise InvalidVersion(f"not a version: {raw[:20]!r}... is {len(raw)} characters long (at most {MAX_LENGTH})")
    low = raw.lower()
    if not low or not _VALID.match(low):
        raise InvalidVersion(f"not a version: {text!r}")
    public, _, local = low.partition("+")
    if public.startswith("v"):
        public = public[1:]
    tokens: list[tuple[int, int]] = []
    for piece in re.split(r"[.\-_]", public):
        if not piece:
            continue
        pos = 0
        while pos < len(piece):
            m = _TOKEN.match(piece, pos)
            if not m:
                raise InvalidVersion(f"not a version: {text!r}")
            if m.group("num") is not None:
                tokens.append((_NUMBER, int(m.group("num"))))
            else:
                tokens.append((_TAGS[m.group("tag")], int(m.group("tagnum") or 0)))
            pos = m.end()
    if not tokens or tokens[0][0] != _NUMBER:
        raise InvalidVersion(f"not a version: {text!r}")
    lead = 0
    while lead < len(tokens) and tokens[lead][0] == _NUMBER:
        lead += 1
    release = [n for _, n in tokens[:lead]]
    trimmed = list(release)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    key = [(_NUMBER, n) for n in trimmed] + tokens[lead:] + [(_END, 0)]
    return tuple(key), tuple(release), local or None


def in_range(version: str, lower: str, upper: str) -> bool:
    """Closed range as Ascend writes it.

    An upper bound ending with '.' (``[24.1,24.1.]``) is a prefix range: it compares the leading
    numbers only, so every build of the 24.1 line (``24.1.rc3``, ``24.1.0.3``) is inside. The
    trailing zeros of a release do not count there either (``7`` is ``7.0``, at the bottom of
    ``[7.0,7.1.]``); a pre-release's do (``23.0.rc3`` comes before ``23.0.0``, below ``[23.0.0,23.0.0.]``).
    """
    key, release, _ = version_key(version)
    if upper.endswith("."):
        lo = version_key(lower)[1]
        hi = version_key(upper.rstrip("."))[1]
        line = release + (0,) * (len(lo) - len(release)) if all(k >= _END for k, _ in key) else release
        return line[: len(lo)] >= lo and release[: len(hi)] <= hi
    return version_key(lower)[0] <= key <= version_key(upper)[0]


def parse_ranges(text: str) -> list[tuple[str, str]]:
    """``[7.0.0,7.5.99],[8.0,8.0.]`` -> [("7.0.0", "7.5.99"), ("8.0", "8.0.")]."""
    if len(text) > MAX_RANGES_LENGTH:
        raise InvalidVersion(f"not a list of version ranges: {len(text)} characters long (at most {MAX_RANGES_LENGTH})")
    found = _RANGE.findall(text.replace(" ", ""))
    if not found:
        raise InvalidVersion(f"not a list of version ranges: {text!r}")
    for lo, hi in found:
        version_key(lo)
        version_key(hi.rstrip("."))
    return found


def in_any_range(version: str, ranges: list[tuple[str, str]]) -> bool:
    return any(in_range(version, lo, hi) for lo, hi in ranges)


# <<< the ordering


@functools.total_ordering
class Version(Value):
    """A parsed version: its text, the key it sorts and compares by, its release numbers, its local label."""

    __slots__ = ("text", "key", "release", "local")
    _fields = __slots__
    text: str
    key: tuple[tuple[int, int], ...]
    release: tuple[int, ...]
    local: str | None

    def __init__(self, text: str, key: tuple[tuple[int, int], ...], release: tuple[int, ...], local: str | None) -> None:
        _set(self, "text", text)
        _set(self, "key", key)
        _set(self, "release", release)
        _set(self, "local", local)

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        if self.key != other.key:
            return False
        return self.local is None or other.local is None or self.local == other.local

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self.key)

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    @property
    def public(self) -> str:
        return self.text.split("+", 1)[0]

    @property
    def is_prerelease(self) -> bool:
        return any(kind < _END for kind, _ in self.key)

    def series(self, depth: int = 2) -> tuple[int, ...]:
        return self.release[:depth]


@functools.lru_cache(maxsize=8192)
def parse(text: str) -> Version:
    """Parse a version in any of Ascend's or Python's spellings."""
    key, release, local = version_key(text)
    return Version(str(text).strip(), key, release, local)


def patch_base(text: str) -> str | None:
    """The release a patch build belongs to: ``24.1.rc2.2`` -> ``24.1.rc2``, ``24.1.0.3`` -> ``24.1.0``.

    A patch is a release spelled with at least three parts plus one more number (HDK patches and the
    ``package_version`` spelling ``25.0.rc1.1``); ``25.5.1`` is a release, not a patch of ``25.5``.
    None when the text is not a patch spelling.
    """
    public = str(text).strip().lower().split("+", 1)[0]
    m = re.match(r"^(.*\d)[.\-_](\d+)$", public)
    if not m or len([p for p in re.split(r"[.\-_]", m.group(1)) if p]) < 3 or not is_valid(m.group(1)):
        return None
    return m.group(1)


def is_valid(text: str) -> bool:
    try:
        parse(text)
    except InvalidVersion:
        return False
    return True


def same(a: str, b: str) -> bool:
    return parse(a) == parse(b)


def sort_key(text: str) -> tuple[tuple[int, int], ...]:
    return parse(text).key


def newest_first(versions: list[str]) -> list[str]:
    return sorted(versions, key=sort_key, reverse=True)


def in_series(version: str, series: str) -> bool:
    """``in_series("8.5.1", "8.5.X")`` is true; a series without ``X`` is an exact version."""
    s = series.strip()
    if not s.lower().endswith(".x"):
        return same(version, s)
    prefix = parse(s[:-2]).release
    v = parse(version)
    return v.release[: len(prefix)] == prefix and len(v.release) >= len(prefix)


_SPEC = re.compile(r"^\s*(==|!=|>=|<=|>|<|~=)\s*(\S+)\s*$")


def satisfies(version: str, spec: str) -> bool:
    """A comma-separated PEP 440-style specifier evaluated with Ascend-aware comparison.

    ``==2.6.0`` matches ``2.6.0+cpu`` (a local label is ignored unless the specifier has one);
    ``==2.13.0.*`` is a prefix match.
    """
    if not spec or not spec.strip():
        return True
    v = parse(version)
    for part in spec.split(","):
        m = _SPEC.match(part)
        if not m:
            raise InvalidVersion(f"not a version specifier: {spec!r}")
        op, rhs = m.groups()
        if rhs.endswith(".*"):
            prefix = parse(rhs[:-2]).release
            ok = v.release[: len(prefix)] == prefix
            if op == "!=":
                ok = not ok
            elif op != "==":
                raise InvalidVersion(f"wildcard only with == or !=: {spec!r}")
            if not ok:
                return False
            continue
        r = parse(rhs)
        if op == "==":
            ok = v == r
        elif op == "!=":
            ok = v != r
        elif op == ">=":
            ok = v >= r
        elif op == "<=":
            ok = v <= r
        elif op == ">":
            ok = v > r
        elif op == "<":
            ok = v < r
        else:  # ~=
            upper = list(r.release[:-1])
            upper[-1] += 1
            ok = v >= r and v < parse(".".join(map(str, upper)))
        if not ok:
            return False
    return True


def python_tag(python: str) -> str:
    """``3.11`` -> ``cp311``."""
    major, minor = parse(python).release[:2]
    return f"cp{major}{minor}"
