"""A project's dependencies, read statically: requirements files (with their -r / -c includes, inside the project
only, each file once, cycles and depth bounded), pyproject.toml ([project] dependencies and optional groups, PEP 735
dependency groups, Poetry's tables), setup.cfg, setup.py (its literal install_requires / extras_require: parsed with
`ast`, never run) and the pip section of a conda environment.yml. Then each dependency is classified from the
migration table, and CUDA builds and CUDA indexes are found.
"""

from __future__ import annotations

import ast
import configparser
import os
import posixpath
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from envkit.artifacts.project.findings import Dependency, Finding, make
from envkit.artifacts.project.table import Table, normalize
from envkit.artifacts.project.walk import DEPENDENCY, Project
from envkit.errors import BadInput

MAX_INCLUDE_DEPTH = 16
MAX_DEPENDENCIES = 5_000
_LINE_WINDOW = 2_000  # lines searched for a dependency's line
_CUDA_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/|test/)?cu\d{2,3}\b|\+cu\d{2,3}|%2[Bb]cu\d{2,3}")
_CUDA_LOCAL = re.compile(r"\+cu\d{2,3}")
_OPTION_SPLIT = re.compile(r"\s+(?=--?[A-Za-z])")
_WHEEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9._]*)-([0-9][^-]*)-[^/]*\.whl$")
_OPTIONS = {
    "-r": "include",
    "--requirement": "include",
    "-c": "constraint",
    "--constraint": "constraint",
    "-e": "editable",
    "--editable": "editable",
    "-i": "index",
    "--index-url": "index",
    "--extra-index-url": "index",
    "-f": "index",
    "--find-links": "index",
}


@dataclass
class DepScan:
    dependencies: list[Dependency] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    requires_python: list[tuple[str, str, int]] = field(default_factory=list)  # (specifier, path, line)
    # every optional group declared, empty ones too, as Dependency.group labels it ("optional:docs", "extras:docs",
    # "group:dev", "poetry:dev"), in the order read
    declared: list[str] = field(default_factory=list)
    group_includes: dict[str, list[str]] = field(default_factory=dict)  # PEP 735: group -> the groups it includes
    # the files a `-c` line names (and what they include), read inside the project: relative paths, each once
    constraint_files: list[str] = field(default_factory=list)
    # a `-c` line (or an include inside a constraints file) not read: (file, line, why)
    constraints_unread: list[tuple[str, int, str]] = field(default_factory=list)
    # a `-r` line of a requirements file not read (outside the project, a URL, a link out, too large): (file, line, why)
    includes_unread: list[tuple[str, int, str]] = field(default_factory=list)


