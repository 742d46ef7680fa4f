"""The bounded-input layer: every parser of untrusted text (inventories, hccn.conf, launch variables, sizes, ports)
reads numbers, addresses, names and host ranges through these, so that no input can make envkit hang, exhaust
memory or end in a traceback. Each refusal is BadInput (exit 2) naming the file, line or key, and what is allowed.

- integers: ASCII digits only (`int()` also takes "²"-free Unicode digits, "1_000" and spaces), at most as many
  digits as the upper bound has, then within [lo, hi];
- sizes: an integer with a binary unit (8K, 1MiB, 64M, 1G), capped;
- addresses: `ipaddress`, exactly the family asked for, no IPv6 scope id (`%eth0`) that would reach a rendered file;
- host ranges (`node[01:64]`): the number of names is counted before any is made, capped;
- strings: a length cap before any pattern is tried.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from envkit.errors import BadInput, Where

MAX_HOSTS = 10_000  # names one inventory may expand to (a thousand-host fleet with room to spare)
MAX_DEVICE_ID = 64  # /dev/davinciN and hccn.conf's address_N: the rank table guides' device_id range is [0, 64]
MAX_NAME = 253  # a DNS name's length; every name is refused past it before a pattern is tried
MAX_TEXT = 4096  # any other one-line value


def integer(text: str, what: str, *, lo: int, hi: int, where: Where | None = None, hint: str | None = None) -> int:
    """`text` as an integer in [lo, hi] (lo >= 0): ASCII digits only, no sign, no spaces, no underscores."""
    digits = len(str(hi))
    if not (text.isascii() and text.isdigit()) or len(text) > digits:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadInput(
            f"{what}={shown!r} is not a whole number of at most {digits} digits", where=where, hint=hint or f"{lo} to {hi}"
        )
    value = int(text)
    if not lo <= value <= hi:
        raise BadInput(f"{what}={value} is out of range", where=where, hint=hint or f"{lo} to {hi}")
    return value


def is_digits(text: str, max_len: int) -> bool:
    """Whether `text` is 1 to `max_len` ASCII digits (str.isdigit also takes "²" and "٣", which int() refuses or
    reads as other digits, and any length, which int() refuses past 4,300 digits)."""
    return 0 < len(text) <= max_len and text.isascii() and text.isdigit()


def port(text: str, what: str, where: Where | None = None) -> int:
    """A TCP port, 1 to 65535."""
    return integer(text, what, lo=1, hi=65535, where=where, hint="a TCP port: 1 to 65535")


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20}
_UNITS |= {"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SIZE = re.compile(r"\s*([0-9]{1,19})\s*([A-Za-z]{0,3})\s*")


def size(text: str, what: str, *, hi: int, where: Where | None = None) -> int:
    """'1MiB', '64M', '8K', '4096' -> bytes (binary units), at most `hi`."""
    m = _SIZE.fullmatch(text) if len(text) <= 32 else None
    if not m or m.group(2).lower() not in _UNITS:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadInput(f"{what}: not a size: {shown!r}", where=where, hint="write sizes like 8K, 1MiB, 64M or 1G (binary units)")
    value = int(m.group(1)) * _UNITS[m.group(2).lower()]
    if value > hi:
        raise BadInput(f"{what}: {text.strip()} is over the largest size, {hi} bytes", where=where)
    return value


def address(text: str, what: str, *, family: Literal[4, 6] | None = None, where: Where | None = None) -> str:
    """An IP address (of `family` when given), as written; no IPv6 scope id."""
    if len(text) > 45 or "%" in text:  # 45: the longest IPv6 text (IPv4-mapped); a scope id never reaches a file
        raise BadInput(f"{what}={text[:60]!r} is not an IP address (no scope id)", where=where)
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise BadInput(f"{what}={text!r} is not an IP address", where=where) from None
    if family is not None and ip.version != family:
        raise BadInput(f"{what}={text} is an IPv{ip.version} address; IPv{family} is expected here", where=where)
    return text


def text(value: str, what: str, *, limit: int = MAX_TEXT, where: Where | None = None) -> str:
    """A one-line value of at most `limit` characters."""
    if len(value) > limit or any(c in value for c in "\n\r\0"):
        raise BadInput(f"{what} is longer than {limit} characters or spans lines", where=where)
    return value


# an image reference as an engine takes it: registry/name:tag@sha256:hex, nothing a shell or Dockerfile would expand
IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")


def image_ref(value: str, what: str, where: Where | None = None) -> str:
    """An image reference (`IMAGE_REF`), else BadInput naming `what`."""
    if not IMAGE_REF.fullmatch(value):
        raise BadInput(
            f"{what} {value[:80]!r} is not an image reference",
            where=where,
            hint="Name it as REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST (letters, digits and ._/:@+- only).",
        )
    return value


_RANGE = re.compile(r"\[([0-9]+):([0-9]+)\]")


def host_range(name: str, where: Where | None = None, *, cap: int = MAX_HOSTS) -> list[str]:
    """Ansible's numeric host ranges (`node[01:03]`, several in one name), expanded only once the number of names
    they make is known to be at most `cap`; a zero-padded start pads every number to its width."""
    if len(name) > MAX_NAME:
        raise BadInput(f"host name {name[:60]}... is not a plain host name: longer than {MAX_NAME} characters", where=where)
    parts = list(_RANGE.finditer(name))
    total = 1
    bounds = []
    for m in parts:
        lo_text, hi_text = m.group(1), m.group(2)
        lo = integer(lo_text, f"host range {m.group(0)} start", lo=0, hi=10**9, where=where)
        hi = integer(hi_text, f"host range {m.group(0)} end", lo=0, hi=10**9, where=where)
        if hi < lo:
            raise BadInput(f"host range {name} runs backwards", where=where)
        total *= hi - lo + 1
        if total > cap:
            raise BadInput(
                f"host range {name} makes more than {cap} hosts", where=where, hint=f"An inventory holds at most {cap} hosts."
            )
        bounds.append((m, lo, hi, len(lo_text) if lo_text.startswith("0") else 0))
    names = [""]
    end = 0
    for m, lo, hi, width in bounds:
        names = [n + name[end : m.start()] + str(i).zfill(width) for n in names for i in range(lo, hi + 1)]
        end = m.end()
    return [n + name[end:] for n in names]
