"""Docker's BuildKit through the Engine API: the request's context and the progress it streams back.

`POST /build?version=2` builds with BuildKit (moby's builder-next) on Docker >= 18.09; the docker SDK never sends
`version` (docker/docker-py#2230), and without it Docker runs its classic builder, which refuses `RUN --mount`.
The context is uploaded gzip-compressed: builder-next serves the request body to BuildKit as a remote context,
and BuildKit takes a plain tar that opens with a PAX header for a Dockerfile. The progress comes back as
`{"id": "moby.buildkit.trace", "aux": BASE64}` chunks, each a protobuf `moby.buildkit.v1.StatusResponse`
(github.com/moby/buildkit api/services/control/control.proto): `vertexes` = 1 (a step: digest 1, name 3,
cached 4, started 5, completed 6, error 7), `logs` = 3 (vertex 1, stream 3, msg 4). `Trace` turns them into
the lines a plain-progress `docker build` shows: a step's name when it starts (or `CACHED name`), its output,
its error.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

TRACE_ID = "moby.buildkit.trace"
# a step's output held back while no newline ends it (a progress bar redrawn with \r, a binary dump): past this,
# it is shown as it stands, so memory stays bounded
PARTIAL_MAX = 64 * 1024


def context_tar(context: Path, exclude: list[str]) -> io.BufferedRandom:
    """The build context as a gzip-compressed tar in a temporary file (level 1: the wheels are zips already),
    `.dockerignore`'s patterns applied as the docker SDK applies them; members sorted, owned by root."""
    import tempfile

    from docker.utils.build import exclude_paths

    out = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the caller, which closes it
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for rel in sorted(exclude_paths(str(context), exclude, dockerfile=None)):
            info = tar.gettarinfo(os.path.join(context, rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                with open(os.path.join(context, rel), "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    out.seek(0)
    return out


def dockerignore(context: Path) -> list[str]:
    """`.dockerignore`'s patterns (blank lines and comments dropped), as the docker SDK reads them."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a truncated varint")
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one protobuf message: varints as int, the rest as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
            continue
        if wire == 2:
            size, i = _varint(buf, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
        if i + size > len(buf):
            raise ValueError("a truncated field")
        yield number, buf[i : i + size]
        i += size


def _text(value: int | bytes | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else ""


class Trace:
    """Turns the trace chunks of one build into lines, in order: each step once when it starts, its output
    lines (a line split across chunks is joined), and a failed step's error."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.shown: set[str] = set()
        self.failed: set[str] = set()
        self.partial: dict[str, str] = {}

    def lines(self, aux: object) -> list[str]:
        """The new lines in one chunk's `aux`; an undecodable one gives none (progress only, never the verdict)."""
        if not isinstance(aux, str):
            return []
        try:  # the vertexes (1) and logs (3), each decoded: one malformed part drops the whole message
            parts = [
                (number, dict(fields(value)))
                for number, value in fields(base64.b64decode(aux, validate=True))
                if number in (1, 3) and isinstance(value, bytes)
            ]
        except (ValueError, binascii.Error):
            return []
        out: list[str] = []
        for number, part in parts:
            out += self._vertex(part) if number == 1 else self._log(part)
        return out

    def _vertex(self, v: dict[int, int | bytes]) -> list[str]:
        digest, name = _text(v.get(1)), _text(v.get(3))
        if name:
            self.names[digest] = name
        out: list[str] = []
        if digest not in self.shown and (v.get(4) or 5 in v):
            self.shown.add(digest)
            out.append(("CACHED " if v.get(4) else "") + self.names.get(digest, digest))
        if 6 in v and self.partial.get(digest):
            out.append(self.partial.pop(digest))
        error = _text(v.get(7))
        if error and digest not in self.failed:
            self.failed.add(digest)
            name = self.names.get(digest, digest)  # `[torch 1/1] RUN ...`: its step, whose whole line came before
            out.append(f"ERROR {name[: name.index(']') + 1] if name.startswith('[') and ']' in name else name}: {error}")
        return out

    def _log(self, entry: dict[int, int | bytes]) -> list[str]:
        digest = _text(entry.get(1))
        text = self.partial.pop(digest, "") + _text(entry.get(4))
        *whole, rest = text.replace("\r\n", "\n").split("\n")
        if len(rest) > PARTIAL_MAX:
            whole.append(rest)
        elif rest:
            self.partial[digest] = rest
        return whole
