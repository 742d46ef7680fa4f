"""The files handed in (`--artifacts DIR`, `--requirements FILE`), read into data once: the image plan reads this
listing and never the folder.

`scan` lists the folder's top-level files, hashes its wheelhouse (DIR/wheels, else DIR's own wheels) and reads the
requirements file; `with_vendor` then hashes the vendor packages a lock picks from the listing (gigabytes: the job
calls it once the lock's Python pins are known to be there) and lists a signed zip's members. `pick` is the one rule
that says which listed file a vendor package is: the scan and the plan both apply it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from envkit.errors import BadInput, Where
from envkit.io.outputs import sha256_file

Hasher = Callable[[Path], str]


@dataclass(frozen=True)
class HandedFile:
    path: Path
    sha256: str
    members: tuple[str, ...] = ()  # a zip's member paths, sorted (the vendor's signed edition holds the .run)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class HandedIn:
    folder: Path | None = None  # --artifacts DIR (None: nothing handed in)
    names: tuple[str, ...] = ()  # its top-level regular files, sorted
    vendor: dict[str, HandedFile] = field(default_factory=dict)  # the listed files a lock picked, hashed, by name
    wheels: tuple[HandedFile, ...] = ()  # the wheelhouse, hashed, sorted by path
    requirements: tuple[str, str] | None = None  # --requirements FILE: (the path as given, its text)

    def member(self, name: str, pattern: str) -> str | None:
        """The first member of the zip `name` whose file name matches `pattern` (the .run of a signed edition)."""
        hits = [m for m in self.vendor[name].members if fnmatch.fnmatch(m.rsplit("/", 1)[-1], pattern)]
        return hits[0] if hits else None


def pick(names: Iterable[str], name: str | None, pattern: str) -> str | None:
    """Which listed file a vendor package is: its exact `name` where the lock names one, else the first (sorted)
    file matching `pattern`."""
    listed = sorted(names)
    if name is not None:
        return name if name in listed else None
    hits = [n for n in listed if fnmatch.fnmatchcase(n, pattern)]
    return hits[0] if hits else None


def scan(
    folder: Path | None, requirements: Path | None = None, hasher: Hasher = sha256_file, *, wheelhouse: bool = True
) -> HandedIn:
    """The listing of `folder` (its top-level files, its wheelhouse hashed unless `wheelhouse` is false: a bundle
    brings its own wheels) and the requirements file's text."""
    reqs = (str(requirements), Path(requirements).read_text()) if requirements is not None else None
    if folder is None:
        return HandedIn(requirements=reqs)
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"--artifacts {folder} is not a directory", where=Where(str(folder)))
    names = tuple(sorted(p.name for p in folder.iterdir() if p.is_file()))
    wheel_dir = folder / "wheels" if (folder / "wheels").is_dir() else folder
    wheels = tuple(HandedFile(w, hasher(w)) for w in sorted(wheel_dir.glob("*.whl"))) if wheelhouse else ()
    return HandedIn(folder=folder, names=names, wheels=wheels, requirements=reqs)


Wanted = tuple[tuple[str | None, str], ...]  # a package's files in the order tried, (name or None, pattern) each


def with_vendor(handed: HandedIn, wanted: Iterable[Wanted], hasher: Hasher = sha256_file) -> HandedIn:
    """`handed` with the first listed file of each package `wanted` hashed (only that one: a signed zip found, its
    bare .run is not read), and the members of each zip among them listed."""
    import zipfile

    if handed.folder is None:
        return handed
    vendor = dict(handed.vendor)
    for tries in wanted:
        got = next((g for name, pattern in tries if (g := pick(handed.names, name, pattern)) is not None), None)
        if got is None or got in vendor:
            continue
        path = handed.folder / got
        members: tuple[str, ...] = ()
        if got.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                members = tuple(sorted(zf.namelist()))
        vendor[got] = HandedFile(path, hasher(path), members)
    return replace(handed, vendor=vendor)