class _Reader:
    def __init__(self, project: Project, table: Table) -> None:
        self.project = project
        self.table = table
        self.out = DepScan()
        self.read_requirements: set[str] = set()
        self.read_ok: set[str] = set()  # requirements files whose text was read
        self.capped = False

    # --- helpers -----------------------------------------------------------------------------------------------
    def finding(self, rule: str, path: str, line: int | None, message: str, **kw: Any) -> None:
        self.out.findings.append(make(self.table, rule, "dependency", path, line, message, **kw))

    def declare(self, group: str) -> None:
        if group not in self.out.declared:
            self.out.declared.append(group)

    def constraint_file(self, rel: str) -> None:
        if rel not in self.out.constraint_files:
            self.out.constraint_files.append(rel)

    def text(self, rel: str) -> str | None:
        try:
            raw = self.project.read(rel, DEPENDENCY)
        except BadInput as exc:
            self.finding("scan-unreadable", rel, None, f"{rel}: {exc.message}")
            return None
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.finding("scan-unreadable", rel, None, f"{rel} is not UTF-8 text (byte {exc.start}): not read")
            return None

    def add(self, spec: str, path: str, line: int, group: str, optional: bool = False) -> None:
        """One requirement string as written; a URL or wheel path is named from its file name or #egg=."""
        spec = re.sub(r"\s+", " ", spec).strip()
        if not spec:
            return
        if len(spec) > 2000:
            self.finding("dep-unparsed", path, line, f"{spec[:80]!r}...: over 2,000 characters, not classified")
            return
        if len(self.out.dependencies) >= MAX_DEPENDENCIES:
            if not self.capped:
                self.capped = True
                self.finding("scan-limit", path, line, f"more than {MAX_DEPENDENCIES} dependencies: the rest were not read")
            return
        from packaging.requirements import InvalidRequirement, Requirement

        req: Requirement | None
        try:
            req = Requirement(spec)
            name = req.name
        except InvalidRequirement:
            req = None
            name = _name_of_url(spec) or ""
            if not name:
                if not _local_path(spec):
                    self.finding("dep-unparsed", path, line, f"{spec[:200]!r} is not a PEP 508 requirement: not classified")
                return
        dep = Dependency(name=normalize(name), spec=spec, path=path, line=line, group=group, optional=optional, requirement=req)
        self.out.dependencies.append(dep)
        local = [s.version for s in req.specifier if _CUDA_LOCAL.search(s.version)] if req is not None else []
        url = req.url if req is not None and req.url else (spec if req is None else "")
        if local or (url and _CUDA_INDEX.search(url)):
            self.finding(
                "cuda-build-pin",
                path,
                line,
                f"{spec[:200]}: a CUDA build ({(local or [url])[0][:120]}): Ascend uses the CPU build plus torch-npu",
            )

    def index_lines(self, rel: str, lines: list[tuple[int, str]]) -> None:
        """A PyTorch CUDA index (or a +cuXXX find-links page) on any of `lines` (comments dropped)."""
        for i, raw in lines:
            line = re.sub(r"(^|\s)#.*$", "", raw)
            m = _CUDA_INDEX.search(line)
            if m and " @ " not in line:  # `name @ URL` is a requirement: cuda-build-pin says it
                self.finding("cuda-index", rel, i, f"{line.strip()[:200]}: an index of CUDA builds ({m.group(0)})")

    # --- requirements files ------------------------------------------------------------------------------------
    def requirements(self, rel: str, group: str, stack: tuple[str, ...] = (), text: str | None = None) -> None:
        if rel in stack:
            self.finding("dep-include-cycle", stack[-1], None, f"{stack[-1]} includes {rel}, which includes it back: read once")
            return
        if rel in self.read_requirements:
            return
        if len(stack) > MAX_INCLUDE_DEPTH:
            self.finding("scan-limit", rel, None, f"{rel}: included more than {MAX_INCLUDE_DEPTH} files deep: not read")
            return
        self.read_requirements.add(rel)
        if text is None:
            text = self.text(rel)
        if text is None:
            return
        self.read_ok.add(rel)
        logical = _logical_lines(text)
        self.index_lines(rel, [(n, line) for n, line in logical if _OPTIONS.get(_option(line)[0]) == "index"])
        for line_no, line in logical:
            self.requirement_line(rel, line_no, line, group, (*stack, rel))

    def requirement_line(self, rel: str, line_no: int, line: str, group: str, stack: tuple[str, ...]) -> None:
        if line.startswith("-"):
            option, arg = _option(line)
            what = _OPTIONS.get(option)
            if what in ("include", "constraint"):
                constraint = what == "constraint"
                self.include(rel, line_no, arg, "constraint" if constraint else group, stack, constraint)
            elif what == "editable":
                name = _name_of_url(arg)
                if name:
                    self.add(arg, rel, line_no, group)
            return
        self.add(_OPTION_SPLIT.split(line, maxsplit=1)[0], rel, line_no, group)

    def include(self, rel: str, line_no: int, target: str, group: str, stack: tuple[str, ...], constraint: bool = False) -> None:
        def unread(message: str) -> None:
            self.finding("dep-include-outside", rel, line_no, message)
            if constraint or rel in self.out.constraint_files:
                self.out.constraints_unread.append((rel, line_no, message))
            elif group == "requirements":
                self.out.includes_unread.append((rel, line_no, message))

        if not target:
            return
        if re.match(r"^[a-z][a-z0-9+.-]*://", target, re.I):
            unread(f"-r/-c {target[:200]}: a URL, not fetched")
            return
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target.replace(os.sep, "/")))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            unread(f"-r/-c {target[:200]}: outside the project, not read")
            return
        if joined in stack:
            self.finding("dep-include-cycle", rel, line_no, f"-r/-c {target[:200]}: {joined} is being read already (a cycle)")
            return
        if joined in self.read_requirements:  # included before: read once
            if group == "constraint" and joined in self.read_ok:
                self.constraint_file(joined)
            return
        try:
            raw = self.project.read(joined, DEPENDENCY)  # refuses a link out of the root, a FIFO, an oversized file
        except BadInput as exc:
            unread(f"-r/-c {target[:200]}: {exc.message}")
            return
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.finding("scan-unreadable", joined, None, f"{joined} is not UTF-8 text (byte {exc.start}): not read")
            if group == "constraint":
                self.out.constraints_unread.append((rel, line_no, f"-c {target[:200]}: not UTF-8 text, not read"))
            elif group == "requirements":
                self.out.includes_unread.append((rel, line_no, f"-r {target[:200]}: not UTF-8 text, not read"))
            return
        if group == "constraint":
            self.constraint_file(joined)
        self.requirements(joined, group, stack, text)

    # --- pyproject.toml ----------------------------------------------------------------------------------------
    def pyproject(self, rel: str) -> None:
        text = self.text(rel)
        if text is None:
            return
        toml = _toml()
        if toml is None:
            self.finding("scan-unreadable", rel, None, f"{rel}: not read (TOML needs Python >= 3.11 or the tomli package)")
            return
        try:
            doc = toml.loads(text)
        except (toml.TOMLDecodeError, RecursionError) as exc:
            self.finding("scan-unreadable", rel, None, f"{rel} is not TOML: {str(exc)[:200]}")
            return
        lines = text.splitlines()
        self.index_lines(rel, list(enumerate(lines, 1)))
        project = doc.get("project") if isinstance(doc.get("project"), dict) else {}
        assert isinstance(project, dict)
        rp = project.get("requires-python")
        if isinstance(rp, str):
            self.out.requires_python.append((rp, rel, _line_of(lines, rp, "requires-python")))
        self._strings(rel, lines, project.get("dependencies"), "project", False, _section_line(lines, "[project]"))
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            start = _section_line(lines, "optional-dependencies")
            for extra, items in optional.items():
                self.declare(f"optional:{extra}")
                start = self._strings(rel, lines, items, f"optional:{extra}", True, start)
        groups = doc.get("dependency-groups")
        if isinstance(groups, dict):
            start = _section_line(lines, "dependency-groups")
            for name, items in groups.items():
                if isinstance(items, list):  # {include-group = "x"} tables name another group: it is read as itself
                    self.declare(f"group:{name}")
                    self.out.group_includes[name] = [
                        i["include-group"] for i in items if isinstance(i, dict) and isinstance(i.get("include-group"), str)
                    ]
                    strings = [i for i in items if isinstance(i, str)]
                    start = self._strings(rel, lines, strings, f"group:{name}", True, start)
        tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
        assert isinstance(tool, dict)
        poetry = tool.get("poetry") if isinstance(tool.get("poetry"), dict) else {}
        assert isinstance(poetry, dict)
        pextras = poetry.get("extras") if isinstance(poetry.get("extras"), dict) else {}
        assert isinstance(pextras, dict)
        extras_of: dict[str, list[str]] = {}  # a dependency's name -> the [tool.poetry.extras] that install it
        for extra, names in pextras.items():
            if isinstance(extra, str) and isinstance(names, list):
                self.declare(f"extras:{extra}")
                for n in names:
                    if isinstance(n, str):
                        extras_of.setdefault(normalize(n), []).append(extra)
        self._poetry(rel, lines, poetry.get("dependencies"), "poetry", False, extras_of)
        deps_table = poetry.get("dependencies")
        if isinstance(deps_table, dict) and isinstance(deps_table.get("python"), str):
            rp = poetry_specifier(deps_table["python"])
            if rp:
                self.out.requires_python.append((rp, rel, _line_of(lines, deps_table["python"], "python")))
        pgroups = poetry.get("group")
        if isinstance(pgroups, dict):
            for name, body in pgroups.items():
                if isinstance(body, dict):
                    self.declare(f"poetry:{name}")
                    self._poetry(rel, lines, body.get("dependencies"), f"poetry:{name}", True)

    def _strings(self, rel: str, lines: list[str], items: object, group: str, optional: bool, start: int) -> int:
        """Each requirement string, its line searched from `start` on (they are written in order); the last line."""
        if not isinstance(items, list):
            return start
        for item in items:
            if isinstance(item, str):
                start = _line_of(lines, item, None, start)
                self.add(item, rel, start, group, optional)
        return start

    def _poetry(
        self, rel: str, lines: list[str], table: object, group: str, optional: bool, extras_of: dict[str, list[str]] | None = None
    ) -> None:
        """A Poetry dependencies table, its constraints in PEP 440 (`poetry_specifier`); a main dependency marked
        `optional = true` is installed only by the [tool.poetry.extras] that name it (Dependency.group `extras:X`)."""
        if not isinstance(table, dict):
            return
        line = _section_line(lines, "dependencies")
        for name, value in table.items():
            if not isinstance(name, str) or name.lower() == "python":
                continue
            version = value if isinstance(value, str) else value.get("version") if isinstance(value, dict) else None
            extras = value.get("extras") if isinstance(value, dict) else None
            wanted = "[" + ",".join(e for e in extras if isinstance(e, str)) + "]" if isinstance(extras, list) and extras else ""
            line = _line_of(lines, name, None, line, as_key=True)
            spec = poetry_specifier(version) if isinstance(version, str) else ""
            if spec is None:  # what PEP 440 cannot say (`||`): the name alone, and the reader is told
                assert isinstance(version, str)
                self.finding(
                    "dep-unparsed",
                    rel,
                    line,
                    f"{name} = {version[:100]!r}: a Poetry constraint PEP 440 cannot state; the name alone is kept",
                )
                spec = ""
            requirement = f"{name}{wanted}{spec}"
            if isinstance(value, dict) and value.get("optional") is True and extras_of is not None:
                # installed by the extras that name it; named by none: never installed, still classified
                for label in [f"extras:{x}" for x in extras_of.get(normalize(name), [])] or [group]:
                    self.add(requirement, rel, line, label, True)
                continue
            self.add(requirement, rel, line, group, optional)

    # --- setup.cfg ---------------------------------------------------------------------------------------------
    def setup_cfg(self, rel: str) -> None:
        text = self.text(rel)
        if text is None:
            return
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(text, source=rel)
        except configparser.Error as exc:
            self.finding("scan-unreadable", rel, None, f"{rel} is not an INI file: {str(exc).splitlines()[0][:200]}")
            return
        lines = text.splitlines()
        if parser.has_option("options", "python_requires"):
            rp = parser.get("options", "python_requires").strip()
            self.out.requires_python.append((rp, rel, _line_of(lines, rp, "python_requires")))
        if parser.has_option("options", "install_requires"):
            start = _section_line(lines, "[options]")
            for item in _cfg_list(parser.get("options", "install_requires")):
                start = _line_of(lines, item, None, start)
                self.add(item, rel, start, "install_requires")
        if parser.has_section("options.extras_require"):
            start = _section_line(lines, "[options.extras_require]")
            for extra, value in parser.items("options.extras_require"):
                self.declare(f"extras:{extra}")
                for item in _cfg_list(value):
                    start = _line_of(lines, item, None, start)
                    self.add(item, rel, start, f"extras:{extra}", True)

    # --- setup.py ----------------------------------------------------------------------------------------------
    def setup_py(self, rel: str, source: bytes | None = None) -> None:
        if source is None:
            text = self.text(rel)
            if text is None:
                return
            source = text.encode()
        try:
            tree = ast.parse(source, filename=rel)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # the code scan reports the syntax error
        names = _module_literals(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _func_name(node.func) == "setup"):
                continue
            for kw in node.keywords:
                if kw.arg == "install_requires":
                    self._literal(rel, kw.value, names, "install_requires", False)
                elif kw.arg == "extras_require":
                    value = names.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
                    if isinstance(value, ast.Dict):
                        for k, v in zip(value.keys, value.values, strict=True):
                            extra = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else "?"
                            self.declare(f"extras:{extra}")
                            self._literal(rel, v, names, f"extras:{extra}", True)
                    else:
                        self._not_literal(rel, kw)
                elif kw.arg == "python_requires":
                    if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        self.out.requires_python.append((kw.value.value, rel, kw.value.lineno))

    def _literal(self, rel: str, value: ast.expr, names: dict[str, ast.expr], group: str, optional: bool) -> None:
        items = _string_items(value, names)
        if items is None:
            self.finding(
                "dep-not-literal",
                rel,
                getattr(value, "lineno", None),
                f"{group} is computed at run time ({ast.unparse(value)[:80]}): not read, envkit never runs setup.py",
            )
            return
        for text, line in items:
            for part in text.splitlines():
                part = re.sub(r"(^|\s)#.*$", "", part).strip()
                if part:
                    self.add(part, rel, line, group, optional)

    def _not_literal(self, rel: str, kw: ast.keyword) -> None:
        self.finding(
            "dep-not-literal",
            rel,
            kw.value.lineno,
            f"{kw.arg} is computed at run time ({ast.unparse(kw.value)[:80]}): not read, envkit never runs setup.py",
        )

    # --- environment.yml ---------------------------------------------------------------------------------------
    def conda(self, rel: str) -> None:
        text = self.text(rel)
        if text is None:
            return
        from envkit.io.yamlio import load_text

        try:
            data, lines = load_text(text, rel)
        except BadInput as exc:
            self.finding("scan-unreadable", rel, exc.where.line if exc.where else None, self.project.relative(exc.message))
            return
        deps = data.get("dependencies") if isinstance(data, dict) else None
        if not isinstance(deps, list):
            return
        for i, item in enumerate(deps):
            if not isinstance(item, dict) or not isinstance(item.get("pip"), list):
                continue
            for j, entry in enumerate(item["pip"]):
                if isinstance(entry, str):
                    line = lines.get(f"dependencies.{i}.pip.{j}") or lines.get(f"dependencies.{i}") or 1
                    if _OPTIONS.get(_option(entry.strip())[0]) == "index":
                        self.index_lines(rel, [(line, entry.strip())])
                    self.requirement_line(rel, line, entry.strip(), "conda-pip", (rel,))


