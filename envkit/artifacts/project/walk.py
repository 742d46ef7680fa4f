"""The project folder, untrusted: which files a scan reads, and reading them safely.

Nothing in the folder is imported or run. The walk never follows a link to a folder, never opens what is not a
regular file (a FIFO is listed, never opened: no hang), and stops at its caps (files, bytes, depth, entries); every
read goes through `envkit.io.untrusted` (regular files only, capped, no link out of the root). What is not read
becomes an `info` finding, never an exception.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import BadInput, Where
from envkit.io import untrusted

MAX_PYTHON_FILES = 20_000
MAX_DEPENDENCY_FILES = 500
MAX_ENTRIES = 400_000  # directory entries looked at
MAX_DEPTH = 48
MAX_TOTAL_BYTES = 512 << 20  # read in all
PYTHON = untrusted.Kind("a Python source file", 4 << 20)
DEPENDENCY = untrusted.Kind("a dependency file", 1 << 20)

# folders that hold no project code of its own: tools' caches, virtual environments, installed packages
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages", "venv", "build", "dist", "wheelhouse"})


def dependency_kind(rel: str) -> str | None:
    """requirements | constraints | pyproject | setup.cfg | setup.py | conda, or None: not a dependency file."""
    name = rel.rsplit("/", 1)[-1]
    lower = name.lower()
    if lower == "pyproject.toml":
        return "pyproject"
    if lower == "setup.cfg":
        return "setup.cfg"
    if lower == "setup.py":
        return "setup.py"
    if lower in ("environment.yml", "environment.yaml"):
        return "conda"
    if fnmatch.fnmatchcase(lower, "*constraints*.txt"):
        return "constraints"
    parent = rel.rsplit("/", 2)[-2].lower() if "/" in rel else ""
    if fnmatch.fnmatchcase(lower, "*requirements*.txt") or fnmatch.fnmatchcase(lower, "*requirements*.in"):
        return "requirements"
    if parent in ("requirements", "reqs") and lower.endswith((".txt", ".in")):
        return "requirements"
    return None


@dataclass
class Project:
    """The folder scanned (resolved), the files found, and what could not be read."""

    root: Path
    python: list[str] = field(default_factory=list)  # relative POSIX paths
    dependency: list[tuple[str, str]] = field(default_factory=list)  # (relative path, kind)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (relative path, why) for files a scan wanted
    limits: list[str] = field(default_factory=list)
    bytes_read: int = 0

    def read(self, rel: str, kind: untrusted.Kind) -> bytes:
        """The bytes of `rel` inside the root; BadInput (the reason, with the path relative) for anything else."""
        if self.bytes_read > MAX_TOTAL_BYTES:
            raise BadInput(f"{rel}: not read, the scan read {MAX_TOTAL_BYTES} bytes already")
        try:
            data = untrusted.read_bytes(rel, kind, root=self.root)
        except BadInput as exc:
            raise BadInput(self.relative(exc.message), where=Where(rel)) from None
        self.bytes_read += len(data)
        return data

    def relative(self, text: str) -> str:
        """A message with the root's absolute path taken out."""
        return text.replace(str(self.root) + os.sep, "").replace(str(self.root), ".")


def _wanted(rel: str, name: str) -> bool:
    return name.endswith(".py") or dependency_kind(rel) is not None


def walk(path: Path) -> Project:
    """The Python and dependency files of the project at `path` (a folder, or one file); BadInput when `path` is
    neither."""
    given = Path(path)
    try:
        st = os.stat(given)
    except FileNotFoundError:
        raise BadInput(f"{given} does not exist", where=Where(str(given)), hint="Give the project's folder.") from None
    except OSError as exc:
        raise BadInput(f"{given} cannot be read: {exc.strerror or exc}", where=Where(str(given))) from None
    if stat.S_ISREG(st.st_mode):
        root = given.resolve().parent
        project = Project(root=root)
        rel = given.resolve().name
        if rel.endswith(".py"):
            project.python.append(rel)
        kind = dependency_kind(rel)
        if kind:
            project.dependency.append((rel, kind))
        if not project.python and not project.dependency:
            raise BadInput(
                f"{given} is neither a Python file nor a dependency file",
                where=Where(str(given)),
                hint="Give the project's folder, a .py file, requirements*.txt, pyproject.toml, setup.cfg or setup.py.",
            )
        return project
    if not stat.S_ISDIR(st.st_mode):
        what = untrusted.not_regular(st.st_mode) or "not a folder"
        raise BadInput(f"{given} is {what}, not a project folder", where=Where(str(given)), hint="Give the project's folder.")
    project = Project(root=given.resolve())
    _walk_dirs(project)
    project.python.sort()
    project.dependency.sort()
    return project


def _walk_dirs(project: Project) -> None:
    entries_seen = 0
    todo: list[tuple[Path, str, int]] = [(project.root, "", 0)]
    while todo:
        folder, prefix, depth = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            project.skipped.append((prefix.rstrip("/") or ".", f"folder not read: {exc.strerror or exc}"))
            continue
        subdirs = []
        for entry in entries:
            entries_seen += 1
            if entries_seen > MAX_ENTRIES:
                project.limits.append(f"more than {MAX_ENTRIES} entries: the rest of the folder was not looked at")
                return
            rel = prefix + entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name.startswith(".") or entry.name in SKIP_DIRS or entry.name.endswith(".egg-info"):
                    continue
                if depth + 1 > MAX_DEPTH:
                    project.limits.append(f"{rel}: deeper than {MAX_DEPTH} folders, not looked into")
                    continue
                subdirs.append((Path(entry.path), rel + "/", depth + 1))
                continue
            if not _wanted(rel, entry.name):
                continue
            if not is_link:
                try:
                    est = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    project.skipped.append((rel, f"cannot be read: {exc.strerror or exc}"))
                    continue
                what = untrusted.not_regular(est.st_mode)
                if what:  # a FIFO, socket or device: never opened
                    project.skipped.append((rel, f"{what}, not a regular file: not opened"))
                    continue
                cap = PYTHON.max_bytes if entry.name.endswith(".py") else DEPENDENCY.max_bytes
                if est.st_size > cap:
                    project.skipped.append((rel, f"{est.st_size} bytes, over the {cap}-byte cap: not read"))
                    continue
            # a link is read through untrusted (which refuses one that leads out of the root)
            if entry.name.endswith(".py"):
                if len(project.python) >= MAX_PYTHON_FILES:
                    if not any("Python files" in m for m in project.limits):
                        project.limits.append(f"more than {MAX_PYTHON_FILES} Python files: the rest were not scanned")
                    continue
                project.python.append(rel)
            kind = dependency_kind(rel)
            if kind and len(project.dependency) < MAX_DEPENDENCY_FILES:
                project.dependency.append((rel, kind))
        todo.extend(reversed(subdirs))
