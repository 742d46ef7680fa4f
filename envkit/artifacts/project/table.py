"""The migration table (matrices/migration.yaml) as `envkit scan` reads it: rules by id, dependency rows by project
name, alias, glob or import name. Loaded once per process, validated by its strict model."""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import MatrixError, Where

if TYPE_CHECKING:
    from envkit.models.migration import DependencyRow, MigrationTable, ScanRule

TABLE_FILE = "migration.yaml"  # in matrices/; not part of the stack matrix (envkit.core.matrix.NOT_MATRIX_FILES)


def normalize(name: str) -> str:
    """A project name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Table:
    model: MigrationTable
    path: str

    @functools.cached_property
    def rules(self) -> dict[str, ScanRule]:
        return {r.id: r for r in self.model.rules}

    @functools.cached_property
    def _names(self) -> dict[str, DependencyRow]:
        return {n: row for row in self.model.dependencies for n in (row.name, *row.aliases) if "*" not in n}

    @functools.cached_property
    def _globs(self) -> list[tuple[str, DependencyRow]]:
        return [(n, row) for row in self.model.dependencies for n in (row.name, *row.aliases) if "*" in n]

    @functools.cached_property
    def modules(self) -> dict[str, DependencyRow]:
        return {m: row for row in self.model.dependencies for m in row.modules}

    def rule(self, rule_id: str) -> ScanRule:
        return self.rules[rule_id]

    def dependency(self, name: str) -> DependencyRow | None:
        """The row of a project name (normalized first), an alias or a glob; None for a name the table lacks."""
        key = normalize(name)
        row = self._names.get(key)
        if row is not None:
            return row
        return next((r for pattern, r in self._globs if fnmatch.fnmatchcase(key, pattern)), None)


def table_path() -> Path:
    from envkit.resources import matrices_dir

    return matrices_dir() / TABLE_FILE


@functools.lru_cache(maxsize=2)
def load_table(path: str | None = None) -> Table:
    """The migration table; a malformed file is MatrixError (exit 1) naming file:line."""
    from pydantic import ValidationError

    from envkit.io.yamlio import load_file
    from envkit.models.migration import MigrationTable

    file = Path(path) if path else table_path()
    data, lines = load_file(file)
    try:
        model = MigrationTable.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        line = next((lines[k] for k in (key, key.rsplit(".", 1)[0]) if k in lines), None)
        raise MatrixError(
            f"migration table row invalid: {first['msg']} ({len(exc.errors())} error(s))",
            where=Where(str(file), line, key or None),
            hint="Fix the row; every row needs source and confidence (stated | derived | inferred).",
        ) from None
    return Table(model=model, path=str(file))