# --- module-level helpers ---------------------------------------------------------------------------------------
def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:  # pragma: no cover - Python 3.10
        import tomli

        return tomli
    except ImportError:  # pragma: no cover
        return None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with `\\` continuations joined and comments dropped, as pip reads them."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for i, raw in enumerate(text.splitlines(), 1):
        if not buf:
            start = i
        if raw.endswith("\\"):
            buf.append(raw[:-1])
            continue
        buf.append(raw)
        line = re.sub(r"(^|\s)#.*$", "", " ".join(buf)).strip()
        buf = []
        if line:
            out.append((start, line))
    if buf:
        line = re.sub(r"(^|\s)#.*$", "", " ".join(buf)).strip()
        if line:
            out.append((start, line))
    return out


def _option(line: str) -> tuple[str, str]:
    """('-r', 'file') from `-r file`, `-rfile`, `--requirement=file`, `--requirement file`."""
    m = re.match(r"^(--[A-Za-z-]+)(?:=|\s+)?(.*)$", line)
    if m:
        return m.group(1), m.group(2).strip()
    m = re.match(r"^(-[A-Za-z])\s*=?\s*(.*)$", line)
    if m:
        return m.group(1), m.group(2).strip()
    return line, ""


def _local_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~", "file:")) or (("/" in spec or "\\" in spec) and "://" not in spec)


def _name_of_url(spec: str) -> str | None:
    """The project a URL, VCS link or wheel path names (#egg=, the wheel's file name, the repository)."""
    m = re.search(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if m:
        return m.group(1)
    path = spec.split("#", 1)[0].split("?", 1)[0]
    from urllib.parse import unquote

    m = _WHEEL.search(unquote(path).rsplit("/", 1)[-1])
    if m:
        return m.group(1)
    m = re.match(r"^(?:git|hg|svn|bzr)\+[a-z]+://[^@]*?/([A-Za-z0-9._-]+?)(?:\.git)?(?:@[^/]*)?/?$", path)
    if m:
        return m.group(1)
    return None


def _line_of(lines: list[str], text: str, key: str | None = None, start: int = 1, *, as_key: bool = False) -> int:
    """The line of `key = ...`, else the first line from `start` holding `text` quoted (as a key with `as_key`),
    else holding it at all; `start` when none does."""
    if key is not None:
        for i, line in enumerate(lines, 1):
            if re.match(rf"\s*{re.escape(key)}\s*=", line):
                return i
    first = max(start, 1) - 1
    end = min(len(lines), first + _LINE_WINDOW)  # bounded: a hostile file of many unfound items stays linear
    for i in range(first, end):
        line = lines[i]
        if as_key:
            if re.match(rf"""\s*["']?{re.escape(text)}["']?\s*=""", line):
                return i + 1
        elif f'"{text}"' in line or f"'{text}'" in line:
            return i + 1
    for i in range(first, end):
        if text in lines[i]:
            return i + 1
    return max(start, 1)


def _section_line(lines: list[str], section: str) -> int:
    """The line of a TOML/INI section header that names `section` (or of a `section = ` key), 1 when absent."""
    name = section.strip("[]")
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if (s.startswith("[") and name in s) or re.match(rf"^{re.escape(name)}\s*=", s):
            return i
    return 1


def _cfg_list(value: str) -> list[str]:
    """setup.cfg's dangling list: one requirement a line, comments dropped."""
    return [p for p in (re.sub(r"(^|\s)#.*$", "", x).strip() for x in value.splitlines()) if p]


def _func_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _module_literals(tree: ast.Module) -> dict[str, ast.expr]:
    """NAME = <expression> at module level (the last one wins), for install_requires=NAME."""
    out: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            out[stmt.target.id] = stmt.value
    return out


def _string_items(value: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> list[tuple[str, int]] | None:
    """The strings of a literal list/tuple (or NAME bound to one, or list + list); None when not literal."""
    if depth > 8:
        return None
    if isinstance(value, ast.Name) and value.id in names:
        return _string_items(names[value.id], names, depth + 1)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left = _string_items(value.left, names, depth + 1)
        right = _string_items(value.right, names, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [(value.value, value.lineno)]
    if isinstance(value, (ast.List, ast.Tuple)):
        out: list[tuple[str, int]] = []
        for elt in value.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                out.append((elt.value, elt.lineno))
            else:
                return None
        return out
    return None


def read_dependencies(project: Project, table: Table, python_sources: dict[str, bytes] | None = None) -> DepScan:
    """Every dependency file of the project, read (never run)."""
    reader = _Reader(project, table)
    for rel, kind in project.dependency:
        if kind in ("requirements", "constraints"):
            reader.requirements(rel, "constraint" if kind == "constraints" else "requirements")
        elif kind == "pyproject":
            reader.pyproject(rel)
        elif kind == "setup.cfg":
            reader.setup_cfg(rel)
        elif kind == "setup.py":
            reader.setup_py(rel, (python_sources or {}).get(rel))
        elif kind == "conda":
            reader.conda(rel)
    return reader.out


# --- Poetry's version constraints ---------------------------------------------------------------------------
_POETRY_ONE = re.compile(r"^(\^|~(?!=)|~=|==|!=|>=|<=|>|<|=)?\s*([0-9][0-9A-Za-z.+!*-]*)$")


def poetry_specifier(text: str) -> str | None:
    """A Poetry version constraint as a PEP 440 specifier ("" for any version), as Poetry's dependency-specification
    page defines them: ^1.2.3 is >=1.2.3,<2.0.0 (the left-most non-zero part may not change: ^0.2.3 <0.3.0, ^0.0.3
    <0.0.4, ^0 <1.0.0), ~1.2.3 is >=1.2.3,<1.3.0 (~1 <2.0.0), 1.2.* is ==1.2.*, a bare version is ==, and
    comma- or space-separated constraints all hold. None for what PEP 440 cannot say (`||`: either of two) or
    what is not a constraint."""
    from packaging.version import InvalidVersion, Version

    text = text.strip()
    if text in ("", "*"):
        return ""
    if "|" in text or len(text) > 200:
        return None
    text = re.sub(r"(\^|~=?|[=!<>]=|[<>=])\s+", r"\1", text)  # ">= 1.2": the operator and its version, one part
    parts = [p for p in re.split(r"\s*,\s*|\s+", text) if p]
    out: list[str] = []
    for part in parts:
        m = _POETRY_ONE.match(part)
        if not m:
            return None
        op, version = m.group(1) or "", m.group(2)
        if "*" in version:
            if op not in ("", "==", "=", "!=") or not re.fullmatch(r"[0-9]+(\.[0-9]+)*\.\*", version):
                return None
            out.append(("!=" if op == "!=" else "==") + version)
            continue
        if op in ("^", "~"):
            try:
                ints = list(Version(version).release)
            except InvalidVersion:
                return None
            if op == "^":
                first = next((i for i, n in enumerate(ints) if n), len(ints) - 1)
                upper = ints[: first + 1]
            else:
                upper = ints[:2] if len(ints) > 1 else ints[:1]
            upper = upper[:-1] + [upper[-1] + 1]
            out += [f">={version}", "<" + ".".join(map(str, upper + [0] * (3 - len(upper))))]
            continue
        out.append(("==" if op in ("", "=") else op) + version)
    return ",".join(out)
